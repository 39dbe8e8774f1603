package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// TestMemorySweep: once the limiter holds sweepAt keys, the next allowed
// call forgets every bucket that is full again, from the instant it
// refilled, and keeps the others: memory stays bounded by the callers
// active within one window, and no caller regains calls by the sweep.
func TestMemorySweep(t *testing.T) {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0
	m, err := NewMemory(Limits{
		Default: Limit{Rate: 1, Burst: 1},                        // refills 1 s after a call
		PerTool: map[string]Limit{"slow": {Rate: 0.1, Burst: 1}}, // refills 10 s after a call
	}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	allow := func(principal, tool string) bool {
		t.Helper()
		ok, _, err := m.Allow(ctx, principal, tool)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	// sweepAt keys at t0: one slow bucket, the rest on the default limit.
	if !allow("carol", "slow") {
		t.Fatal("carol's first call refused")
	}
	for i := range sweepAt - 1 {
		if !allow("user-"+strconv.Itoa(i), "search") {
			t.Fatalf("user-%d's first call refused", i)
		}
	}
	if len(m.tat) != sweepAt {
		t.Fatalf("%d keys before the sweep, want %d", len(m.tat), sweepAt)
	}

	now = t0.Add(time.Second) // the default buckets refill exactly now
	if !allow("dave", "search") {
		t.Fatal("dave's first call refused")
	}
	if len(m.tat) != 2 {
		t.Fatalf("%d keys after the sweep, want carol's and dave's", len(m.tat))
	}
	if ok, retry, _ := m.Allow(ctx, "carol", "slow"); ok || retry != 9*time.Second {
		t.Fatalf("carol after the sweep: allowed %v, retry %v; want refused for 9 s more", ok, retry)
	}
}
