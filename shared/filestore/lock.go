package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// recordLock is an exclusive lock on one record: an in-process mutex (so
// goroutines queue instead of polling) plus an flock on a lock file (so
// other processes are excluded too).
type recordLock struct {
	path   string
	f      *os.File
	unlock func()
}

// lock takes the lock named name (e.g. "grant-…"), waiting until ctx ends.
func (s *Store) lock(ctx context.Context, name string) (*recordLock, error) {
	unlock, err := s.procLocks.lock(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	path := filepath.Join(s.locksDir, name+".lock")
	f, err := lockFile(ctx, path)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return &recordLock{path: path, f: f, unlock: unlock}, nil
}

// release drops the lock. With removeFile the lock file goes too (for a
// record that no longer exists); waiters notice and lock the new file.
func (l *recordLock) release(removeFile bool) {
	if removeFile {
		removeLockFile(l.path)
	}
	l.f.Close() // closing drops the flock
	l.unlock()
}

// lockFile opens path and flocks it exclusively. A holder may remove the
// file before unlocking, so after locking we check that the path still
// names the inode we hold, and start again if not.
func lockFile(ctx context.Context, path string) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, err
		}
		if err := flockWait(ctx, f); err != nil {
			f.Close()
			return nil, err
		}
		held, err1 := f.Stat()
		named, err2 := os.Stat(path)
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return f, nil
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

// flockWait polls a non-blocking flock so that a cancelled ctx ends the
// wait (a blocking flock cannot be interrupted).
func flockWait(ctx context.Context, f *os.File) error {
	delay := 50 * time.Microsecond
	for {
		ok, err := tryFlock(f)
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

// keyedMutex is one mutex per key, waitable with a context, holding memory
// only for keys in use.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*keyedEntry
}

type keyedEntry struct {
	ch   chan struct{}
	refs int
}

func (k *keyedMutex) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*keyedEntry{}
	}
	e := k.m[key]
	if e == nil {
		e = &keyedEntry{ch: make(chan struct{}, 1)}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	select {
	case e.ch <- struct{}{}:
		return func() { <-e.ch; k.done(key, e) }, nil
	case <-ctx.Done():
		k.done(key, e)
		return nil, ctx.Err()
	}
}

func (k *keyedMutex) done(key string, e *keyedEntry) {
	k.mu.Lock()
	if e.refs--; e.refs == 0 {
		delete(k.m, key)
	}
	k.mu.Unlock()
}
