//go:build integration

package awssecrets

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

func TestAgainstEmulator(t *testing.T) {
	if os.Getenv("AWS_ENDPOINT_URL") == "" {
		if os.Getenv("AGENTAUTH_REQUIRE_EMULATOR") == "1" {
			t.Fatal("AWS_ENDPOINT_URL is not set")
		}
		t.Skip("set AWS_ENDPOINT_URL (localstack/ministack.sh up) to run")
	}
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
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
