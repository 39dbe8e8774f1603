package listtree

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// put writes an empty entry for key in its buckets under root.
func put(t *testing.T, root, key string) {
	t.Helper()
	dir := filepath.Join(root, key[:6], key[6:10])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, key), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWalk(t *testing.T) {
	root := t.TempDir()
	base := time.Unix(1_700_000_000, 0)
	var keys []string // newest first, as the tree orders them
	for i, id := range []string{"e", "d", "c", "b", "a"} {
		k := domain.ListKey(base.Add(time.Duration(5-i)*time.Hour), id)
		keys = append(keys, k)
		put(t, root, k)
	}
	// Strays: a name that is not a list key, a bucket that is not
	// digits, a key filed in the wrong bucket.
	if err := os.WriteFile(filepath.Join(root, keys[0][:6], keys[0][6:10], "junk"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrong := domain.ListKey(base.Add(-1000*time.Hour), "z")
	if err := os.WriteFile(filepath.Join(root, keys[0][:6], keys[0][6:10], wrong), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	all := func(after, end string, keep func(string) bool) []string {
		var out []string
		for k, err := range Walk(root, after, end, keep) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, k)
		}
		return out
	}
	for _, tc := range []struct {
		name       string
		after, end string
		keep       func(string) bool
		want       []string
	}{
		{"everything, in order", "", "", nil, keys},
		{"after a key", keys[1], "", nil, keys[2:]},
		{"before an end", "", keys[3], nil, keys[:3]},
		{"between", keys[0], keys[4], nil, keys[1:4]},
		{"kept ids only", "", "", func(id string) bool { return id != "c" }, slices.Delete(slices.Clone(keys), 2, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := all(tc.after, tc.end, tc.keep); !slices.Equal(got, tc.want) {
				t.Fatalf("Walk = %q, want %q", got, tc.want)
			}
		})
	}
	for k, err := range Walk(filepath.Join(root, "missing"), "", "", nil) {
		t.Fatalf("a missing tree yielded %q, %v", k, err)
	}
}
