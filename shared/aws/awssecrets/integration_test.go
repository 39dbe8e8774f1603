//go:build integration

package awssecrets

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

func TestAgainstEmulator(t *testing.T) {
	ctx := context.Background()
	cfg := emulatortest.Config(t)
	api := secretsmanager.NewFromConfig(cfg)
	prefix := fmt.Sprintf("agentauth-test-%d/", time.Now().UnixNano())
	if _, err := api.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(prefix + "slack"), SecretString: aws.String(`{"clientSecret":"v1"}`)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = api.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(prefix + "slack"), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	r := New(api, prefix)
	v, err := r.ResolveSecret("slack", "clientSecret")
	if err != nil || v.Reveal() != "v1" {
		t.Fatalf("%v", err)
	}
	if _, err := r.ResolveSecret("nope", "k"); err == nil {
		t.Fatal("missing secret resolved")
	}
}
