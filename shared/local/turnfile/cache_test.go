package turnfile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
)

// threeInstances commits instances a, b and c of one shape in dir — a
// snapshot (a rebase) and then two journal lines, so a read from disk
// folds the journal over the snapshot — and returns their keys and the
// bytes each costs in a cache.
func threeInstances(t *testing.T, dir string) (map[string]turn.InstanceKey, int64) {
	t.Helper()
	ctx := context.Background()
	w, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]turn.InstanceKey{}
	for _, name := range []string{"a", "b", "c"} {
		k := turn.InstanceKey{Swarm: "default", Key: "thread-" + name, Agent: "assistant"}
		keys[name] = k
		if err := w.Commit(ctx, turnstoretest.First(k)); err != nil {
			t.Fatal(err)
		}
		st, _ := w.Load(ctx, k)
		folded, _ := message.Fold(st.Base, st.Events)
		inst := st.Instance
		inst.Version++
		if err := w.Commit(ctx, turn.Commit{Expect: st.Instance.Version, Instance: inst, Rebase: true, NewBase: folded}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			st, _ = w.Load(ctx, k)
			if err := w.Commit(ctx, appendCommit(st, fmt.Sprint(name, " after the snapshot ", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	var cost int64
	for _, name := range []string{snapshotFile, journalFile} {
		fi, err := os.Stat(filepath.Join(w.instanceDir(keys["a"]), name))
		if err != nil {
			t.Fatal(err)
		}
		cost += fi.Size()
	}
	return keys, cost
}

// cachedNames are the instances s holds, most recently used first.
func cachedNames(s *Store, keys map[string]turn.InstanceKey) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, dir := range s.cache.dirs() {
		for name, k := range keys {
			if s.instanceDir(k) == dir {
				out = append(out, name)
			}
		}
	}
	return strings.Join(out, ",")
}

// TestCacheEvictsLeastRecentlyUsed: a Store holds the states it read up
// to its bound, least recently used out first (issue 16: it kept every
// instance's state for ever), and an instance it let go reads back from
// disk the same as it was.
func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		uses string // l<name>: Load; c<name>: a commit (it reads the state too)
		want string // cached, most recently used first
	}{
		{"the oldest goes", "la lb lc", "c,b"},
		{"a load keeps one", "la lb la lc", "c,a"},
		{"a commit keeps one", "la lb ca lc", "c,a"},
		{"an evicted one comes back", "la lb lc la", "a,c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			keys, cost := threeInstances(t, dir)
			// Two fit, three do not. The commit case adds a line to a.
			s, err := New(dir, CacheBytes(2*cost+cost/2))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{}
			for name, k := range keys {
				st, err := New(dir, CacheBytes(0))
				if err != nil {
					t.Fatal(err)
				}
				got, err := st.Load(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				want[name] = normalize(got)
			}
			for _, use := range strings.Fields(tc.uses) {
				k := keys[use[1:]]
				switch use[0] {
				case 'l':
					got, err := s.Load(ctx, k)
					if err != nil {
						t.Fatal(err)
					}
					if normalize(got) != want[use[1:]] {
						t.Fatalf("%s reads back as\n%s\nwant\n%s", use, normalize(got), want[use[1:]])
					}
				case 'c':
					st, _ := s.Load(ctx, k)
					if err := s.Commit(ctx, appendCommit(st, "x")); err != nil {
						t.Fatal(err)
					}
					got, _ := s.Load(ctx, k)
					want[use[1:]] = normalize(got)
				}
			}
			if got := cachedNames(s, keys); got != tc.want {
				t.Fatalf("cached %q, want %q", got, tc.want)
			}
			s.mu.Lock()
			used, max := s.cache.used, s.cache.max
			s.mu.Unlock()
			if used > max {
				t.Fatalf("the cache holds %d bytes over its bound of %d", used, max)
			}
		})
	}
}

// TestCacheBound: however many instances are read, the cache stays
// within its bound; a state larger than the whole cache is read but not
// kept; CacheBytes(0) keeps nothing and a negative bound is refused.
func TestCacheBound(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keys := writeInstances(t, dir, longConversation(t, turn.InstanceKey{Swarm: "default", Key: "k", Agent: "assistant"}, 10), 40)
	probe, _ := New(dir)
	fi, err := os.Stat(filepath.Join(probe.instanceDir(keys[0]), snapshotFile))
	if err != nil {
		t.Fatal(err)
	}
	size := fi.Size()
	for _, tc := range []struct {
		name      string
		bound     int64
		wantCount int
	}{
		{"ten fit", 10*size + size/2, 10},
		{"none fits", size - 1, 0},
		{"none kept", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(dir, CacheBytes(tc.bound))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				if _, err := s.Load(ctx, k); err != nil {
					t.Fatal(err)
				}
				if s.cache.used > tc.bound {
					t.Fatalf("%d bytes cached, over the bound of %d", s.cache.used, tc.bound)
				}
			}
			if got := len(s.cache.dirs()); got != tc.wantCount {
				t.Fatalf("%d states cached, want %d", got, tc.wantCount)
			}
			// The most recent ones are kept.
			for i, dir := range s.cache.dirs() {
				if want := s.instanceDir(keys[len(keys)-1-i]); dir != want {
					t.Fatalf("cached %d: %s, want %s", i, dir, want)
				}
			}
		})
	}
	if _, err := New(dir, CacheBytes(-1)); err == nil {
		t.Fatal("a negative cache bound was accepted")
	}
	s, _ := New(dir)
	if s.cache.max != DefaultCacheBytes {
		t.Fatalf("default bound %d, want %d", s.cache.max, DefaultCacheBytes)
	}
}

// TestListDoesNotFillTheCache: a listing reads every instance but keeps
// none it did not hold, so it never pushes out the states turns use.
func TestListDoesNotFillTheCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keys, _ := threeInstances(t, dir)
	s, _ := New(dir)
	if _, err := s.Load(ctx, keys["b"]); err != nil {
		t.Fatal(err)
	}
	list, bad, err := s.List(ctx)
	if err != nil || len(bad) != 0 || len(list) != 3 {
		t.Fatalf("List: %v, %d unreadable, %d listed", err, len(bad), len(list))
	}
	if got := cachedNames(s, keys); got != "b" {
		t.Fatalf("cached after List: %q, want b", got)
	}
}

// normalize compares states by their stored form.
func normalize(st turn.State) string {
	b, _ := json.Marshal(st)
	var v any
	_ = json.Unmarshal(b, &v)
	out, _ := json.Marshal(v)
	return string(out)
}

// TestReleaseCache: ReleaseCache empties the cache (serve calls it when
// idle) and every instance reads back the same from its files.
func TestReleaseCache(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	keys, _ := threeInstances(t, dir)
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for name, k := range keys {
		st, err := s.Load(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		want[name] = normalize(st)
	}
	if got := cachedNames(s, keys); len(strings.Split(got, ",")) != 3 {
		t.Fatalf("before: cached %q, want all three", got)
	}
	s.ReleaseCache()
	s.mu.Lock()
	used := s.cache.used
	s.mu.Unlock()
	if got := cachedNames(s, keys); got != "" || used != 0 {
		t.Fatalf("after ReleaseCache: cached %q (%d bytes), want none", got, used)
	}
	for name, k := range keys {
		st, err := s.Load(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if normalize(st) != want[name] {
			t.Fatalf("%s after the release:\n%s\nwant\n%s", name, normalize(st), want[name])
		}
	}
	if got := cachedNames(s, keys); len(strings.Split(got, ",")) != 3 {
		t.Fatalf("the cache did not refill: %q", got)
	}
}
