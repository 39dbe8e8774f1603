package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrSymlink: a path the embedded backends read, or a directory they keep
// state in, is a symbolic link. They never follow one: whoever could
// plant it could hand agentauth a file it did not write (an event to run
// as a turn, a key, a grant).
var ErrSymlink = errors.New("is a symbolic link, which agentauth does not follow inside its home")

// ErrNotPrivate: a directory agentauth keeps state in can be written by
// other local users, or belongs to one.
var ErrNotPrivate = errors.New("is not private to this user")

// Open opens path for reading without following a symbolic link at path
// (where the platform can refuse one: every unix; elsewhere it is an
// ordinary open).
func Open(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNoFollow, 0)
	if err != nil && isLinkRefusal(err) {
		return nil, &fs.PathError{Op: "open", Path: path, Err: ErrSymlink}
	}
	return f, err
}

// ReadFile is os.ReadFile through Open: a symbolic link at path is
// refused (ErrSymlink), never read.
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// CheckPrivateDir refuses a directory agentauth keeps state in when it
// is a symbolic link (unless follow: the home the user named may be one),
// not a directory, writable by group or others, or — on unix — owned by
// another user. The errors say which and what to run.
func CheckPrivateDir(dir string, follow bool) error {
	stat := os.Lstat
	if follow {
		stat = os.Stat
	}
	fi, err := stat(dir)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s %w; replace it with a directory", dir, ErrSymlink)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	case modesMeanAccess && fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s %w: its mode %04o lets other local users write in it (drop an event that runs as a turn, replace a key); run: chmod go-w %s",
			dir, ErrNotPrivate, fi.Mode().Perm(), dir)
	}
	if uid, ok := ownerOf(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("%s %w: it belongs to user id %d, not to %d who runs agentauth; use a home of your own (--home, AGENTAUTH_HOME)",
			dir, ErrNotPrivate, uid, os.Geteuid())
	}
	return nil
}

// isLinkRefusal reports whether err is an open's refusal of a symbolic
// link under O_NOFOLLOW (ELOOP on Linux and the BSDs, EMLINK on some).
func isLinkRefusal(err error) bool {
	return errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.EMLINK)
}
