package atomicfile

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

func skipWithoutLocks(t *testing.T) {
	t.Helper()
	if !locksExclude {
		t.Skip("no file locks on this system")
	}
}

func mustLock(t *testing.T, path string) *Lock {
	t.Helper()
	l, err := LockFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// lockTimesOut checks that path cannot be locked within a short wait.
func lockTimesOut(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	l, err := LockFile(ctx, path)
	if err == nil {
		l.Unlock()
		t.Fatal("locked a lock that is held")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
}

func TestLockFile(t *testing.T) {
	skipWithoutLocks(t)
	for _, tc := range []struct {
		name    string
		release func(*Lock) error
		// fileStays is whether the lock file is still there afterwards.
		fileStays bool
	}{
		{"unlock", (*Lock).Unlock, true},
		{"remove and unlock", (*Lock).RemoveAndUnlock, !removeLockFiles},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.lock")
			l := mustLock(t, path)
			wantMode(t, path, 0o600)
			lockTimesOut(t, path)

			got := make(chan error, 1)
			go func() {
				l2, err := LockFile(context.Background(), path)
				if err == nil {
					err = l2.Unlock()
				}
				got <- err
			}()
			select {
			case err := <-got:
				t.Fatalf("a waiter took a held lock (err %v)", err)
			case <-time.After(50 * time.Millisecond):
			}
			if err := tc.release(l); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter did not get the released lock")
			}
			// The waiter may have created the file again after a removal;
			// test the removal alone on a fresh holder.
			l = mustLock(t, path)
			if err := tc.release(l); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); (err == nil) != tc.fileStays {
				t.Fatalf("lock file stays: %v, want %v", err == nil, tc.fileStays)
			}
		})
	}
}

// A waiter that gets the lock on a file its holder removed must notice and
// lock the file the path names now, or it and a newcomer would both hold
// "the" lock.
func TestLockAfterRemoveExcludesNewcomers(t *testing.T) {
	skipWithoutLocks(t)
	if !removeLockFiles {
		t.Skip("lock files are never removed here")
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	holder := mustLock(t, path)
	got := make(chan *Lock, 1)
	opened := make(chan struct{}, 2)
	go func() {
		l, err := lockFile(context.Background(), path, func() { opened <- struct{}{} })
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	<-opened // the waiter holds the old file open and waits for its lock
	if err := holder.RemoveAndUnlock(); err != nil {
		t.Fatal(err)
	}
	waiter := <-got
	if waiter == nil {
		return
	}
	if len(opened) != 1 {
		t.Fatal("the waiter did not open the path again after the removal: the race was not run")
	}
	defer waiter.Unlock()
	held, err1 := waiter.f.Stat()
	named, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || !os.SameFile(held, named) {
		t.Fatalf("the waiter holds a file the path no longer names (%v, %v)", err1, err2)
	}
	lockTimesOut(t, path)
}

func TestLockHonoursContext(t *testing.T) {
	skipWithoutLocks(t)
	path := filepath.Join(t.TempDir(), "x.lock")
	l := mustLock(t, path)
	defer l.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := LockFile(ctx, path); !errors.Is(err, context.Canceled) {
		t.Fatalf("want canceled, got %v", err)
	}
}

func TestLockFileMissingDirectory(t *testing.T) {
	_, err := LockFile(context.Background(), filepath.Join(t.TempDir(), "missing", "x.lock"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("want not exist, got %v", err)
	}
}

// Goroutines incrementing a counter file under the lock lose no update.
func TestLockExcludesGoroutines(t *testing.T) {
	skipWithoutLocks(t)
	dir := t.TempDir()
	lockPath, counter := filepath.Join(dir, "c.lock"), filepath.Join(dir, "c")
	if err := Replace(counter, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	const goroutines, rounds = 8, 25
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				l, err := LockFile(context.Background(), lockPath)
				if err != nil {
					t.Error(err)
					return
				}
				data, err := os.ReadFile(counter)
				n, _ := strconv.Atoi(string(data))
				if err == nil {
					err = Replace(counter, []byte(strconv.Itoa(n+1)), 0o600)
				}
				l.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	wantContent(t, counter, strconv.Itoa(goroutines*rounds))
}

// The cross-process test re-runs this test binary as a child that locks
// the file named in lockChildEnv, says "locked", and unlocks when its
// stdin closes.
const lockChildEnv = "ATOMICFILE_TEST_LOCK_PATH"

func TestLockChildProcess(t *testing.T) {
	path := os.Getenv(lockChildEnv)
	if path == "" {
		t.Skip("helper for TestLockExcludesProcesses")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := LockFile(ctx, path)
	if err != nil {
		os.Stdout.WriteString("error " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("locked\n")
	io.Copy(io.Discard, os.Stdin)
	l.Unlock()
}

func TestLockExcludesProcesses(t *testing.T) {
	skipWithoutLocks(t)
	if testing.Short() {
		t.Skip("spawns a process")
	}
	path := filepath.Join(t.TempDir(), "x.lock")

	parent := mustLock(t, path)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockChildProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer stdin.Close()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	nextLine := func(within time.Duration) (string, bool) {
		select {
		case l, ok := <-lines:
			return l, ok
		case <-time.After(within):
			return "", false
		}
	}

	// The parent holds the lock: the child waits.
	if l, ok := nextLine(300 * time.Millisecond); ok {
		t.Fatalf("child got past a lock the parent holds: %q", l)
	}
	if err := parent.Unlock(); err != nil {
		t.Fatal(err)
	}
	if l, _ := nextLine(10 * time.Second); l != "locked" {
		t.Fatalf("child after the parent unlocked: %q", l)
	}
	// The child holds the lock: the parent waits.
	lockTimesOut(t, path)
	stdin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := LockFile(ctx, path)
	if err != nil {
		t.Fatalf("parent after the child unlocked: %v", err)
	}
	l.Unlock()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
}
