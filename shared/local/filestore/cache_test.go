package filestore

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/agentauth/agentauth/shared/testkit/storetest"
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

// TestReleaseCaches: ReleaseCaches empties the grant and session caches
// (serve calls it when idle, so a burst's records do not stay in memory),
// and every record reads back the same from its file afterwards.
func TestReleaseCaches(t *testing.T) {
	ctx := context.Background()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g := storetest.SampleGrant(storetest.NewGrantID())
	if _, err := s.PutGrant(ctx, g, 0); err != nil {
		t.Fatal(err)
	}
	sess := storetest.SampleSession(storetest.NewSessionID())
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	wantG, err := s.GetGrant(ctx, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantS, err := s.GetSession(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if s.grants.size() != 1 || s.sessions.size() != 1 {
		t.Fatalf("before: %d grants, %d sessions cached, want 1 and 1", s.grants.size(), s.sessions.size())
	}
	s.ReleaseCaches()
	if s.grants.size() != 0 || s.sessions.size() != 0 {
		t.Fatalf("after ReleaseCaches: %d grants, %d sessions cached, want none", s.grants.size(), s.sessions.size())
	}
	gotG, err := s.GetGrant(ctx, g.ID)
	if err != nil || !reflect.DeepEqual(gotG, wantG) {
		t.Fatalf("the grant after the release: %+v (%v), want %+v", gotG, err, wantG)
	}
	gotS, err := s.GetSession(ctx, sess.ID)
	if err != nil || !reflect.DeepEqual(gotS, wantS) {
		t.Fatalf("the session after the release: %+v (%v), want %+v", gotS, err, wantS)
	}
	if s.grants.size() != 1 || s.sessions.size() != 1 {
		t.Fatalf("the caches did not refill: %d grants, %d sessions", s.grants.size(), s.sessions.size())
	}
}

// TestListingDoesNotFillTheCache: a listing (the sweep reads every session
// every minute) answers every record but caches none it read from disk,
// so what serve released when idle stays released; a record already
// cached is answered from the cache.
func TestListingDoesNotFillTheCache(t *testing.T) {
	ctx := context.Background()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 5 {
		sess := storetest.SampleSession(storetest.NewSessionID())
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sess.ID)
	}
	s.ReleaseCaches()
	if _, err := s.GetSession(ctx, ids[0]); err != nil { // one warm record
		t.Fatal(err)
	}
	got, bad, err := s.ListSessions(ctx)
	if err != nil || len(bad) != 0 || len(got) != 5 {
		t.Fatalf("listing: %d sessions, %v, %v", len(got), bad, err)
	}
	if n := s.sessions.size(); n != 1 {
		t.Fatalf("after the listing %d sessions are cached, want the 1 read with get", n)
	}
	got[0].Status = "tampered" // a listing's records are the caller's own
	again, err := s.GetSession(ctx, got[0].ID)
	if err != nil || again.Status == "tampered" {
		t.Fatalf("the cache shares a listed record: %+v %v", again.Status, err)
	}
}
