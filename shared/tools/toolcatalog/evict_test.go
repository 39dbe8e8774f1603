package toolcatalog

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// entries is the number of access entries the catalog holds.
func (c *Catalog) entries() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.access)
}

// TestExpiredEntriesAreDropped: an entry whose caller never comes back
// is gone once it expired — the next insertion's sweep drops it — so the
// cache holds only live callers.
func TestExpiredEntriesAreDropped(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	c := New(index(t, "editor"), "rev-1", Settings{Now: clk.now})
	for i := range 10 {
		c.Manifest(map[string]any{"sub": fmt.Sprintf("gone-%d", i), "role": "editor"}, Options{})
	}
	if n := c.entries(); n != 10 {
		t.Fatalf("%d entries, want 10", n)
	}
	clk.add(AccessTTL)
	c.Manifest(map[string]any{"sub": "bob"}, Options{})
	if n := c.entries(); n != 1 {
		t.Fatalf("%d entries after the TTL, want bob's only", n)
	}
	// Within sweepEvery of a sweep, an insertion does not scan again.
	clk.add(sweepEvery / 2)
	c.Manifest(map[string]any{"sub": "carol"}, Options{})
	if n := c.entries(); n != 2 {
		t.Fatalf("%d entries, want bob's and carol's", n)
	}
}

// TestAccessCacheIsBounded: however many distinct callers come, the
// cache holds at most MaxAccessEntries, each answer stays right, and the
// most recent caller is cached.
func TestAccessCacheIsBounded(t *testing.T) {
	for _, max := range []int{1, 7, 64} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			clk := &clock{t: time.Unix(1_800_000_000, 0)}
			c := New(index(t, "editor"), "rev-1", Settings{Now: clk.now, MaxAccessEntries: max})
			for i := range 10 * max {
				role := "viewer"
				want := []string{"slack:read"}
				if i%3 == 0 {
					role, want = "editor", []string{"slack:post", "slack:read"}
				}
				claims := map[string]any{"sub": fmt.Sprintf("user-%d", i), "role": role}
				if _, m := c.Manifest(claims, Options{}); !slices.Equal(ids(m), want) {
					t.Fatalf("caller %d sees %v, want %v", i, ids(m), want)
				}
				if n := c.entries(); n > max {
					t.Fatalf("after %d callers: %d entries, more than %d", i+1, n, max)
				}
				if r := c.Resolve(claims, Options{}); !r.Cached {
					t.Fatalf("caller %d: its own answer was not cached", i)
				}
				clk.add(time.Second)
			}
		})
	}
}

// TestDefaultBound: an unset bound is the default, not "no bound".
func TestDefaultBound(t *testing.T) {
	for _, n := range []int{0, -1} {
		if c := New(index(t, "editor"), "rev-1", Settings{MaxAccessEntries: n}); c.maxAccess != DefaultMaxAccessEntries {
			t.Fatalf("MaxAccessEntries %d: bound %d", n, c.maxAccess)
		}
	}
}
