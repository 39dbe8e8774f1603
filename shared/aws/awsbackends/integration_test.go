//go:build integration

package awsbackends

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
)

func TestRewrapMovesGrantsToAnotherKey(t *testing.T) {
	ctx := context.Background()
	cfg := emulatortest.Config(t)
	suffix := fmt.Sprint(time.Now().UnixNano())
	ddb, kmsc, sm, sqsc := dynamodb.NewFromConfig(cfg), kms.NewFromConfig(cfg), secretsmanager.NewFromConfig(cfg), sqs.NewFromConfig(cfg)
	table := "agentauth-rewrap-" + suffix
	if _, err := ddb.CreateTable(ctx, dynamostore.TableSchema(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	k1, err := kmsc.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	k2, err := kmsc.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("agentauth-rewrap-" + suffix + ".fifo"), Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	secret := "agentauth-rewrap-" + suffix
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(secret), SecretString: aws.String(strings.Repeat("k", 40))}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(secret), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	settings := Settings{Table: table, KMSKeyID: *k1.KeyMetadata.Arn, QueueURL: *q.QueueUrl, SessionKeysSecret: secret}
	be, err := Open(ctx, settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := domain.Grant{ID: "grant-0123456789abcdef", Provider: "demo", OAuthAppRef: domain.ObjectRef{Kind: "OAuthApp", Name: "a"}, Subject: "s",
		Flow: domain.FlowAuthorizationCode, ScopesGranted: []string{"read"}, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	at, err := be.GrantSealer.Seal(ctx, []byte("the-access-token"), domain.GrantBinding(g, domain.FieldAccessToken))
	if err != nil {
		t.Fatal(err)
	}
	g.Token = domain.GrantToken{TokenType: "Bearer", AccessToken: at, IssuedAt: time.Now().UTC()}
	if _, err := be.Store.PutGrant(ctx, g, 0); err != nil {
		t.Fatal(err)
	}
	n, err := be.Rewrap(ctx, *k2.KeyMetadata.Arn)
	if err != nil || n != 1 {
		t.Fatalf("rewrap: %d %v", n, err)
	}
	if _, err := kmsc.DisableKey(ctx, &kms.DisableKeyInput{KeyId: k1.KeyMetadata.KeyId}); err != nil {
		t.Fatal(err)
	}
	settings.KMSKeyID = *k2.KeyMetadata.Arn
	fresh, err := Open(ctx, settings, nil) // cold caches
	if err != nil {
		t.Fatal(err)
	}
	got, err := fresh.Store.GetGrant(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Token.AccessToken.KeyID != *k2.KeyMetadata.Arn {
		t.Fatalf("still under %s", got.Token.AccessToken.KeyID)
	}
	v, err := fresh.GrantSealer.Open(ctx, got.Token.AccessToken, domain.GrantBinding(got, domain.FieldAccessToken))
	if err != nil || string(v) != "the-access-token" {
		t.Fatalf("open after rewrap with the old key disabled: %q %v", v, err)
	}
}
