//go:build unix

package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadRefusesLinks: a symbolic link at the path is refused, never
// followed; a file is read.
func TestReadRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "planted.json")
	if err := os.WriteFile(outside, []byte(`{"planted":true}`), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "event.json")
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(link); !errors.Is(err, ErrSymlink) || b != nil {
		t.Fatalf("ReadFile of a link: %q %v", b, err)
	}
	if f, err := Open(link); !errors.Is(err, ErrSymlink) || f != nil {
		t.Fatalf("Open of a link: %v", err)
	}
	plain := filepath.Join(dir, "plain.json")
	if err := os.WriteFile(plain, []byte("ok"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFile(plain); err != nil || string(b) != "ok" {
		t.Fatalf("ReadFile of a file: %q %v", b, err)
	}
}

// TestCheckPrivateDir: a state directory writable by others, a link to
// one, a file, or (as root) another user's directory is refused, each
// with an error that says what to do.
func TestCheckPrivateDir(t *testing.T) {
	base := t.TempDir()
	mk := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	private := mk("private", 0o700)
	readable := mk("readable", 0o755)
	group := mk("group", 0o770)
	world := mk("world", 0o777)
	link := filepath.Join(base, "link")
	if err := os.Symlink(private, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir    string
		follow bool
		want   error
		says   string
	}{
		{private, false, nil, ""},
		{readable, false, nil, ""},
		{group, false, ErrNotPrivate, "chmod go-w"},
		{world, false, ErrNotPrivate, "chmod go-w"},
		{link, false, ErrSymlink, "replace it"},
		{link, true, nil, ""}, // the home the user named may be a link
		{file, false, nil, "not a directory"},
	} {
		err := CheckPrivateDir(tc.dir, tc.follow)
		switch {
		case tc.want == nil && tc.says == "" && err != nil:
			t.Errorf("%s: %v", filepath.Base(tc.dir), err)
		case tc.want != nil && !errors.Is(err, tc.want):
			t.Errorf("%s: %v, want %v", filepath.Base(tc.dir), err, tc.want)
		case tc.says != "" && (err == nil || !strings.Contains(err.Error(), tc.says)):
			t.Errorf("%s: %v, want it to say %q", filepath.Base(tc.dir), err, tc.says)
		}
	}
	if os.Geteuid() == 0 {
		other := mk("other", 0o700)
		if err := os.Chown(other, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		if err := CheckPrivateDir(other, false); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "4242") {
			t.Fatalf("another user's directory: %v", err)
		}
	}
}
