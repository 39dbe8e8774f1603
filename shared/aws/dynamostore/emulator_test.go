//go:build integration

package dynamostore

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
)

// The integration tests run against a local DynamoDB emulator (MiniStack
// by default) named by AWS_ENDPOINT_URL, or skip (see emulatortest). They
// create a table per test with a random name and delete it at the end,
// since the emulator is shared.

// tableOpts say how to create a test table.
type tableOpts struct {
	// noTTL leaves TimeToLive off: see TestConformance.
	noTTL bool
}

// newEmulatorStore is a Store on a fresh table, created as TableSchema and
// TimeToLiveSpec describe.
func newEmulatorStore(t *testing.T, o tableOpts) (*Store, *dynamodb.Client) {
	t.Helper()
	api := emulatortest.DynamoDB(t)
	ttl := TimeToLiveSpec
	if o.noTTL {
		ttl = nil
	}
	s, err := New(api, emulatortest.DynamoTable(t, api, "agentauth-dynamostore-test-", TableSchema, ttl))
	if err != nil {
		t.Fatal(err)
	}
	return s, api
}
