package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// tempMarker separates a target's base name from the random suffix of its
// temporary files.
const tempMarker = ".tmp-"

// WriteTemp writes data to a new temporary file in the directory of path,
// named .<base>.tmp-<16 hex digits>, with mode perm (less the umask), and
// fsyncs and closes it. It returns the temporary file's name for
// CommitReplace or CommitExclusive; on error no file is left behind.
func WriteTemp(path string, data []byte, perm fs.FileMode) (tmp string, err error) {
	f, tmp, err := createTemp(path, perm)
	if err != nil {
		return "", err
	}
	_, werr := f.Write(data)
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// createTemp creates the temporary file exclusively. A name already taken
// (a 1 in 2^64 chance) is retried with a fresh one, so that a
// fs.ErrExist from CreateExclusive always means the target exists.
func createTemp(path string, perm fs.FileMode) (*os.File, string, error) {
	prefix := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+tempMarker)
	var rnd [8]byte
	for attempt := 0; ; attempt++ {
		rand.Read(rnd[:]) // never fails since Go 1.24
		tmp := prefix + hex.EncodeToString(rnd[:])
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			return f, tmp, nil
		}
		if !errors.Is(err, fs.ErrExist) || attempt == 2 {
			return nil, "", err
		}
	}
}

// CommitReplace renames tmp, a file from WriteTemp, over path and fsyncs the
// directory. When the rename fails tmp is removed and path is untouched.
// A symbolic link at path is replaced, not followed.
func CommitReplace(tmp, path string) error {
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// CommitExclusive links tmp, a file from WriteTemp, to path and fsyncs the
// directory; tmp is removed either way. When anything (a file, a directory,
// a symbolic link, even a dangling one) is at path, it fails with an error
// wrapping fs.ErrExist and path is untouched: of many concurrent creators
// exactly one wins.
func CommitExclusive(tmp, path string) error {
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) && errors.Is(le.Err, fs.ErrExist) {
			return &fs.PathError{Op: "create", Path: path, Err: fs.ErrExist}
		}
		return err
	}
	return SyncDir(filepath.Dir(path))
}

// Replace replaces path with data (mode perm less the umask) so that
// readers see the old content or the new, never a mix or nothing. On error
// the old content stays, unless the directory fsync after the rename is
// what failed.
func Replace(path string, data []byte, perm fs.FileMode) error {
	tmp, err := WriteTemp(path, data, perm)
	if err != nil {
		return err
	}
	return CommitReplace(tmp, path)
}

// CreateExclusive creates path with data (mode perm less the umask), failing
// with an error wrapping fs.ErrExist when something is at path already. The
// file appears complete or not at all.
func CreateExclusive(path string, data []byte, perm fs.FileMode) error {
	tmp, err := WriteTemp(path, data, perm)
	if err != nil {
		return err
	}
	return CommitExclusive(tmp, path)
}

// SyncDir fsyncs the directory dir so that names created, renamed or
// removed in it survive a crash. It does nothing where directories cannot
// be fsynced (Windows, where rename is durable on its own, and other
// non-unix systems).
func SyncDir(dir string) error { return syncDir(dir) }

// IsTemp reports whether name, a base name, is one of WriteTemp's
// temporary files.
func IsTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, tempMarker)
}

// RemoveStaleTemps removes the temporary files in dir that are older than
// olderThan: left by a crash mid-write, since a live writer's file is young.
// It returns the errors it met; removing the rest goes on regardless.
func RemoveStaleTemps(dir string, olderThan time.Duration) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("remove stale temporary files: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !IsTemp(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // committed or removed meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if time.Since(fi.ModTime()) <= olderThan {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
