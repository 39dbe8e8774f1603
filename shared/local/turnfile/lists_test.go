package turnfile

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// An entry whose instance is gone is skipped, and removed once old; a
// directory without the index gets it from New.
func TestListEntries(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	s, err := New(home)
	must(t, err)
	a, b := turnstoretest.Key(t), turnstoretest.Key(t)
	b.Agent = "other"
	must(t, s.Commit(ctx, turnstoretest.First(a)))
	must(t, s.Commit(ctx, turnstoretest.First(b)))
	page := func(s *Store) []turn.InstanceKey {
		p, err := s.QueryInstances(ctx, turn.InstanceQuery{})
		must(t, err)
		var keys []turn.InstanceKey
		for _, in := range p.Instances {
			keys = append(keys, in.Key)
		}
		return keys
	}
	if got := page(s); len(got) != 2 {
		t.Fatalf("listed %v", got)
	}
	st, err := s.Load(ctx, b)
	must(t, err)
	entries := s.instanceEntries(s.instanceDirName(b), st.Instance)
	must(t, os.RemoveAll(s.instanceDir(b))) // gone behind the store's back
	s.ReleaseCache()
	if got := page(s); len(got) != 1 || got[0] != a {
		t.Fatalf("listed %v, want only %v", got, a)
	}
	for _, e := range entries {
		if _, err := os.Lstat(e.path()); err != nil {
			t.Fatalf("a young entry went: %v", err)
		}
		old := time.Now().Add(-2 * staleEntryAge)
		must(t, os.Chtimes(e.path(), old, old))
	}
	page(s)
	p, err := s.QueryInstances(ctx, turn.InstanceQuery{Swarm: b.Swarm})
	must(t, err)
	if len(p.Instances) != 1 {
		t.Fatalf("swarm page %+v", p)
	}
	for _, e := range entries {
		if _, err := os.Lstat(e.path()); !os.IsNotExist(err) {
			t.Fatalf("an old stale entry stays: %v", err)
		}
	}
	must(t, os.RemoveAll(s.listDir()))
	s2, err := New(home)
	must(t, err)
	if got := page(s2); len(got) != 1 || got[0] != a {
		t.Fatalf("after a rebuild: %v", got)
	}
}
