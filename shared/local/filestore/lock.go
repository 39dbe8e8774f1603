package filestore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// recordLock is an exclusive lock on one record: an in-process mutex (so
// goroutines queue instead of polling, and are excluded even where the
// system has no file locks) plus a lock file (so other processes are
// excluded too).
type recordLock struct {
	file   *atomicfile.Lock
	unlock func()
}

// lock takes the lock named name (e.g. "grant-…"), waiting until ctx ends.
func (s *Store) lock(ctx context.Context, name string) (*recordLock, error) {
	unlock, err := s.procLocks.lock(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	f, err := atomicfile.LockFile(ctx, filepath.Join(s.locksDir, name+".lock"))
	if err != nil {
		unlock()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return &recordLock{file: f, unlock: unlock}, nil
}

// release drops the lock. With removeFile the lock file goes too (for a
// record that no longer exists); waiters notice and lock the new file.
func (l *recordLock) release(removeFile bool) {
	if removeFile {
		l.file.RemoveAndUnlock()
	} else {
		l.file.Unlock()
	}
	l.unlock()
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
