package awsbackends

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentauth/agentauth/shared/domain"
)

func TestSessionKeys(t *testing.T) {
	long := strings.Repeat("a", 32)
	keys, err := SessionKeys(domain.NewSecret(long + ", " + strings.Repeat("b", 40)))
	if err != nil || len(keys) != 2 || len(keys[0]) != 32 || string(keys[0]) == string(keys[1]) {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	for _, bad := range []string{"", "short", long + ",short"} {
		if _, err := SessionKeys(domain.NewSecret(bad)); err == nil || strings.Contains(err.Error(), long) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestOpenNamesMissingSettings(t *testing.T) {
	_, err := Open(context.Background(), Settings{Table: "t", QueueURL: "q"}, nil)
	if err == nil || err.Error() != "awsbackends: no KMS key, session keys secret" {
		t.Fatalf("%v", err)
	}
}

type tagSealer string

func (s tagSealer) Seal(_ context.Context, p []byte, _ domain.Binding) (domain.EncryptedValue, error) {
	return domain.EncryptedValue{KeyID: string(s)}, nil
}
func (s tagSealer) Open(context.Context, domain.EncryptedValue, domain.Binding) ([]byte, error) {
	return []byte(s), nil
}

func TestRoutedPicksByRecord(t *testing.T) {
	r := Routed{Grants: tagSealer("kms"), Sessions: tagSealer("local")}
	g, _ := r.Seal(context.Background(), nil, domain.Binding{Record: "grant"})
	s, _ := r.Seal(context.Background(), nil, domain.Binding{Record: "session"})
	if g.KeyID != "kms" || s.KeyID != "local" {
		t.Fatalf("grant %s session %s", g.KeyID, s.KeyID)
	}
}

// TestOpenBundle: a bundle folder opens the git bundle on the table
// without a call; a bad folder is refused by name.
func TestOpenBundle(t *testing.T) {
	b := &Backends{DynamoDB: dynamodb.NewFromConfig(aws.Config{}), Table: "agentauth-records"}
	if err := b.openBundle(s3.NewFromConfig(aws.Config{}), Settings{BundleBucket: "turnblobs", BundlePrefix: "bundle/"}); err != nil {
		t.Fatal(err)
	}
	if b.BundleRepo == nil || b.BundleRecords == nil || b.BundleWhere != "git s3://turnblobs/bundle/" {
		t.Fatalf("%+v", b)
	}
	if err := (&Backends{DynamoDB: b.DynamoDB, Table: "t"}).openBundle(s3.NewFromConfig(aws.Config{}), Settings{BundleBucket: "b", BundlePrefix: "no-slash"}); err == nil {
		t.Fatal("a prefix without '/' opened")
	}
}
