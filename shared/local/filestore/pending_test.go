package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// t0 is when storetest's sample sessions are created.
var t0 = storetest.SampleSession("").CreatedAt

// pendingSession is a pending sample session of target.
func pendingSession(target domain.ResumeTarget) domain.Session {
	sess := storetest.SampleSession(storetest.NewSessionID())
	sess.EventPending = false
	sess.Resume.SwarmRef, sess.Resume.InstanceKey, sess.Resume.AgentName = target.SwarmRef, target.InstanceKey, target.AgentName
	return sess
}

func swarmTarget(swarm, instance, agent string) domain.ResumeTarget {
	return domain.ResumeTarget{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: swarm}, InstanceKey: instance, AgentName: agent}
}

// markers lists the session ids the pending index holds for target.
func markers(t *testing.T, s *Store, target domain.ResumeTarget) []string {
	t.Helper()
	entries, err := os.ReadDir(s.targetDir(domain.ResumeTargetKey(target)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// listed returns the ids ListPendingSessions gives for target at at,
// failing on any error or unreadable record.
func listed(t *testing.T, s *Store, target domain.ResumeTarget, at time.Time) []string {
	t.Helper()
	got, bad, err := s.ListPendingSessions(context.Background(), target, at)
	if err != nil || len(bad) > 0 {
		t.Fatalf("ListPendingSessions(%+v): %v, unreadable %v", target, err, bad)
	}
	var ids []string
	for _, sess := range got {
		ids = append(ids, sess.ID)
	}
	return ids
}

// The index follows every write: a marker while the session is pending
// for its target, none once it is not, and no target directory without a
// marker in it.
func TestPendingIndexFollowsWrites(t *testing.T) {
	ctx := context.Background()
	target := swarmTarget("victim", "C1", "assistant")
	moved := swarmTarget("victim", "C2", "assistant")
	for _, tc := range []struct {
		name string
		// change writes sess once created and returns the target whose
		// index must then hold it, or a zero target for none.
		change func(t *testing.T, s *Store, sess domain.Session) domain.ResumeTarget
	}{
		{"stays pending", func(t *testing.T, s *Store, sess domain.Session) domain.ResumeTarget {
			sess.AuthorizationURL += "&x=1"
			if _, err := s.UpdateSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
			return target
		}},
		{"claimed", func(t *testing.T, s *Store, sess domain.Session) domain.ResumeTarget {
			sess.Status = domain.SessionExchanging
			if _, err := s.UpdateSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
			return domain.ResumeTarget{}
		}},
		{"another target", func(t *testing.T, s *Store, sess domain.Session) domain.ResumeTarget {
			sess.Resume.InstanceKey = moved.InstanceKey
			if _, err := s.UpdateSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
			return moved
		}},
		{"completed", func(t *testing.T, s *Store, sess domain.Session) domain.ResumeTarget {
			if _, _, err := s.CompleteSession(ctx, sess.ID, sess.CreatedAt, storetest.SampleGrant(storetest.NewGrantID())); err != nil {
				t.Fatal(err)
			}
			return domain.ResumeTarget{}
		}},
		{"deleted", func(t *testing.T, s *Store, sess domain.Session) domain.ResumeTarget {
			if err := s.DeleteSession(ctx, sess.ID); err != nil {
				t.Fatal(err)
			}
			return domain.ResumeTarget{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			sess := pendingSession(target)
			if err := s.CreateSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
			if got := markers(t, s, target); !slices.Equal(got, []string{sess.ID}) {
				t.Fatalf("after create: markers %v, want [%s]", got, sess.ID)
			}
			stored, err := s.GetSession(ctx, sess.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.change(t, s, stored)
			for _, tg := range []domain.ResumeTarget{target, moved} {
				got := markers(t, s, tg)
				switch {
				case tg == want && !slices.Equal(got, []string{sess.ID}):
					t.Fatalf("markers of %+v: %v, want [%s]", tg, got, sess.ID)
				case tg != want && got != nil:
					t.Fatalf("markers of %+v: %v, want no directory", tg, got)
				}
			}
		})
	}

	t.Run("not indexed", func(t *testing.T) {
		s := newStore(t)
		// A session that is not pending, or resumes no complete target,
		// has no marker; a create the reuse key refuses leaves none.
		done := pendingSession(target)
		done.Status = domain.SessionCompleted
		noSwarm := pendingSession(target)
		noSwarm.Resume.SwarmRef = domain.ObjectRef{}
		held := pendingSession(target)
		held.ReuseKey = domain.SessionReuseKey(held.OAuthAppRef, held.Subject, held.RequestedScopes, held.Resume)
		refused := pendingSession(target)
		refused.ReuseKey = held.ReuseKey
		for _, sess := range []domain.Session{done, noSwarm, held} {
			if err := s.CreateSession(ctx, sess); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.CreateSession(ctx, refused); !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("create on a held reuse key: %v", err)
		}
		if got := markers(t, s, target); !slices.Equal(got, []string{held.ID}) {
			t.Fatalf("markers %v, want only [%s]", got, held.ID)
		}
		entries, _ := os.ReadDir(s.pendingDir)
		if len(entries) != 1 {
			t.Fatalf("pending/ holds %d entries, want the one target's", len(entries))
		}
	})
}

// A lookup reads its target's sessions only: sessions of other targets,
// however many and in whatever state (unreadable ones included), are
// never opened, so they neither cost it nor show up in its list.
func TestPendingLookupReadsOnlyItsTarget(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	mine := swarmTarget("victim", "C1", "assistant")
	var want []string
	for range 3 {
		sess := pendingSession(mine)
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		want = append(want, sess.ID)
	}
	slices.Sort(want)
	for i := range 50 {
		sess := pendingSession(swarmTarget("other", fmt.Sprintf("C%d", i), "assistant"))
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
		// Every other session unreadable: a lookup that opened them
		// would report them.
		if i%2 == 0 {
			if err := os.WriteFile(s.sessionPath(sess.ID), []byte("{not json"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := listed(t, s, mine, t0); !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}
	if got := listed(t, s, swarmTarget("other", "C1", "assistant"), t0); len(got) != 1 {
		t.Fatalf("the other swarm's own target lists %v, want its one session", got)
	}
}

// What a crash between a marker and its session leaves is never listed,
// and goes: a marker whose session was never written, with a lookup once
// it is old; one whose session left pending, with that session's next
// write or its deletion.
func TestPendingIndexCrashLeftovers(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	target := swarmTarget("victim", "C1", "assistant")
	at := t0
	live := pendingSession(target)
	if err := s.CreateSession(ctx, live); err != nil {
		t.Fatal(err)
	}
	key := domain.ResumeTargetKey(target)

	// Crashed between the marker and the session file.
	ghost := storetest.NewSessionID()
	if err := s.addPendingMarker(key, ghost); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, s, target, at); !slices.Equal(got, []string{live.ID}) {
		t.Fatalf("listed %v, want [%s]", got, live.ID)
	}
	if got := markers(t, s, target); !slices.Contains(got, ghost) {
		t.Fatal("a young marker without its session was removed: it may be a create in progress")
	}
	old := time.Now().Add(-2 * staleMarkerAge)
	if err := os.Chtimes(filepath.Join(s.targetDir(key), ghost), old, old); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, s, target, at); !slices.Equal(got, []string{live.ID}) {
		t.Fatalf("listed %v, want [%s]", got, live.ID)
	}
	if got := markers(t, s, target); slices.Contains(got, ghost) {
		t.Fatal("an old marker without its session was kept")
	}

	// Crashed between completing the session and removing its marker.
	done := pendingSession(target)
	if err := s.CreateSession(ctx, done); err != nil {
		t.Fatal(err)
	}
	completed, _, err := s.CompleteSession(ctx, done.ID, at, storetest.SampleGrant(storetest.NewGrantID()))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.addPendingMarker(key, done.ID); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, s, target, at); !slices.Equal(got, []string{live.ID}) {
		t.Fatalf("listed %v, want [%s]: a marker is not the session", got, live.ID)
	}
	completed.EventPending = true
	if _, err := s.UpdateSession(ctx, completed); err != nil {
		t.Fatal(err)
	}
	if got := markers(t, s, target); !slices.Equal(got, []string{live.ID}) {
		t.Fatalf("after the completed session's next write: markers %v, want [%s]", got, live.ID)
	}

	// The last marker takes its target's directory with it.
	claimed := live
	claimed.Status = domain.SessionExchanging
	if _, err := s.UpdateSession(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.targetDir(key)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("target directory without markers: %v", err)
	}
}

// A home written before the index gets it when opened: its pending
// sessions are listed, its other sessions are not; a build a crash cut
// short is done again and its leftovers go.
func TestPendingIndexBuiltForAnOlderHome(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	s := openStore(t, home)
	target := swarmTarget("victim", "C1", "assistant")
	at := t0
	var want []string
	for i := range 4 {
		sess := pendingSession(target)
		if i == 3 {
			sess.Status = domain.SessionFailed
		} else {
			want = append(want, sess.ID)
		}
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	// As an older version left it: no index, and a crashed build.
	if err := os.RemoveAll(s.pendingDir); err != nil {
		t.Fatal(err)
	}
	crashed := filepath.Join(s.root, buildPrefix+"crashed")
	if err := os.MkdirAll(filepath.Join(crashed, domain.ResumeTargetKey(target)), 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * staleMarkerAge)
	if err := os.Chtimes(crashed, old, old); err != nil {
		t.Fatal(err)
	}

	reopened := openStore(t, home)
	if got := listed(t, reopened, target, at); !slices.Equal(got, want) {
		t.Fatalf("after the build: listed %v, want %v", got, want)
	}
	if _, err := os.Stat(crashed); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a crashed build's directory is still there: %v", err)
	}
	// Built once: opening again leaves the index as the writes keep it.
	claimed, err := reopened.GetSession(ctx, want[0])
	if err != nil {
		t.Fatal(err)
	}
	claimed.Status = domain.SessionExchanging
	if _, err := reopened.UpdateSession(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	if got := listed(t, openStore(t, home), target, at); !slices.Equal(got, want[1:]) {
		t.Fatalf("after a claim and a reopen: listed %v, want %v", got, want[1:])
	}
}

// Sessions of one target entering and leaving pending at once, from two
// Stores on one home: a target directory removed with its last marker
// while another session makes it again never loses that session's marker.
func TestPendingIndexConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	a, b := twoStores(t)
	target := swarmTarget("victim", "C1", "assistant")
	at := t0
	const n = 40
	kept := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			sess := pendingSession(target)
			if err := s.CreateSession(ctx, sess); err != nil {
				errs <- err
				return
			}
			kept[i] = sess.ID
		}()
		go func() {
			defer wg.Done()
			sess := pendingSession(target)
			if err := s.CreateSession(ctx, sess); err != nil {
				errs <- err
				return
			}
			sess.Status = domain.SessionFailed
			if _, err := s.UpdateSession(ctx, sess); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	slices.Sort(kept)
	if got := listed(t, a, target, at); !slices.Equal(got, kept) {
		t.Fatalf("listed %d sessions, want the %d kept pending:\n got %v\nwant %v", len(got), len(kept), got, kept)
	}
	if got := markers(t, a, target); !slices.Equal(got, kept) {
		t.Fatalf("markers %v, want %v", got, kept)
	}
}

// BenchmarkListPendingSessions is auth.pending's lookup on every turn
// step: one target with two pending sessions, among `others` sessions
// of other targets (the issue 16 measurement: a day at a high consent rate
// leaves tens of thousands). Its cost must not grow with others.
//
//	go test -run '^$' -bench ListPendingSessions -benchtime 2000x ./shared/local/filestore/
func BenchmarkListPendingSessions(b *testing.B) {
	for _, others := range []int{0, 1_000, 10_000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			ctx := context.Background()
			s := newStore(b)
			target := swarmTarget("victim", "C1", "assistant")
			for range 2 {
				if err := s.CreateSession(ctx, pendingSession(target)); err != nil {
					b.Fatal(err)
				}
			}
			for i := range others {
				sess := pendingSession(swarmTarget("other", fmt.Sprintf("C%d", i%500), "assistant"))
				if i%4 != 0 {
					sess.Status = domain.SessionCompleted
				}
				if err := s.CreateSession(ctx, sess); err != nil {
					b.Fatal(err)
				}
			}
			at := t0
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				got, _, err := s.ListPendingSessions(ctx, target, at)
				if err != nil || len(got) != 2 {
					b.Fatalf("%d sessions, %v", len(got), err)
				}
			}
		})
	}
}
