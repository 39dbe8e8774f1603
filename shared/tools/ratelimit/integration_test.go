//go:build integration

package ratelimit

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// The integration tests run against a local DynamoDB emulator (MiniStack
// by default) named by AWS_ENDPOINT_URL, or skip (see emulatortest), on a
// table created per test with a random name and deleted at the end, since
// the emulator is shared.

// newTable creates a table as dynamostore.TableSchema and TimeToLiveSpec
// describe.
func newTable(t *testing.T, api *dynamodb.Client) string {
	t.Helper()
	return emulatortest.DynamoTable(t, api, "agentauth-ratelimit-test-", dynamostore.TableSchema, dynamostore.TimeToLiveSpec)
}

func TestDynamoConformance(t *testing.T) {
	api := emulatortest.DynamoDB(t)
	table := newTable(t, api)
	runConformance(t, func(t *testing.T, limits Limits, now func() time.Time) (toolhooks.Limiter, error) {
		return NewDynamo(api, table, limits, now)
	})
}

// Two limiters built apart share nothing but the table, as two Lambdas do.
func TestDynamoAcrossLimiters(t *testing.T) {
	api := emulatortest.DynamoDB(t)
	table := newTable(t, api)
	const burst = 7
	limits := Limits{Default: Limit{Rate: 1, Burst: burst}}
	now := func() time.Time { return frozen }
	var total int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		l, err := NewDynamo(api, table, limits, now)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			n := hammer(t, l, 6, 4)
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != burst {
		t.Fatalf("%d calls allowed across two limiters, want exactly the burst %d", total, burst)
	}
}

// countingAPI counts UpdateItems, and GetItems should anything ever make
// one through it.
type countingAPI struct {
	*dynamodb.Client
	mu      sync.Mutex
	updates int
	gets    int
}

func (c *countingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.mu.Lock()
	c.updates++
	c.mu.Unlock()
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c *countingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Client.GetItem(ctx, in, o...)
}

func (c *countingAPI) take() (updates, gets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	updates, gets = c.updates, c.gets
	c.updates, c.gets = 0, 0
	return updates, gets
}

func TestDynamoCallCount(t *testing.T) {
	api := &countingAPI{Client: emulatortest.DynamoDB(t)}
	table := newTable(t, api.Client)
	c := newFakeClock()
	l, err := NewDynamo(api, table, Limits{Default: Limit{Rate: 1, Burst: 3}}, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewDynamo(api, table, Limits{Default: Limit{Rate: 1, Burst: 3}}, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	step := func(name string, l *Dynamo, wantOK bool, wantUpdates int) {
		t.Helper()
		ok, _, err := l.Allow(context.Background(), "alice", "search")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		updates, gets := api.take()
		if ok != wantOK || updates != wantUpdates || gets != 0 {
			t.Errorf("%s: ok %v with %d UpdateItem and %d GetItem; want ok %v with %d UpdateItem and none", name, ok, updates, gets, wantOK, wantUpdates)
		}
	}
	step("cold key", l, true, 1)
	step("warm key, busy", l, true, 1)
	step("warm key, busy again", l, true, 1)
	step("exhausted, known from the hint", l, false, 0)
	c.Advance(time.Hour)
	step("warm key gone idle", l, true, 1)
	step("other limiter, hint wrong", other, true, 2)
	step("first limiter, stale hint that still says busy", l, true, 1)
	step("exhausted, stale hint", other, false, 1)
}

func TestDynamoMissingTable(t *testing.T) {
	l, err := NewDynamo(emulatortest.DynamoDB(t), "agentauth-ratelimit-no-such-table", Limits{Default: Limit{Rate: 1, Burst: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok, _, err := l.Allow(context.Background(), "alice-canary", "search")
	if ok || !errors.Is(err, dynamostore.ErrTableNotFound) {
		t.Fatalf("Allow = %v, %v; want ErrTableNotFound", ok, err)
	}
	if s := err.Error(); len(s) > 200 || strings.Contains(s, "alice") {
		t.Errorf("error %q is long or holds the principal", s)
	}
}
