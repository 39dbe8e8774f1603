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

// Items without list attributes (as versions before the list indexes
// wrote them) are listed after BackfillListIndex.
func TestBackfillListIndexEmulator(t *testing.T) {
	emulatortest.Config(t)
	ctx := context.Background()
	s, api := newEmulatorStore(t, tableOpts{noTTL: true})
	g, err := s.PutGrant(ctx, storetest.SampleGrant(storetest.NewGrantID()), 0)
	if err != nil {
		t.Fatal(err)
	}
	k := turnstoretest.Key(t)
	if err := s.Turns(nil).Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	for _, pk := range []string{grantPrefix + g.ID, turnInstPK(turnHash(k))} {
		if _, err := api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.Table()), Key: key(pk),
			UpdateExpression:         aws.String("REMOVE #a, #b, #c, #d"),
			ExpressionAttributeNames: map[string]string{"#a": attrListKey, "#b": attrListAll, "#c": attrListSort, "#d": attrInstance},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := s.QueryGrants(ctx, domain.GrantQuery{AnyTenant: true}); err != nil || len(p.Grants) != 0 {
		t.Fatalf("before: %+v, %v", p, err)
	}
	n, bad, err := s.BackfillListIndex(ctx, nil)
	if err != nil || n != 2 || len(bad) != 0 {
		t.Fatalf("backfill: %d, %v, %v", n, bad, err)
	}
	if p, err := s.QueryGrants(ctx, domain.GrantQuery{AnyTenant: true}); err != nil || len(p.Grants) != 1 {
		t.Fatalf("grants after: %+v, %v", p, err)
	}
	ip, err := s.Turns(nil).(turn.InstanceQuerier).QueryInstances(ctx, turn.InstanceQuery{Swarm: k.Swarm})
	if err != nil || len(ip.Instances) != 1 || ip.Instances[0].Key != k {
		t.Fatalf("instances after: %+v, %v", ip, err)
	}
}
