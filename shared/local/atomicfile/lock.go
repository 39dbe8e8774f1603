package atomicfile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"
)

// Lock is a held exclusive advisory lock on a lock file. It excludes other
// processes (flock on unix, LockFileEx on Windows) and, because each Lock
// has its own open file, other Locks of this process too. Where the system
// has no file locks (neither unix nor Windows) it excludes nothing; callers
// there must add an in-process mutex and run one process per directory.
//
// The lock file's content is never read or written.
type Lock struct {
	f    *os.File
	path string
}

// LockFile opens (creating with mode 0600 if needed) the lock file path and
// locks it exclusively, waiting until the lock is free or ctx ends (then it
// returns ctx.Err()). A holder may remove the file before unlocking (see
// RemoveAndUnlock), so once locked LockFile checks that path still names
// the file it holds, and starts again if not.
func LockFile(ctx context.Context, path string) (*Lock, error) { return lockFile(ctx, path, nil) }

// lockFile is LockFile; opened, when set, runs each time a lock file is
// open and the wait for its lock begins (tests order a race with it).
func lockFile(ctx context.Context, path string, opened func()) (*Lock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if opened != nil {
			opened()
		}
		if err := waitLock(ctx, f); err != nil {
			f.Close()
			return nil, err
		}
		held, err1 := f.Stat()
		named, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return &Lock{f: f, path: path}, nil
		}
		f.Close()
		if err1 != nil {
			return nil, err1
		}
		if err2 != nil && !errors.Is(err2, fs.ErrNotExist) {
			return nil, err2
		}
	}
}

// waitLock polls a non-blocking lock so that a cancelled ctx ends the wait
// (a blocking flock cannot be interrupted).
func waitLock(ctx context.Context, f *os.File) error {
	delay := 50 * time.Microsecond
	for {
		ok, err := tryLock(f)
		if err != nil || ok {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 5*time.Millisecond)
	}
}

// Unlock releases the lock; the lock file stays for the next holder.
func (l *Lock) Unlock() error {
	return l.f.Close() // closing drops the lock
}

// RemoveAndUnlock removes the lock file while still holding it, then
// releases the lock, for a lock on something that no longer exists. Waiters
// notice the removal and lock a new file. On Windows the file stays: a file
// open elsewhere cannot always be removed there, and a leftover lock file is
// harmless.
func (l *Lock) RemoveAndUnlock() error {
	var rerr error
	if removeLockFiles {
		if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			rerr = err
		}
	}
	return errors.Join(rerr, l.f.Close())
}
