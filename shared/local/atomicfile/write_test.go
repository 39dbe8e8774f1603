package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// temps lists WriteTemp's files in dir.
func temps(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if IsTemp(e.Name()) {
			out = append(out, e.Name())
		}
	}
	return out
}

func noTemps(t *testing.T, dir string) {
	t.Helper()
	if ts := temps(t, dir); len(ts) != 0 {
		t.Fatalf("temporary files left in %s: %v", dir, ts)
	}
}

func wantContent(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("%s holds %q, want %q", path, got, want)
	}
}

func wantMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	if runtime.GOOS == "windows" {
		return // no unix permission bits
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Fatalf("%s mode %04o, want %04o", path, fi.Mode().Perm(), want)
	}
}

func TestWriteTemp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "master.key")
	tmp, err := WriteTemp(path, []byte("data"), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(tmp) != dir {
		t.Fatalf("temporary file %s not beside %s", tmp, path)
	}
	if !regexp.MustCompile(`^\.master\.key\.tmp-[0-9a-f]{16}$`).MatchString(filepath.Base(tmp)) {
		t.Fatalf("temporary file name %s", filepath.Base(tmp))
	}
	if !IsTemp(filepath.Base(tmp)) {
		t.Fatalf("IsTemp(%s) = false", filepath.Base(tmp))
	}
	wantContent(t, tmp, "data")
	wantMode(t, tmp, 0o600)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("WriteTemp created the target: %v", err)
	}
	tmp2, err := WriteTemp(path, nil, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if tmp2 == tmp {
		t.Fatal("two temporary files share a name")
	}
}

func TestWriteTempFailsCleanly(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		path string
	}{
		{"missing directory", filepath.Join(dir, "missing", "f")},
		{"parent is a file", filepath.Join(file, "f")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tmp, err := WriteTemp(tc.path, []byte("secret"), 0o600); err == nil {
				t.Fatalf("WriteTemp succeeded: %s", tmp)
			}
			noTemps(t, dir)
		})
	}
}

func TestReplace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, path string)
		data  string
	}{
		{"new file", func(*testing.T, string) {}, "new"},
		{"empty content", func(*testing.T, string) {}, ""},
		{"over a file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("old content, longer than new"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "new"},
		{"over a world-readable file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chmod(path, 0o644) // whatever the umask
		}, "new"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			tc.setup(t, path)
			if err := Replace(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			wantContent(t, path, tc.data)
			wantMode(t, path, 0o600)
			noTemps(t, dir)
		})
	}
}

func TestReplaceDoesNotFollowSymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("target"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	if err := Replace(link, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantContent(t, target, "target")
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("link not replaced by a regular file: %v %v", fi, err)
	}
	wantContent(t, link, "new")
}

// TestReplaceFailureKeepsOld provokes every failure a test can without
// hooks: before the temporary file exists, and at the rename.
func TestReplaceFailureKeepsOld(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup makes path fail to be replaced and returns a check that
		// what was there is still there.
		setup func(t *testing.T, dir, path string) (check func(t *testing.T))
	}{
		{"target is a directory", func(t *testing.T, dir, path string) func(*testing.T) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			inner := filepath.Join(path, "inner")
			if err := os.WriteFile(inner, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) { wantContent(t, inner, "old") }
		}},
		{"directory not writable", func(t *testing.T, dir, path string) func(*testing.T) {
			if runtime.GOOS == "windows" || os.Geteuid() == 0 {
				t.Skip("permission bits do not stop this user")
			}
			if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o500); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Chmod(dir, 0o700) })
			return func(t *testing.T) { wantContent(t, path, "old") }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			check := tc.setup(t, dir, path)
			if err := Replace(path, []byte("new secret"), 0o600); err == nil {
				t.Fatal("Replace succeeded")
			} else if strings.Contains(err.Error(), "new secret") {
				t.Fatalf("error carries the content: %v", err)
			}
			check(t)
			noTemps(t, dir)
		})
	}
}

