package turnfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
)

func TestConformance(t *testing.T) {
	turnstoretest.Run(t, func(t *testing.T) turn.Store {
		s, err := New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func appendCommit(st turn.State, text string) turn.Commit {
	inst := st.Instance
	inst.Version++
	inst.NextSeq++
	return turn.Commit{Expect: st.Instance.Version, Instance: inst, Messages: []message.Event{{Seq: st.Instance.NextSeq, Type: message.LLMMessage,
		Message: &message.Message{ID: fmt.Sprint("m", st.Instance.NextSeq), Role: message.User, Content: []message.Part{{Type: message.Text, Text: text}}}}}}
}

// TestTornLineIsNoCommit: a crash in the middle of appending leaves a line
// without its end; it was never committed, reads ignore it and the next
// commit cuts it.
func TestTornLineIsNoCommit(t *testing.T) {
	ctx := context.Background()
	s, _ := New(t.TempDir())
	k := turnstoretest.Key(t)
	if err := s.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	st, _ := s.Load(ctx, k)
	journal := filepath.Join(s.instanceDir(k), journalFile)
	f, _ := os.OpenFile(journal, os.O_APPEND|os.O_WRONLY, 0o600)
	_, _ = f.WriteString(`{"v":2,"c":{"expect":1,"instance":{"key"`)
	f.Close()
	again, err := s.Load(ctx, k)
	if err != nil || again.Instance.Version != st.Instance.Version {
		t.Fatalf("load over a torn line: %v, version %d", err, again.Instance.Version)
	}
	if err := s.Commit(ctx, appendCommit(st, "after the crash")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(journal)
	if strings.Contains(string(b), `"expect":1,"instance":{"key"`+"\n") || strings.Count(string(b), "\n") != 2 {
		t.Fatalf("journal after the next commit:\n%s", b)
	}
	if st, _ = s.Load(ctx, k); len(st.Events) != 2 {
		t.Fatalf("%d events", len(st.Events))
	}
}

// TestSnapshotThenCrashBeforeTruncate: a crash between writing the
// snapshot and emptying the journal replays nothing twice.
func TestSnapshotThenCrashBeforeTruncate(t *testing.T) {
	ctx := context.Background()
	s, _ := New(t.TempDir())
	k := turnstoretest.Key(t)
	_ = s.Commit(ctx, turnstoretest.First(k))
	st, _ := s.Load(ctx, k)
	_ = s.Commit(ctx, appendCommit(st, "two"))
	st, _ = s.Load(ctx, k)
	journal := filepath.Join(s.instanceDir(k), journalFile)
	saved, _ := os.ReadFile(journal)
	folded, _ := message.Fold(st.Base, st.Events)
	inst := st.Instance
	inst.Version++
	if err := s.Commit(ctx, turn.Commit{Expect: st.Instance.Version, Instance: inst, Rebase: true, NewBase: folded}); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(journal, saved, 0o600) // as if the truncate never ran
	got, err := s.Load(ctx, k)
	if err != nil || len(got.Base) != 2 || len(got.Events) != 0 || got.Instance.Version != inst.Version {
		t.Fatalf("after the crash: %v base %d events %d version %d", err, len(got.Base), len(got.Events), got.Instance.Version)
	}
}

func TestNoKeyInPaths(t *testing.T) {
	dir := t.TempDir()
	s, _ := New(dir)
	k := turn.InstanceKey{Swarm: "swarm-canary", Key: "thread-canary", Agent: "agent-canary"}
	if err := s.Commit(context.Background(), turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	_ = filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		if strings.Contains(p, "canary") {
			t.Errorf("path %s holds the key", p)
		}
		return nil
	})
}

// BenchmarkBytesPerStep: what one step's commit writes does not grow with
// the conversation (10, 100, 1,000 messages of history).
func BenchmarkBytesPerStep(b *testing.B) {
	for _, history := range []int{10, 100, 1000} {
		b.Run(fmt.Sprint(history, " messages"), func(b *testing.B) {
			ctx := context.Background()
			s, _ := New(b.TempDir())
			k := turn.InstanceKey{Swarm: "s", Key: "k", Agent: "a"}
			_ = s.Commit(ctx, turnstoretest.First(k))
			st, _ := s.Load(ctx, k)
			base := make([]message.Message, history)
			for i := range base {
				base[i] = message.Message{ID: fmt.Sprint("h", i), Role: message.User, Content: []message.Part{{Type: message.Text, Text: strings.Repeat("x", 200)}}}
			}
			inst := st.Instance
			inst.Version++
			_ = s.Commit(ctx, turn.Commit{Expect: st.Instance.Version, Instance: inst, Rebase: true, NewBase: base})
			st, _ = s.Load(ctx, k)
			var written int64
			for b.Loop() {
				before := s.JournalBytes(k)
				c := appendCommit(st, "a step's new message")
				if err := s.Commit(ctx, c); err != nil {
					b.Fatal(err)
				}
				written += s.JournalBytes(k) - before
				st, _ = turn.Apply(st, c)
			}
			b.ReportMetric(float64(written)/float64(b.N), "bytes/step")
		})
	}
}

// TestTwoStoresOneHome: two processes on one home (two Stores, two
// caches) see each other's commits and rebases, and the fence holds
// between them.
func TestTwoStoresOneHome(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, _ := New(dir)
	b, _ := New(dir)
	k := turnstoretest.Key(t)
	if err := a.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	stA, _ := a.Load(ctx, k)
	stB, err := b.Load(ctx, k)
	if err != nil || stB.Instance.Version != 1 {
		t.Fatalf("b sees a's create: %v", err)
	}
	if err := b.Commit(ctx, appendCommit(stB, "from b")); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, appendCommit(stA, "from a, stale")); err == nil {
		t.Fatal("a's stale commit landed over b's")
	}
	stA, _ = a.Load(ctx, k)
	if len(stA.Events) != 2 || stA.Instance.Version != 2 {
		t.Fatalf("a after b's commit: %d events, version %d", len(stA.Events), stA.Instance.Version)
	}
	// b rebases; a's cached snapshot is then stale and must be re-read.
	folded, _ := message.Fold(stA.Base, stA.Events)
	inst := stA.Instance
	inst.Version++
	if err := b.Commit(ctx, turn.Commit{Expect: stA.Instance.Version, Instance: inst, Rebase: true, NewBase: folded}); err != nil {
		t.Fatal(err)
	}
	stA, _ = a.Load(ctx, k)
	if len(stA.Base) != 2 || len(stA.Events) != 0 || stA.Instance.Version != 3 {
		t.Fatalf("a after b's rebase: base %d events %d version %d", len(stA.Base), len(stA.Events), stA.Instance.Version)
	}
	if err := a.Commit(ctx, appendCommit(stA, "after")); err != nil {
		t.Fatal(err)
	}
	if stB, _ = b.Load(ctx, k); len(stB.Events) != 1 || stB.Instance.Version != 4 {
		t.Fatalf("b after a's append: events %d version %d", len(stB.Events), stB.Instance.Version)
	}
}

// TestLoadWhileRebasing: reads racing commits that rebase (new snapshot,
// emptied journal, new lines) always see a whole state. Before reads took
// the instance's lock, a read could start mid-line in the new journal
// ("corrupt record"), found by TestInstancesInParallelOneInstanceSerial.
func TestLoadWhileRebasing(t *testing.T) {
	ctx := context.Background()
	s, _ := New(t.TempDir())
	k := turnstoretest.Key(t)
	if err := s.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	errs := make(chan error, 1)
	go func() {
		defer close(done)
		for i := range 600 {
			st, err := s.Load(ctx, k)
			if err != nil {
				errs <- err
				return
			}
			c := appendCommit(st, fmt.Sprint("m", i))
			if i%2 == 1 {
				folded, _ := message.Fold(st.Base, append(st.Events, c.Messages...))
				c.Rebase, c.NewBase, c.Messages = true, folded, nil
			}
			if err := s.Commit(ctx, c); err != nil {
				errs <- err
				return
			}
		}
	}()
	reader, _ := New(s.dir) // another process's store on the same home
	for {
		select {
		case <-done:
			select {
			case err := <-errs:
				t.Fatal(err)
			default:
			}
			return
		default:
		}
		if _, err := reader.Load(ctx, k); err != nil {
			t.Fatalf("a read racing the commits: %v", err)
		}
		if _, err := s.Load(ctx, k); err != nil {
			t.Fatalf("a read racing the commits (same store): %v", err)
		}
	}
}

func TestQueryConformance(t *testing.T) {
	turnstoretest.RunQueries(t, func(t *testing.T) turn.Store {
		s, err := New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
