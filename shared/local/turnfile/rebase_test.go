package turnfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
)

// TestFailedSnapshotLosesNoCommit pins the rebase's order: the journal is
// emptied only once the new snapshot is written. A snapshot write that
// fails — before it wrote anything, or after (its directory sync failed)
// — leaves every commit readable, by this process and another, and the
// instance takes commits and rebases after it.
func TestFailedSnapshotLosesNoCommit(t *testing.T) {
	errDisk := errors.New("disk full")
	for _, tc := range []struct {
		name    string
		replace func(path string, data []byte, perm fs.FileMode) error
		// landed: whether the rebase happened despite the error.
		landed bool
	}{
		{"nothing written", func(string, []byte, fs.FileMode) error { return errDisk }, false},
		{"written, then failed", func(path string, data []byte, perm fs.FileMode) error {
			return errors.Join(atomicfile.Replace(path, data, perm), errDisk)
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			k := turnstoretest.Key(t)
			must(t, s.Commit(ctx, turnstoretest.First(k)))
			var want []string // the text of every message committed
			want = append(want, "hi")
			for i := range 4 {
				st, _ := s.Load(ctx, k)
				text := fmt.Sprint("step ", i)
				must(t, s.Commit(ctx, appendCommit(st, text)))
				want = append(want, text)
			}
			st, _ := s.Load(ctx, k)
			s.replace = tc.replace
			if err := s.Commit(ctx, rebaseCommit(st)); !errors.Is(err, errDisk) {
				t.Fatalf("rebase with a failing snapshot write: %v, want %v", err, errDisk)
			}
			s.replace = atomicfile.Replace

			other, _ := New(s.dir)
			for name, r := range map[string]*Store{"this store": s, "another process": other} {
				got, err := r.Load(ctx, k)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if texts := conversation(got); fmt.Sprint(texts) != fmt.Sprint(want) {
					t.Fatalf("%s reads %q, want %q", name, texts, want)
				}
				if wantVersion := st.Instance.Version + map[bool]int64{true: 1}[tc.landed]; got.Instance.Version != wantVersion {
					t.Fatalf("%s reads version %d, want %d", name, got.Instance.Version, wantVersion)
				}
			}
			// Later commits, and a later rebase, work.
			st, _ = s.Load(ctx, k)
			must(t, s.Commit(ctx, appendCommit(st, "after")))
			want = append(want, "after")
			st, _ = s.Load(ctx, k)
			must(t, s.Commit(ctx, rebaseCommit(st)))
			got, err := other.Load(ctx, k)
			if err != nil || fmt.Sprint(conversation(got)) != fmt.Sprint(want) || len(got.Events) != 0 {
				t.Fatalf("after a rebase that worked: %v, %q (%d events)", err, conversation(got), len(got.Events))
			}
		})
	}
}

// rebaseCommit folds st's conversation into a new base, as a turn's end
// does.
func rebaseCommit(st turn.State) turn.Commit {
	folded, _ := message.Fold(st.Base, st.Events)
	inst := st.Instance
	inst.Version++
	return turn.Commit{Expect: st.Instance.Version, Instance: inst, Rebase: true, NewBase: folded}
}

// conversation is the text of st's messages, base and events folded.
func conversation(st turn.State) []string {
	msgs, _ := message.Fold(st.Base, st.Events)
	var out []string
	for _, m := range msgs {
		for _, p := range m.Content {
			out = append(out, p.Text)
		}
	}
	return out
}