// Readers racing a writer see one whole version or the other, never a mix,
// a short file or no file.
func TestReplaceIsAtomicForReaders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	a, b := bytes.Repeat([]byte("a"), 32<<10), bytes.Repeat([]byte("b"), 32<<10)
	if err := Replace(path, a, 0o600); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := os.ReadFile(path)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
					errs <- fmt.Errorf("read %d bytes of a mixed or partial version", len(got))
					return
				}
			}
		})
	}
	for i := range 100 {
		data := a
		if i%2 == 0 {
			data = b
		}
		if err := Replace(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	noTemps(t, dir)
}

func TestCreateExclusive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, dir, path string) (check func(t *testing.T))
		wantErr error
	}{
		{"absent", func(*testing.T, string, string) func(*testing.T) { return func(*testing.T) {} }, nil},
		{"file present", func(t *testing.T, dir, path string) func(*testing.T) {
			if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) { wantContent(t, path, "old") }
		}, fs.ErrExist},
		{"empty file present", func(t *testing.T, dir, path string) func(*testing.T) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) { wantContent(t, path, "") }
		}, fs.ErrExist},
		{"directory present", func(t *testing.T, dir, path string) func(*testing.T) {
			if err := os.Mkdir(path, 0o700); err != nil {
				t.Fatal(err)
			}
			return func(t *testing.T) {
				if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
					t.Fatalf("directory gone: %v", err)
				}
			}
		}, fs.ErrExist},
		{"dangling symlink present", func(t *testing.T, dir, path string) func(*testing.T) {
			target := filepath.Join(dir, "elsewhere")
			if err := os.Symlink(target, path); err != nil {
				t.Skipf("no symlinks here: %v", err)
			}
			return func(t *testing.T) {
				if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("wrote through the symlink: %v", err)
				}
			}
		}, fs.ErrExist},
		{"missing directory", func(t *testing.T, dir, path string) func(*testing.T) {
			os.Remove(dir)
			return func(*testing.T) {}
		}, fs.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "d")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "f")
			check := tc.setup(t, dir, path)
			err := CreateExclusive(path, []byte("new secret"), 0o600)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatal(err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("got %v, want %v", err, tc.wantErr)
			case err != nil && strings.Contains(err.Error(), "new secret"):
				t.Fatalf("error carries the content: %v", err)
			}
			if tc.wantErr == nil {
				wantContent(t, path, "new secret")
				wantMode(t, path, 0o600)
			}
			check(t)
			if _, err := os.Stat(dir); err == nil {
				noTemps(t, dir)
			}
		})
	}
}

func TestCreateExclusiveConcurrent(t *testing.T) {
	const n = 20
	for round := range 10 {
		dir := t.TempDir()
		path := filepath.Join(dir, "f")
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make([]error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				results[i] = CreateExclusive(path, fmt.Appendf(nil, "creator %d", i), 0o600)
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range results {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: creators %d and %d both won", round, winner, i)
			case err == nil:
				winner = i
			case !errors.Is(err, fs.ErrExist):
				t.Fatalf("round %d: creator %d: %v", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no creator won", round)
		}
		wantContent(t, path, fmt.Sprintf("creator %d", winner))
		noTemps(t, dir)
	}
}

func TestIsTemp(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{".master.key.tmp-0123456789abcdef", true},
		{".grant-1.enc.json.tmp-00", true},
		{"master.key", false},
		{"master.key.tmp-0123456789abcdef", false}, // not hidden: not ours
		{".rotate.lock", false},
		{".hidden", false},
	} {
		if got := IsTemp(tc.name); got != tc.want {
			t.Errorf("IsTemp(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	old := time.Now().Add(-2 * time.Hour)
	files := []struct {
		name     string
		aged     bool
		wantGone bool
	}{
		{".a.json.tmp-0000000000000001", true, true},
		{".b.json.tmp-0000000000000002", false, false}, // a live writer's
		{"a.json", true, false},
		{".a.lock", true, false},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if f.aged {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := RemoveStaleTemps(dir, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(dir, f.name))
		if gone := errors.Is(err, fs.ErrNotExist); gone != f.wantGone {
			t.Errorf("%s: gone %v, want %v", f.name, gone, f.wantGone)
		}
	}
	if err := RemoveStaleTemps(filepath.Join(dir, "missing"), time.Hour); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing directory: %v", err)
	}
}

func TestSyncDir(t *testing.T) {
	if err := SyncDir(t.TempDir()); err != nil {
		t.Fatal(err)
	}
	// Only unix fsyncs directories; elsewhere SyncDir does nothing.
	unix := locksExclude && runtime.GOOS != "windows"
	err := SyncDir(filepath.Join(t.TempDir(), "missing"))
	if unix && !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing directory: %v", err)
	}
}
