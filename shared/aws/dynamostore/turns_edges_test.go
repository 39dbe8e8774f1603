package dynamostore

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/agentauth/agentauth/shared/turn"
)

// throttlingTable answers the first BatchGetItem with every key
// unprocessed, as DynamoDB does when it throttles part of a batch.
type throttlingTable struct {
	*memTable
	mu        sync.Mutex
	throttled bool
}

func (t *throttlingTable) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	t.mu.Lock()
	first := !t.throttled
	t.throttled = true
	t.mu.Unlock()
	if first {
		t.memTable.count("BatchGetItem")
		return &dynamodb.BatchGetItemOutput{UnprocessedKeys: in.RequestItems}, nil
	}
	return t.memTable.BatchGetItem(ctx, in, o...)
}

func TestTurnLoadRetriesUnprocessedKeys(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := turnStoreOn(t, m)
	k, st := firstInstance(t, s)
	if err := s.Commit(ctx, nextCommit(st, appendMessages(st, 3, "m"))); err != nil {
		t.Fatal(err)
	}
	tt := &throttlingTable{memTable: m}
	fresh, _ := New(tt, "agentauth-test")
	m.calls = nil
	got, err := fresh.Turns(nil).Load(ctx, k)
	if err != nil || len(got.Events) != 4 {
		t.Fatalf("load after a throttled batch: %v, %d message events", err, len(got.Events))
	}
	if n := m.calls["BatchGetItem"]; n != 2 {
		t.Fatalf("%d BatchGetItem calls, want the throttled one and its retry", n)
	}
}

// An ended turn carried again by a later commit (its record changed) is
// written again: a load reads the last one.
func TestTurnEndedTurnRewritten(t *testing.T) {
	ctx := context.Background()
	s := turnStoreOn(t, newMemTable())
	k, st := firstInstance(t, s)
	tr := st.Turns["t1"]
	tr.Status, tr.Final = turn.TurnCompleted, "first"
	if err := s.Commit(ctx, nextCommit(st, func(c *turn.Commit) { c.Turn = &tr })); err != nil {
		t.Fatal(err)
	}
	st, _ = s.Load(ctx, k)
	tr = st.Turns["t1"]
	tr.Final = "second"
	if err := s.Commit(ctx, nextCommit(st, func(c *turn.Commit) { c.Turn = &tr })); err != nil {
		t.Fatal(err)
	}
	fresh := turnStoreOn(t, s.(turnStore).s.api.(*memTable))
	if got, err := fresh.Load(ctx, k); err != nil || got.Turns["t1"].Final != "second" {
		t.Fatalf("load: %v %q", err, got.Turns["t1"].Final)
	}
}

// The bounds are inclusive: a transaction of exactly maxTurnTxItems items
// and an item of exactly maxTurnItemBytes are written.
func TestTurnBoundsAreInclusive(t *testing.T) {
	ctx := context.Background()
	s := turnStoreOn(t, newMemTable())
	_, st := firstInstance(t, s)
	if err := s.Commit(ctx, nextCommit(st, appendMessages(st, maxTurnTxItems-1, "x"))); err != nil {
		t.Fatalf("a commit of exactly %d items: %v", maxTurnTxItems, err)
	}
	ts := s.(turnStore)
	doc := strings.Repeat("a", maxTurnItemBytes-2) // a JSON string: two quotes more
	if _, err := ts.docItem(ctx, "turns/x/e/", "pk", kindTurnMessage, doc); err != nil {
		t.Fatalf("a doc of exactly %d bytes: %v", maxTurnItemBytes, err)
	}
	if _, err := ts.docItem(ctx, "turns/x/e/", "pk", kindTurnMessage, doc+"a"); err == nil {
		t.Fatal("a doc one byte over the bound was accepted")
	}
}

func TestBlobCacheBounds(t *testing.T) {
	var c blobCache
	quarter := make([]byte, blobCacheBytes/4)
	c.put("q", quarter)
	if _, ok := c.get("q"); !ok {
		t.Fatal("an object of a quarter of the cache was not kept")
	}
	c.put("big", make([]byte, blobCacheBytes/4+1))
	if _, ok := c.get("big"); ok {
		t.Fatal("an object over a quarter of the cache was kept")
	}
	// Filling it forgets the oldest first, and never holds more than its
	// bound.
	for i, k := range []string{"a", "b", "c", "d"} {
		c.put(k, make([]byte, blobCacheBytes/4-i))
	}
	if _, ok := c.get("q"); ok {
		t.Fatal("the oldest object was not forgotten")
	}
	for _, k := range []string{"a", "b", "c", "d"} {
		if _, ok := c.get(k); !ok {
			t.Fatalf("%s was forgotten before the oldest", k)
		}
	}
	if c.bytes > blobCacheBytes || c.bytes != 4*(blobCacheBytes/4)-6 {
		t.Fatalf("cache holds %d bytes (bound %d)", c.bytes, blobCacheBytes)
	}
	// A key it holds is not added twice.
	c.put("a", []byte("other"))
	if b, _ := c.get("a"); len(b) != blobCacheBytes/4 {
		t.Fatal("a kept object was replaced")
	}
}
