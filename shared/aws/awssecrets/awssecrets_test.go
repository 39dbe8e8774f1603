package awssecrets

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/agentauth/agentauth/shared/domain"
)

type fakeSM struct {
	secrets map[string]string
	calls   int
}

func (f *fakeSM) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.calls++
	v, ok := f.secrets[*in.SecretId]
	if !ok {
		return nil, &smtypes.ResourceNotFoundException{Message: aws.String("nope")}
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
}

func TestResolveSecret(t *testing.T) {
	f := &fakeSM{secrets: map[string]string{
		"agentauth/slack": `{"clientSecret":"s3cret-value","other":"x"}`,
		"agentauth/bad":   `not json s3cret-value`,
	}}
	r := New(f, "agentauth/")
	v, err := r.ResolveSecret("slack", "clientSecret")
	if err != nil || v.Reveal() != "s3cret-value" {
		t.Fatalf("%v %v", v, err)
	}
	if _, err := r.ResolveSecret("slack", "other"); err != nil || f.calls != 1 {
		t.Fatalf("second key fetched again: %d calls, %v", f.calls, err)
	}
	for _, tc := range []struct{ name, key, want string }{
		{"slack", "missing", `no key "missing"`},
		{"absent", "k", "does not exist"},
		{"bad", "k", "JSON object"},
	} {
		_, err := r.ResolveSecret(tc.name, tc.key)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s/%s: %v", tc.name, tc.key, err)
		}
	}
	if _, err := r.ResolveSecret("absent", "k"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("not found: %v", err)
	}
	s, err := r.String("agentauth/bad")
	if err != nil || fmt.Sprint(s) != domain.Redacted {
		t.Fatalf("String: %v", err)
	}
}
