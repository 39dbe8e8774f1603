//go:build unix

package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// TestOpenRefusesAHomeOthersCanWrite: a home other local users can write
// in — group- or world-writable, or with a state directory linked
// elsewhere — is refused with an error that says what to run; a private
// one opens (issue 17, item 8).
func TestOpenRefusesAHomeOthersCanWrite(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, home string)
		want    error
		says    string
	}{
		{"private", func(*testing.T, string) {}, nil, ""},
		{"world-writable home", func(t *testing.T, home string) { chmod(t, home, 0o777) }, atomicfile.ErrNotPrivate, "chmod go-w " + "HOME"},
		{"group-writable queue", func(t *testing.T, home string) {
			mkdir(t, filepath.Join(home, "queue"))
			chmod(t, filepath.Join(home, "queue"), 0o770)
		}, atomicfile.ErrNotPrivate, "queue"},
		{"queue linked to a shared directory", func(t *testing.T, home string) {
			shared := t.TempDir()
			chmod(t, shared, 0o777)
			if err := os.Symlink(shared, filepath.Join(home, "queue")); err != nil {
				t.Fatal(err)
			}
		}, atomicfile.ErrSymlink, "queue"},
		{"oauth keys linked", func(t *testing.T, home string) {
			mkdir(t, filepath.Join(home, "oauth"))
			if err := os.Symlink(t.TempDir(), filepath.Join(home, "oauth", "keys")); err != nil {
				t.Fatal(err)
			}
		}, atomicfile.ErrSymlink, "keys"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "home")
			mkdir(t, home)
			tc.prepare(t, home)
			b, err := Open(ctx, home, "", true)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			says := strings.ReplaceAll(tc.says, "HOME", home)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), says) || b != nil {
				t.Fatalf("Open: %v, want %v saying %q", err, tc.want, says)
			}
		})
	}
}

// TestPlantedEventLinkNeverRuns: an event file that is a link to a file
// elsewhere is not listed (so never run as a turn), whatever it holds.
func TestPlantedEventLinkNeverRuns(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	mkdir(t, home)
	b, err := Open(ctx, home, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Queue.Enqueue(ctx, domain.Event{ID: "real", InstanceKey: "k", AgentName: "a", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "s"}, Input: "hi"}); err != nil {
		t.Fatal(err)
	}
	evs, err := b.Queue.List(ctx)
	if err != nil || len(evs) != 1 {
		t.Fatalf("list: %v %v", evs, err)
	}
	// Plant a copy of the real file's shape under another name, as a link.
	var name string
	entries, _ := os.ReadDir(filepath.Join(home, "queue"))
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") {
			name = e.Name()
		}
	}
	data, err := os.ReadFile(filepath.Join(home, "queue", name))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	_ = json.Unmarshal(data, &rec)
	outside := filepath.Join(t.TempDir(), "planted.json")
	if err := os.WriteFile(outside, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(home, "queue", name)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, "queue", name)); err != nil {
		t.Fatal(err)
	}
	evs, _ = b.Queue.List(ctx)
	if len(evs) != 0 {
		t.Fatalf("a linked event file was listed: %+v", evs)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o700); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, p string, m os.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}
