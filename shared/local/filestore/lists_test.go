package filestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

func TestOperatorQueries(t *testing.T) {
	storetest.RunOperatorQueries(t, func(t *testing.T) storetest.OperatorStore { return newStore(t) },
		func(t *testing.T, s storetest.OperatorStore, id string) {
			path := s.(*Store).grantPath(id)
			if err := os.WriteFile(path, []byte("{"+"s3cret-canary"), 0o600); err != nil {
				t.Fatal(err)
			}
		})
}

// listedGrants is every grant of q, page by page.
func listedGrants(t *testing.T, s *Store, q domain.GrantQuery) []string {
	t.Helper()
	var ids []string
	for {
		p, err := s.QueryGrants(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range p.Grants {
			ids = append(ids, g.ID)
		}
		if p.Next == "" {
			return ids
		}
		q.After = p.Next
	}
}

func putGrant(t *testing.T, s *Store, tenant string, created time.Time) domain.Grant {
	t.Helper()
	g := storetest.SampleGrant(storetest.NewGrantID())
	g.Tenant, g.CreatedAt = tenant, created
	w, err := s.PutGrant(context.Background(), g, 0)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func entryFiles(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(s.listDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(s.listDir, path)
			out = append(out, rel)
		}
		return err
	})
	return out
}

// An entry whose record is gone, or that the record no longer has (a
// crash between a write and its clean-up), is skipped; once old it is
// removed. A young one stays: it may be a write in progress.
func TestStaleEntries(t *testing.T) {
	s := newStore(t)
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	a, b := putGrant(t, s, "acme", at), putGrant(t, s, "acme", at.Add(time.Second))
	// b's record gone behind the store's back; a revoked with its active
	// entries put back, as a crash before their removal leaves them.
	if err := os.Remove(s.grantPath(b.ID)); err != nil {
		t.Fatal(err)
	}
	active := s.grantEntries(a)
	a.Revoked = true
	if _, err := s.PutGrant(context.Background(), a, a.Version); err != nil {
		t.Fatal(err)
	}
	if err := addEntries(active); err != nil {
		t.Fatal(err)
	}
	stale := append(active, s.grantEntries(b)...)
	if got := listedGrants(t, s, domain.GrantQuery{Tenant: "acme", Revoked: ptrTo(false)}); len(got) != 0 {
		t.Fatalf("active grants %v, want none", got)
	}
	if got := listedGrants(t, s, domain.GrantQuery{AnyTenant: true}); !slices.Equal(got, []string{a.ID}) {
		t.Fatalf("grants %v, want %v once", got, a.ID)
	}
	for _, e := range stale {
		if _, err := os.Lstat(e.path()); err != nil {
			t.Fatalf("a young stale entry was removed: %v", err)
		}
		old := time.Now().Add(-2 * staleMarkerAge)
		if err := os.Chtimes(e.path(), old, old); err != nil {
			t.Fatal(err)
		}
	}
	listedGrants(t, s, domain.GrantQuery{Tenant: "acme"})
	listedGrants(t, s, domain.GrantQuery{AnyTenant: true})
	for _, e := range stale {
		if _, err := os.Lstat(e.path()); !os.IsNotExist(err) {
			t.Fatalf("old stale entry %s: %v", e.key, err)
		}
	}
	if got, want := len(entryFiles(t, s)), 2; got != want {
		t.Fatalf("%d entries left, want %d: %v", got, want, entryFiles(t, s))
	}
}

func ptrTo[T any](v T) *T { return &v }

// A record whose entry is missing (a crash that lost it, a home from
// before the index) is not listed until its next write adds the entry
// again, or until New builds the index of a home without one.
func TestMissingEntries(t *testing.T) {
	home := t.TempDir()
	s, err := New(home)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	g := putGrant(t, s, "", at)
	sess := storetest.SampleSession(storetest.NewSessionID())
	sess.Tenant = "acme"
	if err := s.CreateSession(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	for _, e := range s.grantEntries(g) {
		os.Remove(e.path())
	}
	if got := listedGrants(t, s, domain.GrantQuery{}); len(got) != 0 {
		t.Fatalf("listed %v without its entries", got)
	}
	g, err = s.PutGrant(context.Background(), g, g.Version) // a refresh
	if err != nil {
		t.Fatal(err)
	}
	if got := listedGrants(t, s, domain.GrantQuery{}); !slices.Equal(got, []string{g.ID}) {
		t.Fatalf("after a write: %v", got)
	}
	// A home without the index: New builds it from the records.
	if err := os.RemoveAll(s.listDir); err != nil {
		t.Fatal(err)
	}
	s2, err := New(home)
	if err != nil {
		t.Fatal(err)
	}
	if got := listedGrants(t, s2, domain.GrantQuery{}); !slices.Equal(got, []string{g.ID}) {
		t.Fatalf("after a rebuild: %v", got)
	}
	p, err := s2.QuerySessions(context.Background(), domain.SessionQuery{Tenant: "acme"})
	if err != nil || len(p.Sessions) != 1 || p.Sessions[0].ID != sess.ID {
		t.Fatalf("sessions after a rebuild: %+v, %v", p, err)
	}
}

// Two processes on one home (two Stores here: each has its own locks in
// memory, the files are shared) creating, revoking and deleting at once
// leave the index exactly what the records say, and no empty bucket.
func TestListIndexTwoStores(t *testing.T) {
	home := t.TempDir()
	a, err := New(home)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(home)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var want []domain.Grant
	var wg sync.WaitGroup
	for w, s := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				// Both stores write into the same buckets.
				g := storetest.SampleGrant(storetest.NewGrantID())
				g.Tenant, g.CreatedAt = fmt.Sprint("t", i%2), at.Add(time.Duration(i)*time.Millisecond)
				g, err := s.PutGrant(ctx, g, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if (i+w)%3 == 0 {
					g.Revoked = true
					if g, err = s.PutGrant(ctx, g, g.Version); err != nil {
						t.Error(err)
						return
					}
				}
				sess := storetest.SampleSession(storetest.NewSessionID())
				sess.CreatedAt = g.CreatedAt
				if err := s.CreateSession(ctx, sess); err != nil {
					t.Error(err)
					return
				}
				if err := s.DeleteSession(ctx, sess.ID); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				want = append(want, g)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, s := range []*Store{a, b} {
		for _, revoked := range []bool{false, true} {
			var ids []string
			for _, g := range want {
				if g.Revoked == revoked {
					ids = append(ids, g.ID)
				}
			}
			got := listedGrants(t, s, domain.GrantQuery{AnyTenant: true, Revoked: &revoked, Limit: 7})
			slices.Sort(got)
			slices.Sort(ids)
			if !slices.Equal(got, ids) {
				t.Fatalf("revoked=%v: %d listed, want %d", revoked, len(got), len(ids))
			}
		}
	}
	if n := len(entryFiles(t, a)); n != 2*len(want) {
		t.Fatalf("%d entries, want %d", n, 2*len(want))
	}
	if p, err := a.QuerySessions(ctx, domain.SessionQuery{AnyTenant: true}); err != nil || len(p.Sessions) != 0 {
		t.Fatalf("sessions: %+v, %v", p, err)
	}
	if _, err := os.Stat(filepath.Join(a.listDir, "sessions", scopeAll)); err == nil {
		names, _ := os.ReadDir(filepath.Join(a.listDir, "sessions", scopeAll))
		if len(names) != 0 {
			t.Fatalf("empty buckets left: %v", names)
		}
	}
}
