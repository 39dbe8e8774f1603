package turnfile

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// wantEmpty fails unless dir holds nothing: no instance directory, no
// lock file (issue 16: one lock file per instance ever created stayed).
func wantEmpty(t *testing.T, dir string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		return // atomicfile keeps lock files there (RemoveAndUnlock)
	}
	var left []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, _ error) error {
		rel, _ := filepath.Rel(dir, p)
		// The list index and its scopes stay; an entry or a bucket does not.
		if p != dir && !(d != nil && d.IsDir() && (rel == listDirName || filepath.Dir(rel) == listDirName)) {
			left = append(left, rel)
		}
		return nil
	})
	if len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}

// TestNoDirectoryOutlivesItsInstance: an instance's directory and lock
// file go with it, whatever made them.
func TestNoDirectoryOutlivesItsInstance(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// run leaves no instance of k in s; it may leave a directory.
		run func(t *testing.T, s *Store, k turn.InstanceKey)
		// then: what clears it (nothing: run's own calls must).
		then func(t *testing.T, s *Store, k turn.InstanceKey)
	}{
		{name: "deleted", run: func(t *testing.T, s *Store, k turn.InstanceKey) {
			must(t, s.Commit(ctx, turnstoretest.First(k)))
			must(t, s.Delete(ctx, k))
		}},
		{name: "a commit refused over a deleted instance", run: func(t *testing.T, s *Store, k turn.InstanceKey) {
			// A worker read the instance, an operator deleted it, the
			// worker commits what it read.
			must(t, s.Commit(ctx, turnstoretest.First(k)))
			st, _ := s.Load(ctx, k)
			must(t, s.Delete(ctx, k))
			if err := s.Commit(ctx, appendCommit(st, "late")); !errors.Is(err, turn.ErrStale) {
				t.Fatalf("commit over a deleted instance: %v, want ErrStale", err)
			}
		}},
		{name: "a first commit that does not apply", run: func(t *testing.T, s *Store, k turn.InstanceKey) {
			c := turnstoretest.First(k)
			c.BacklogPop = 1 // of an empty backlog
			if err := s.Commit(ctx, c); err == nil {
				t.Fatal("a commit popping an empty backlog was accepted")
			}
		}},
		{name: "a lock file alone, read by List", run: leaveLockFile, then: func(t *testing.T, s *Store, k turn.InstanceKey) {
			if list, bad, err := s.List(ctx); err != nil || len(list) != 0 || len(bad) != 0 {
				t.Fatalf("List: %v %v %v", list, bad, err)
			}
		}},
		{name: "a lock file alone, read by Load", run: leaveLockFile, then: func(t *testing.T, s *Store, k turn.InstanceKey) {
			if _, err := s.Load(ctx, k); !errors.Is(err, domain.ErrNotFound) {
				t.Fatalf("Load: %v, want ErrNotFound", err)
			}
		}},
		{name: "a lock file alone, deleted", run: leaveLockFile, then: func(t *testing.T, s *Store, k turn.InstanceKey) {
			if err := s.Delete(ctx, k); !errors.Is(err, domain.ErrNotFound) {
				t.Fatalf("Delete: %v, want ErrNotFound", err)
			}
		}},
		{name: "a torn first line alone, read by List", run: func(t *testing.T, s *Store, k turn.InstanceKey) {
			// A crash in the middle of the first commit: nothing committed.
			leaveLockFile(t, s, k)
			appendFile(t, filepath.Join(s.instanceDir(k), journalFile), `{"v":1,"c":{"expect":0`)
		}, then: func(t *testing.T, s *Store, k turn.InstanceKey) {
			if list, bad, err := s.List(ctx); err != nil || len(list) != 0 || len(bad) != 0 {
				t.Fatalf("List: %v %v %v", list, bad, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			k := turnstoretest.Key(t)
			tc.run(t, s, k)
			if tc.then != nil {
				tc.then(t, s, k)
			}
			wantEmpty(t, s.dir)
			// The key starts over.
			must(t, s.Commit(ctx, turnstoretest.First(k)))
			if _, err := s.Load(ctx, k); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// leaveLockFile leaves k's directory with its lock file only, as a read
// that raced a delete did (it took the lock of a file the delete removed,
// and made a new one), or a crash before the first commit.
func leaveLockFile(t *testing.T, s *Store, k turn.InstanceKey) {
	t.Helper()
	dir := s.instanceDir(k)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, lockFile), nil, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReadWaitingOnADeleteLeavesNothing: a read that waits on the lock
// while a delete holds it wakes to find the lock file gone; it must not
// leave the new lock file it takes in its place (before, it did, and the
// directory stayed: the delete's last step, removing the directory, found
// it not empty).
func TestReadWaitingOnADeleteLeavesNothing(t *testing.T) {
	if _, err := os.Stat("/proc/self/fd"); err != nil {
		t.Skip("needs /proc to see the read wait on the lock")
	}
	ctx := context.Background()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	k := turnstoretest.Key(t)
	must(t, s.Commit(ctx, turnstoretest.First(k)))
	dir := s.instanceDir(k)
	lockPath := filepath.Join(dir, lockFile)
	// The delete, step by step, as another process would run it.
	held, err := atomicfile.LockFile(ctx, lockPath)
	if err != nil {
		t.Fatal(err)
	}
	reader, _ := New(s.dir)
	read := make(chan error, 1)
	go func() {
		_, err := reader.Load(ctx, k)
		read <- err
	}()
	// The delete's open file and the waiting read's.
	waitOpenedTwice(t, lockPath)
	// No snapshot yet: there is one only after a turn's end.
	for _, name := range []string{journalFile, keyFile} {
		must(t, os.Remove(filepath.Join(dir, name)))
	}
	must(t, held.RemoveAndUnlock())
	if err := <-read; !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("the waiting read: %v, want ErrNotFound", err)
	}
	_ = os.Remove(dir)                 // the delete's last step
	must(t, os.RemoveAll(s.listDir())) // and its entries
	wantEmpty(t, s.dir)
}

// waitOpenedTwice waits until this process has path open twice.
func waitOpenedTwice(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		fds, _ := os.ReadDir("/proc/self/fd")
		n := 0
		for _, fd := range fds {
			if target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && target == path {
				n++
			}
		}
		if n >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is open %d times, want 2", path, n)
		}
		runtime.Gosched()
	}
}

// TestReadsRacingDeletesLeaveNothing: loads, lists and event reads that
// race an instance's creation and deletion leave no directory or lock
// file once the instance is gone. Before, a read waiting on the lock of a
// deleted instance made a new lock file, which stayed.
func TestReadsRacingDeletesLeaveNothing(t *testing.T) {
	ctx := context.Background()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other, _ := New(s.dir) // another process on the home
	k := turnstoretest.Key(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, read := range []func() error{
		func() error {
			if _, err := other.Load(ctx, k); err != nil && !errors.Is(err, domain.ErrNotFound) {
				return err
			}
			return nil
		},
		func() error { _, _, err := other.List(ctx); return err },
		func() error {
			if _, _, err := s.TurnEvents(ctx, k, "t1", -1); err != nil && !errors.Is(err, domain.ErrNotFound) {
				return err
			}
			return nil
		},
	} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := read(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range 100 {
		must(t, s.Commit(ctx, turnstoretest.First(k)))
		must(t, s.Delete(ctx, k))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	wantEmpty(t, s.dir)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
