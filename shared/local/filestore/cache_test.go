package filestore

import (
	"fmt"
	"testing"
)

// TestRecordCacheIsBounded: the cache keeps at most its bound, the least
// recently used going first, and a stale stamp is a miss (the soak: the
// session cache grew with every session kept for its retention).
func TestRecordCacheIsBounded(t *testing.T) {
	c := &recordCache[string]{max: 3}
	st := func(n int64) fileStamp { return fileStamp{size: n} }
	for i := range 3 {
		c.remember(fmt.Sprint("r", i), st(1), fmt.Sprint("v", i))
	}
	if _, ok := c.cached("r0", st(1)); !ok { // r0 is now the most recent
		t.Fatal("r0 missing")
	}
	c.remember("r3", st(1), "v3") // evicts r1, the least recently used
	if _, ok := c.cached("r1", st(1)); ok {
		t.Fatal("the least recently used survived")
	}
	for _, id := range []string{"r0", "r2", "r3"} {
		if _, ok := c.cached(id, st(1)); !ok {
			t.Fatalf("%s evicted", id)
		}
	}
	if _, ok := c.cached("r2", st(2)); ok {
		t.Fatal("a stale stamp hit")
	}
	c.remember("r2", st(2), "v2b") // an update does not grow the cache
	if v, ok := c.cached("r2", st(2)); !ok || v != "v2b" || c.size() != 3 {
		t.Fatalf("after an update: %q %v, size %d", v, ok, c.size())
	}
	c.drop("r2")
	if _, ok := c.cached("r2", st(2)); ok || c.size() != 2 {
		t.Fatalf("after a drop: size %d", c.size())
	}
	d := &recordCache[string]{}
	for i := range maxCachedRecords + 100 {
		d.remember(fmt.Sprint(i), st(1), "x")
	}
	if d.size() != maxCachedRecords {
		t.Fatalf("the default bound: %d", d.size())
	}
}
