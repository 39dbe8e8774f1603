// Package emulatortest gives integration tests the SDK configuration of
// the local AWS emulator (MiniStack by default) named by AWS_ENDPOINT_URL,
// and throwaway DynamoDB tables on it.
// Tests skip when it is unset — fail instead with
// AGENTAUTH_REQUIRE_EMULATOR=1, as make test-integration sets — and refuse
// any endpoint that is not a loopback address: they create and delete
// resources and must never reach a real account.
//
// Only tests import it.
package emulatortest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/agentauth/agentauth/shared/aws/awsconfig"
)

// Config returns the emulator's SDK configuration (awsconfig.Load), or
// skips t.
func Config(t testing.TB) aws.Config {
	t.Helper()
	endpoint := os.Getenv("AWS_ENDPOINT_URL")
	if endpoint == "" {
		msg := "AWS_ENDPOINT_URL is not set: run `localstack/ministack.sh up` and set " +
			"AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1"
		if os.Getenv("AGENTAUTH_REQUIRE_EMULATOR") == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	u, err := url.Parse(endpoint)
	if err != nil || !Loopback(u.Hostname()) {
		t.Fatalf("AWS_ENDPOINT_URL %s is not a loopback address; the integration tests only talk to a local emulator", endpoint)
	}
	cfg, err := awsconfig.Load(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Loopback reports whether host is localhost or a loopback IP.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Name returns prefix plus a random suffix: the emulator is shared, so
// every test's resources get their own names.
func Name(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}
