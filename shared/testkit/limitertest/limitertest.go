// Package limitertest is the conformance suite of the tool rate limit
// (toolhooks.Limiter): the in-memory limiter, the file limiter of the local
// server and the DynamoDB limiter of the AWS deployment all run Run, so they
// count, refill, separate keys and refuse bad input the same way.
//
// It asserts only through Allow, never through a backend's files or items,
// and needs no network service of its own: a backend's test brings one.
package limitertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// Clock is a clock tests move by hand. It starts at Frozen().
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at Frozen().
func NewClock() *Clock { return &Clock{t: Frozen()} }

// Frozen is the time the suite's clocks start at, for tests that stop
// the clock altogether.
func Frozen() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// NewFunc builds the backend under test. Limiters built by one NewFunc in
// one test may share state (the suite uses fresh keys).
type NewFunc func(t *testing.T, limits ratelimit.Limits, now func() time.Time) (toolhooks.Limiter, error)

// UniquePrincipal keeps the keys of one test apart from every other
// test's, for backends whose state outlives a test (a shared table).
func UniquePrincipal(t *testing.T, name string) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return name + "-" + hex.EncodeToString(b)
}

// Hammer calls Allow for (principal, tool) from workers goroutines, calls
// times each, and returns how many calls were allowed. An error fails t.
func Hammer(t *testing.T, l toolhooks.Limiter, principal, tool string, workers, calls int) int64 {
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range calls {
				ok, _, err := l.Allow(context.Background(), principal, tool)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return allowed.Load()
}

func mustNew(t *testing.T, newLimiter NewFunc, limits ratelimit.Limits, now func() time.Time) toolhooks.Limiter {
	t.Helper()
	l, err := newLimiter(t, limits, now)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func allow(t *testing.T, l toolhooks.Limiter, principal, tool string) (bool, time.Duration) {
	t.Helper()
	ok, retry, err := l.Allow(context.Background(), principal, tool)
	if err != nil {
		t.Fatalf("Allow: %v", err)
	}
	if ok && retry != 0 {
		t.Fatalf("allowed with retryAfter %v", retry)
	}
	return ok, retry
}

// wantAllowed calls Allow n times and wants each allowed.
func wantAllowed(t *testing.T, l toolhooks.Limiter, principal, tool string, n int) {
	t.Helper()
	for i := range n {
		if ok, retry := allow(t, l, principal, tool); !ok {
			t.Fatalf("call %d of %d denied (retry after %v)", i+1, n, retry)
		}
	}
}

// wantDenied calls Allow once and wants it denied with retryAfter.
func wantDenied(t *testing.T, l toolhooks.Limiter, principal, tool string, retryAfter time.Duration) {
	t.Helper()
	ok, retry := allow(t, l, principal, tool)
	if ok {
		t.Fatal("allowed beyond the limit")
	}
	if retry != retryAfter {
		t.Fatalf("retryAfter %v, want %v", retry, retryAfter)
	}
}

// Run is the suite every backend passes.
func Run(t *testing.T, newLimiter NewFunc) {
	one := ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 3}}

	t.Run("burst then denied", func(t *testing.T) {
		c := NewClock()
		l := mustNew(t, newLimiter, one, c.Now)
		p := UniquePrincipal(t, "alice")
		wantAllowed(t, l, p, "search", 3)
		wantDenied(t, l, p, "search", time.Second)
		wantDenied(t, l, p, "search", time.Second) // a denial costs nothing
	})

	t.Run("refill after interval", func(t *testing.T) {
		c := NewClock()
		l := mustNew(t, newLimiter, ratelimit.Limits{Default: ratelimit.Limit{Rate: 2, Burst: 2}}, c.Now)
		p := UniquePrincipal(t, "alice")
		wantAllowed(t, l, p, "search", 2)
		wantDenied(t, l, p, "search", time.Second) // 0.5 s rounded up
		c.Advance(499 * time.Millisecond)
		wantDenied(t, l, p, "search", time.Second)
		c.Advance(time.Millisecond) // T = 0.5 s since the burst
		wantAllowed(t, l, p, "search", 1)
		wantDenied(t, l, p, "search", time.Second)
		c.Advance(time.Hour) // idle: the full burst again, no more
		wantAllowed(t, l, p, "search", 2)
		wantDenied(t, l, p, "search", time.Second)
	})

	t.Run("retry after", func(t *testing.T) {
		c := NewClock()
		// T = 10 s, τ = 10 s.
		l := mustNew(t, newLimiter, ratelimit.Limits{Default: ratelimit.Limit{Rate: 0.1, Burst: 2}}, c.Now)
		p := UniquePrincipal(t, "alice")
		wantAllowed(t, l, p, "search", 2)
		wantDenied(t, l, p, "search", 10*time.Second)
		c.Advance(2500 * time.Millisecond)
		wantDenied(t, l, p, "search", 8*time.Second) // 7.5 s rounded up
		c.Advance(7 * time.Second)
		wantDenied(t, l, p, "search", time.Second) // 0.5 s: at least 1 s
		c.Advance(500 * time.Millisecond)
		wantAllowed(t, l, p, "search", 1)
		wantDenied(t, l, p, "search", 10*time.Second)
	})

	t.Run("per-tool limits and default", func(t *testing.T) {
		c := NewClock()
		l := mustNew(t, newLimiter, ratelimit.Limits{
			Default: ratelimit.Limit{Rate: 1, Burst: 2},
			PerTool: map[string]ratelimit.Limit{"send_email": {Rate: 1, Burst: 1}, "search": {Rate: 1, Burst: 5}},
		}, c.Now)
		p := UniquePrincipal(t, "alice")
		wantAllowed(t, l, p, "send_email", 1)
		wantDenied(t, l, p, "send_email", time.Second)
		wantAllowed(t, l, p, "search", 5)
		wantDenied(t, l, p, "search", time.Second)
		wantAllowed(t, l, p, "other", 2)
		wantDenied(t, l, p, "other", time.Second)
	})

	t.Run("keys independent", func(t *testing.T) {
		// RFC 0064: one principal exhausting one tool limits nobody else.
		c := NewClock()
		l := mustNew(t, newLimiter, ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 1}}, c.Now)
		alice, bob := UniquePrincipal(t, "alice"), UniquePrincipal(t, "bob")
		wantAllowed(t, l, alice, "search", 1)
		wantDenied(t, l, alice, "search", time.Second)
		wantAllowed(t, l, bob, "search", 1)
		wantAllowed(t, l, alice, "fetch", 1)
		wantDenied(t, l, bob, "search", time.Second)
		wantDenied(t, l, alice, "fetch", time.Second)
	})

	t.Run("principal and tool never run together", func(t *testing.T) {
		// Principal "ab" with tool "c" must not share a bucket with "a"
		// and "bc": the key separates the two (issue 9, item 23).
		c := NewClock()
		l := mustNew(t, newLimiter, ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 1}}, c.Now)
		p := UniquePrincipal(t, "sep")
		wantAllowed(t, l, p+"ab", "c", 1)
		wantDenied(t, l, p+"ab", "c", time.Second)
		wantAllowed(t, l, p+"a", "bc", 1)
		wantAllowed(t, l, p+"abc", "x", 1)
		wantDenied(t, l, p+"a", "bc", time.Second)
	})

	t.Run("empty or ambiguous key refused", func(t *testing.T) {
		l := mustNew(t, newLimiter, one, NewClock().Now)
		// A zero byte would let "a\x00b"+"c" and "a"+"b\x00c" share a key.
		for _, k := range [][2]string{{"", "search"}, {"alice", ""}, {"alice\x00x", "y"}, {"alice", "x\x00y"}} {
			if ok, _, err := l.Allow(context.Background(), k[0], k[1]); err == nil || ok {
				t.Errorf("Allow(%q, %q) = %v, %v; want an error", k[0], k[1], ok, err)
			}
		}
	})

	t.Run("invalid limits refused", func(t *testing.T) {
		good := ratelimit.Limit{Rate: 1, Burst: 1}
		for _, tc := range []struct {
			name   string
			limits ratelimit.Limits
		}{
			{"zero", ratelimit.Limits{}},
			{"zero rate", ratelimit.Limits{Default: ratelimit.Limit{Rate: 0, Burst: 1}}},
			{"negative rate", ratelimit.Limits{Default: ratelimit.Limit{Rate: -1, Burst: 1}}},
			{"zero burst", ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 0}}},
			{"negative burst", ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: -3}}},
			{"rate too high", ratelimit.Limits{Default: ratelimit.Limit{Rate: 2e6, Burst: 1}}},
			{"window too long", ratelimit.Limits{Default: ratelimit.Limit{Rate: 1e-9, Burst: 1}}},
			{"bad per-tool", ratelimit.Limits{Default: good, PerTool: map[string]ratelimit.Limit{"search": {Rate: 0, Burst: 1}}}},
			{"empty tool name", ratelimit.Limits{Default: good, PerTool: map[string]ratelimit.Limit{"": good}}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if l, err := newLimiter(t, tc.limits, nil); err == nil {
					t.Fatalf("built %T with %+v", l, tc.limits)
				}
			})
		}
	})
}
