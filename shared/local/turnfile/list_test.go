package turnfile

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// TestListNamesTheUnreadable: one instance whose snapshot or journal does
// not decode is named beside the others, by its directory and its key,
// instead of failing the whole list (issue 16: GET /v1/instances answered
// 500 for everyone); Delete still removes it.
func TestListNamesTheUnreadable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(t *testing.T, dir string)
	}{
		{"a journal line that is not JSON", func(t *testing.T, dir string) {
			appendFile(t, filepath.Join(dir, journalFile), `{"v":2,"c":{"`+turnstoretest.Canary+"\n")
		}},
		{"a journal line of a wrong type", func(t *testing.T, dir string) {
			appendFile(t, filepath.Join(dir, journalFile), `{"v":"`+turnstoretest.Canary+`"}`+"\n")
		}},
		{"a journal line that does not apply", func(t *testing.T, dir string) {
			// Whole and well-formed, but over a version the instance never had.
			appendFile(t, filepath.Join(dir, journalFile), `{"v":9,"c":{"expect":8,"instance":{"key":{"swarm":"s","key":"`+turnstoretest.Canary+`","agent":"a"},"version":9}}}`+"\n")
		}},
		{"a snapshot that is not JSON", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, snapshotFile), []byte(`{"instance":`+turnstoretest.Canary), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			u := turnstoretest.RunUnreadable(t, s, func(t *testing.T, k turn.InstanceKey) { tc.corrupt(t, s.instanceDir(k)) })
			t.Logf("reason: %s", u.Reason)
			var broken turn.InstanceKey
			for _, e := range mustReadDir(t, s.dir) {
				if e.Name() == u.ID {
					broken = readKey(filepath.Join(s.dir, e.Name()))
				}
			}
			if broken == (turn.InstanceKey{}) || u.Key != broken {
				t.Fatalf("unreadable %+v: want the instance's directory and key %v", u, broken)
			}
			if err := s.Delete(context.Background(), broken); err != nil {
				t.Fatalf("Delete of the unreadable instance: %v", err)
			}
			if list, bad, err := s.List(context.Background()); err != nil || len(bad) != 0 || len(list) != 2 {
				t.Fatalf("List after its Delete: %v, %d unreadable, %d listed", err, len(bad), len(list))
			}
		})
	}
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

func mustReadDir(t *testing.T, dir string) []os.DirEntry {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return entries
}
