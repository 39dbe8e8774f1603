package changeset_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/changeset"
)

// TestValidID: cs_ and 1 to 64 lower-case letters and digits; the edges
// of each range are in, the characters next to them are out.
func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"cs_a": true, "cs_z": true, "cs_0": true, "cs_9": true, "cs_az09": true,
		"cs_" + strings.Repeat("a", 64): true,
		"cs_" + strings.Repeat("a", 65): false,
		"cs_":                           false,
		"cs":                            false,
		"xs_a":                          false,
		"cs_`":                          false, // before 'a'
		"cs_{":                          false, // after 'z'
		"cs_/":                          false, // before '0'
		"cs_:":                          false, // after '9'
		"cs_A":                          false,
		"cs_a-b":                        false,
	} {
		if got := changeset.ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}

// TestReadDir: every regular file under the directory, by its slash path
// relative to it, with its content; hidden files and directories and
// anything not a regular file are left out; a missing directory is an
// error naming it.
func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "a\n")
	write("tools/b.yaml", "b\n")
	write(".hidden", "h\n")
	write(".git/config", "c\n")
	write("tools/.draft.yaml", "d\n")
	if err := os.Symlink("a.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	files, err := changeset.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path+"="+string(f.Data))
	}
	if want := "a.yaml=a\n tools/b.yaml=b\n"; strings.Join(got, " ") != want {
		t.Fatalf("ReadDir = %q, want %q", strings.Join(got, " "), want)
	}
	missing := filepath.Join(dir, "missing")
	if _, err := changeset.ReadDir(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("ReadDir(a missing directory) = %v, want an error naming it", err)
	}
}
