//go:build integration

package dynamostore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/agentauth/agentauth/shared/testkit/limitertest"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

var _ toolhooks.Limiter = (*ToolLimiter)(nil)

// newLimiterTable creates a table as TableSchema and TimeToLiveSpec
// describe (see emulator_test.go).
func newLimiterTable(t *testing.T, api *dynamodb.Client) string {
	t.Helper()
	return emulatortest.DynamoTable(t, api, "agentauth-ratelimit-test-", TableSchema, TimeToLiveSpec)
}

func TestToolLimiterConformance(t *testing.T) {
	api := emulatortest.DynamoDB(t)
	table := newLimiterTable(t, api)
	limitertest.Run(t, func(t *testing.T, limits ratelimit.Limits, now func() time.Time) (toolhooks.Limiter, error) {
		return NewToolLimiter(api, table, limits, now)
	})
}

// Two limiters built apart share nothing but the table, as two Lambdas do.
func TestToolLimiterAcrossLimiters(t *testing.T) {
	api := emulatortest.DynamoDB(t)
	table := newLimiterTable(t, api)
	const burst = 7
	limits := ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: burst}}
	var total int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 {
		l, err := NewToolLimiter(api, table, limits, limitertest.Frozen)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			n := limitertest.Hammer(t, l, "alice", "search", 6, 4)
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

// updateCountingAPI counts UpdateItems, and GetItems should anything ever
// make one through it.
type updateCountingAPI struct {
	*dynamodb.Client
	mu      sync.Mutex
	updates int
	gets    int
}

func (c *updateCountingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.mu.Lock()
	c.updates++
	c.mu.Unlock()
	return c.Client.UpdateItem(ctx, in, o...)
}

func (c *updateCountingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.Client.GetItem(ctx, in, o...)
}

func (c *updateCountingAPI) take() (updates, gets int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	updates, gets = c.updates, c.gets
	c.updates, c.gets = 0, 0
	return updates, gets
}

func TestToolLimiterCallCount(t *testing.T) {
	api := &updateCountingAPI{Client: emulatortest.DynamoDB(t)}
	table := newLimiterTable(t, api.Client)
	c := limitertest.NewClock()
	limits := ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 3}}
	l, err := NewToolLimiter(api, table, limits, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewToolLimiter(api, table, limits, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	step := func(name string, l *ToolLimiter, wantOK bool, wantUpdates int) {
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

func TestToolLimiterMissingTable(t *testing.T) {
	l, err := NewToolLimiter(emulatortest.DynamoDB(t), "agentauth-ratelimit-no-such-table", ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ok, _, err := l.Allow(context.Background(), "alice-canary", "search")
	if ok || !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("Allow = %v, %v; want ErrTableNotFound", ok, err)
	}
	if s := err.Error(); len(s) > 200 || strings.Contains(s, "alice") {
		t.Errorf("error %q is long or holds the principal", s)
	}
}
