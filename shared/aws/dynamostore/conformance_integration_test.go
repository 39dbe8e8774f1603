//go:build integration

package dynamostore

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// The conformance suite runs on tables without TimeToLive. Its fixtures are
// dated January 2026, so their sessions' ttl is long past, and a table that
// expires items may delete them mid-test: MiniStack's reaper does so within
// 60 seconds, DynamoDB at any time after expiry. TTL itself is tested on
// its own (TestTTLAttribute), with records that expire in the future.
func TestConformance(t *testing.T) {
	emulatortest.Config(t)
	storetest.RunStore(t, func(t *testing.T) domain.Store {
		s, _ := newEmulatorStore(t, tableOpts{noTTL: true})
		return s
	})
}

// twoEmulatorStores are two Stores on one fresh table, as two Lambdas:
// neither knows what the other wrote.
func twoEmulatorStores(t *testing.T) (a, b *Store) {
	t.Helper()
	a, api := newEmulatorStore(t, tableOpts{noTTL: true})
	b, err := New(api, a.Table())
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// Two Stores on one table: every guess CompleteSession makes from what it
// has seen can be stale, and the suite must hold anyway.
func TestConformanceTwoStores(t *testing.T) {
	emulatortest.Config(t)
	storetest.RunStorePair(t, func(t *testing.T) (domain.Store, domain.Store) {
		a, b := twoEmulatorStores(t)
		return a, b
	})
}

func TestTenantConformance(t *testing.T) {
	emulatortest.Config(t)
	storetest.RunTenantStore(t, func(t *testing.T) domain.TenantStore {
		s, _ := newEmulatorStore(t, tableOpts{noTTL: true})
		return s
	})
}

// Two Stores on one table, as two Lambdas: a put through one is listed by
// the other and moves the revision it reads.
func TestTenantConformanceTwoStores(t *testing.T) {
	emulatortest.Config(t)
	storetest.RunTenantStorePair(t, func(t *testing.T) (domain.TenantStore, domain.TenantStore) {
		a, b := twoEmulatorStores(t)
		a.scanLimit = 4 // listing pages through the table
		return a, b
	})
}

// The turn store suite on the emulator.
func TestTurnConformanceEmulator(t *testing.T) {
	emulatortest.Config(t)
	turnstoretest.Run(t, func(t *testing.T) turn.Store {
		s, _ := newEmulatorStore(t, tableOpts{noTTL: true})
		return s.Turns(nil)
	})
}

// The operator queries on the emulator's global secondary indexes.
func TestOperatorQueriesEmulator(t *testing.T) {
	emulatortest.Config(t)
	apis := map[storetest.OperatorStore]*dynamodb.Client{}
	storetest.RunOperatorQueries(t, func(t *testing.T) storetest.OperatorStore {
		s, api := newEmulatorStore(t, tableOpts{noTTL: true})
		s.scanLimit = 4 // queries take several pages
		apis[s] = api
		return s
	}, func(t *testing.T, s storetest.OperatorStore, id string) {
		st := s.(*Store)
		_, err := apis[s].UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName:                 aws.String(st.Table()),
			Key:                       key(grantPrefix + id),
			UpdateExpression:          aws.String("SET #doc = :bad"),
			ExpressionAttributeNames:  map[string]string{"#doc": attrDoc},
			ExpressionAttributeValues: map[string]types.AttributeValue{":bad": str("{" + turnstoretest.Canary)},
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestInstanceQueriesEmulator(t *testing.T) {
	emulatortest.Config(t)
	turnstoretest.RunQueries(t, func(t *testing.T) turn.Store {
		s, _ := newEmulatorStore(t, tableOpts{noTTL: true})
		s.scanLimit = 4
		return s.Turns(nil)
	})
}
