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
	"github.com/aws/smithy-go"

	"github.com/agentauth/agentauth/shared/domain"
)

type fakeSM struct {
	secrets map[string]string
	calls   int
	err     error // every call fails with it when set
}

func (f *fakeSM) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
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

// TestAWSErrorsHoldNoMessage: an AWS error's message (which can quote the
// request) never reaches the error text; its code does (awserr).
func TestAWSErrorsHoldNoMessage(t *testing.T) {
	const echoed = "echoed-request-canary"
	r := New(&fakeSM{err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "denied for " + echoed}}, "agentauth/")
	_, err := r.ResolveSecret("slack", "clientSecret")
	var api smithy.APIError
	if err == nil || strings.Contains(err.Error(), echoed) || !strings.Contains(err.Error(), "read secret agentauth/slack: api error AccessDeniedException") || !errors.As(err, &api) {
		t.Fatalf("err %v", err)
	}
}
