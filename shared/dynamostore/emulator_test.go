//go:build integration

package dynamostore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/awsconfig/emulatortest"
)

// The integration tests run against a local DynamoDB emulator (MiniStack
// by default) named by AWS_ENDPOINT_URL. They create a table per test with
// a random name and delete it at the end, since the emulator is shared.

// emulator returns the DynamoDB client for the emulator, or skips the test
// (see emulatortest).
func emulator(t *testing.T) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(emulatortest.Config(t))
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
	name := emulatortest.Name("agentauth-dynamostore-test-")
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
