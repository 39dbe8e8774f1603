package queueworker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/local/filequeue"
)

// lockFiles lists the lock files under dir/locks.
func lockFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "locks"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestLockFilesGoWithTheirDrain: no lock file outlives the handling of its
// instance's events, however many instances ran.
func TestLockFilesGoWithTheirDrain(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q, err := filequeue.New(filepath.Join(dir, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range []string{"i1", "i2", "i3", "i4", "i5"} {
		for n := range 2 {
			if err := q.Enqueue(ctx, event(inst, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	handled := 0
	w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, Handle: func(context.Context, domain.Event) error { handled++; return nil }}
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if handled != 10 {
		t.Fatalf("handled %d events, want 10", handled)
	}
	if got := lockFiles(t, dir); len(got) != 0 {
		t.Fatalf("lock files left: %v", got)
	}
}

// TestRunRemovesIdleLockFiles: Run removes the lock files a crash or an
// older version left, and keeps one that is held.
func TestRunRemovesIdleLockFiles(t *testing.T) {
	if !locksExclude() {
		t.Skip("no file locks here")
	}
	dir := t.TempDir()
	locks := filepath.Join(dir, "locks")
	if err := os.MkdirAll(locks, 0o700); err != nil {
		t.Fatal(err)
	}
	held := lockName(keyOf(event("busy", 0)))
	for _, inst := range []string{"gone1", "gone2", "gone3"} {
		if err := os.WriteFile(filepath.Join(locks, lockName(keyOf(event(inst, 0)))), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Another server on the home holds one.
	other, err := atomicfile.LockFile(context.Background(), filepath.Join(locks, held))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock()

	q, err := filequeue.New(filepath.Join(dir, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, Poll: time.Hour, Handle: func(context.Context, domain.Event) error { return nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(lockFiles(t, dir), []string{held}) {
		if time.Now().After(deadline) {
			t.Fatalf("lock files: %v, want only the held %s", lockFiles(t, dir), held)
		}
		time.Sleep(time.Millisecond)
	}
	lctx, lcancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer lcancel()
	if l, err := atomicfile.LockFile(lctx, filepath.Join(locks, held)); !errors.Is(err, context.DeadlineExceeded) {
		if err == nil {
			l.Unlock()
		}
		t.Fatalf("the held lock was taken from its holder (err %v)", err)
	}
}

// locksExclude reports whether file locks exclude here: a held lock
// cannot be taken.
func locksExclude() bool {
	path := filepath.Join(os.TempDir(), "queueworker-probe-"+time.Now().Format("150405.000000000")+".lock")
	defer os.Remove(path)
	l, err := atomicfile.LockFile(context.Background(), path)
	if err != nil {
		return false
	}
	defer l.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	l2, err := atomicfile.LockFile(ctx, path)
	if err == nil {
		l2.Unlock()
		return false
	}
	return true
}

// TestRemovedLocksStillExclude: two servers on one home (two workers, each
// lock its own open file, as two processes) removing lock files as they
// go never run one instance's events at once.
func TestRemovedLocksStillExclude(t *testing.T) {
	if !locksExclude() {
		t.Skip("no file locks here")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	q, err := filequeue.New(filepath.Join(dir, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	insts := []string{"i1", "i2", "i3"}
	const perInstance = 40
	for n := range perInstance {
		for _, inst := range insts {
			if err := q.Enqueue(ctx, event(inst, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	inFlight := map[string]int{}
	handle := func(_ context.Context, ev domain.Event) error {
		mu.Lock()
		inFlight[ev.InstanceKey]++
		if inFlight[ev.InstanceKey] > 1 {
			t.Errorf("instance %s ran two events at once", ev.InstanceKey)
		}
		mu.Unlock()
		time.Sleep(100 * time.Microsecond) // the turn's work
		mu.Lock()
		inFlight[ev.InstanceKey]--
		mu.Unlock()
		return nil
	}
	var wg sync.WaitGroup
	for range 2 {
		w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, Poll: time.Millisecond, Handle: handle}
		wg.Go(func() { w.Run(ctx) })
	}
	for len(queuedIDs(t, q)) > 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	if left := queuedIDs(t, q); len(left) != 0 {
		t.Fatalf("%d events left", len(left))
	}
	if got := lockFiles(t, dir); len(got) != 0 {
		t.Fatalf("lock files left: %v", got)
	}
}
