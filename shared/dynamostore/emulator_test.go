//go:build integration

package dynamostore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/awsconfig"
)

// The integration tests run against a local DynamoDB emulator (MiniStack
// by default) named by AWS_ENDPOINT_URL. They create a table per test with
// a random name and delete it at the end, since the emulator is shared.

var (
	clientOnce sync.Once
	client     *dynamodb.Client
	clientErr  string
)

// emulator returns the DynamoDB client for the emulator, or skips the test
// when none is configured (fails instead with AGENTAUTH_REQUIRE_EMULATOR=1).
func emulator(t *testing.T) *dynamodb.Client {
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
	clientOnce.Do(func() {
		// These tests create and delete tables: never point them at AWS.
		u, err := url.Parse(endpoint)
		if err != nil || !loopback(u.Hostname()) {
			clientErr = "AWS_ENDPOINT_URL " + endpoint + " is not a loopback address; the integration tests only talk to a local emulator"
			return
		}
		// awsconfig, as the functions use: its HTTP client never replays
		// a write the emulator already applied.
		cfg, err := awsconfig.Load(context.Background(), nil)
		if err != nil {
			clientErr = err.Error()
			return
		}
		client = dynamodb.NewFromConfig(cfg)
	})
	if clientErr != "" {
		t.Fatal(clientErr)
	}
	return client
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tableOpts say how to create a test table.
type tableOpts struct {
	// noTTL leaves TimeToLive off: see TestConformance.
	noTTL bool
}

// newTable creates a table as TableSchema and TimeToLiveSpec describe,
// with a unique name, and deletes it when the test ends.
func newTable(t *testing.T, api *dynamodb.Client, o tableOpts) string {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 6)
	rand.Read(b)
	name := "agentauth-dynamostore-test-" + hex.EncodeToString(b)
	// Registered first, so a table is deleted even when creating it
	// reported an error after all.
	t.Cleanup(func() {
		_, err := api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		var gone *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &gone) {
			t.Errorf("delete table %s: %v", name, err)
		}
	})
	if _, err := api.CreateTable(ctx, TableSchema(name)); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		t.Fatalf("table %s not active: %v", name, err)
	}
	if !o.noTTL {
		if _, err := api.UpdateTimeToLive(ctx, TimeToLiveSpec(name)); err != nil {
			t.Fatalf("enable TTL on %s: %v", name, err)
		}
	}
	return name
}

// newEmulatorStore is a Store on a fresh table.
func newEmulatorStore(t *testing.T, o tableOpts) (*Store, *dynamodb.Client) {
	t.Helper()
	api := emulator(t)
	s, err := New(api, newTable(t, api, o))
	if err != nil {
		t.Fatal(err)
	}
	return s, api
}
