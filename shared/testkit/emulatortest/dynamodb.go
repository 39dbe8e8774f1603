package emulatortest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB returns a DynamoDB client for the emulator, or skips t (see
// Config).
func DynamoDB(t testing.TB) *dynamodb.Client {
	t.Helper()
	return dynamodb.NewFromConfig(Config(t))
}

// DynamoTable creates a table named prefix plus a random suffix (see Name)
// as schema describes it, waits until it is active, turns TimeToLive on as
// ttl describes it unless ttl is nil, and deletes the table when the test
// ends. The caller passes the schema (dynamostore.TableSchema and
// TimeToLiveSpec): dynamostore's own tests import this package, so it
// cannot import dynamostore.
func DynamoTable(t testing.TB, api *dynamodb.Client, prefix string,
	schema func(table string) *dynamodb.CreateTableInput, ttl func(table string) *dynamodb.UpdateTimeToLiveInput) string {
	t.Helper()
	ctx := context.Background()
	name := Name(prefix)
	// Registered first, so a table is deleted even when creating it
	// reported an error after all.
	t.Cleanup(func() {
		_, err := api.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		var gone *types.ResourceNotFoundException
		if err != nil && !errors.As(err, &gone) {
			t.Errorf("delete table %s: %v", name, err)
		}
	})
	if _, err := api.CreateTable(ctx, schema(name)); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	waiter := dynamodb.NewTableExistsWaiter(api, func(o *dynamodb.TableExistsWaiterOptions) { o.MinDelay = 100 * time.Millisecond })
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		t.Fatalf("table %s not active: %v", name, err)
	}
	if ttl != nil {
		if _, err := api.UpdateTimeToLive(ctx, ttl(name)); err != nil {
			t.Fatalf("enable TTL on %s: %v", name, err)
		}
	}
	return name
}
