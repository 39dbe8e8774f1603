package filelimit

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/limitertest"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

var _ toolhooks.Limiter = (*Limiter)(nil)

func TestConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, limits ratelimit.Limits, now func() time.Time) (toolhooks.Limiter, error) {
		return New(t.TempDir(), limits, now)
	})
}

func TestFileNamesHoldNoInput(t *testing.T) {
	dir := t.TempDir()
	l, err := New(dir, ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	const principal = "../../etc/passwd-canary"
	if ok, _, err := l.Allow(context.Background(), principal, "../tool"); err != nil || !ok {
		t.Fatalf("Allow = %v, %v", ok, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("want a .tat and a .lock file, got %d entries", len(entries))
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), "canary") || strings.Contains(e.Name(), "tool") {
			t.Errorf("file name %q holds the input", e.Name())
		}
	}
}

// allowOverStored stores content as alice's search state, then asks.
func allowOverStored(t *testing.T, content string) (bool, error) {
	t.Helper()
	dir := t.TempDir()
	l, err := New(dir, ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ratelimit.Key("alice", "search")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, key+".tat"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	ok, _, err := l.Allow(context.Background(), "alice", "search")
	return ok, err
}

func TestFileCorruptStateIsAnError(t *testing.T) {
	ok, err := allowOverStored(t, "garbage")
	if err == nil || ok {
		t.Fatalf("Allow = %v, %v; want an error", ok, err)
	}
	if strings.Contains(err.Error(), "alice") {
		t.Errorf("error %q holds the principal", err)
	}
}

// The cross-process test runs this test binary twice as children, each
// hammering one key from many goroutines with a frozen clock.
const (
	childDirEnv  = "AGENTAUTH_FILELIMIT_CHILD_DIR"
	crossBurst   = 25
	crossWorkers = 8
	crossCalls   = 20 // per worker
)

// TestFileChildProcess is the child's side; it does nothing unless run by
// TestFileAcrossProcesses.
func TestFileChildProcess(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("run by TestFileAcrossProcesses")
	}
	l, err := New(dir, ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: crossBurst}}, limitertest.Frozen)
	if err != nil {
		t.Fatal(err)
	}
	// Start together: the parent creates the start file once both run.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "start")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no start signal")
		}
	}
	fmt.Printf("allowed=%d\n", limitertest.Hammer(t, l, "alice", "search", crossWorkers, crossCalls))
}

func TestFileAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	var cmds []*exec.Cmd
	var outs []*bufio.Scanner
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileChildProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), childDirEnv+"="+dir)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
		outs = append(outs, bufio.NewScanner(out))
	}
	for _, cmd := range cmds { // both start before either is read
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "start"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var total int64
	for i, cmd := range cmds {
		var got int64 = -1
		for outs[i].Scan() {
			if v, ok := strings.CutPrefix(outs[i].Text(), "allowed="); ok {
				got, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		if got < 0 {
			t.Fatalf("child %d reported no count", i)
		}
		t.Logf("child %d: %d allowed", i, got)
		total += got
	}
	if total != crossBurst {
		t.Fatalf("%d calls allowed across two processes, want exactly the burst %d", total, crossBurst)
	}
}

// TestSweepRemovesRefilledBuckets: state files are not kept forever; only
// the ones whose bucket has refilled go, and a bucket still draining keeps
// its TAT (the decision after the sweep is the one before it).
func TestSweepRemovesRefilledBuckets(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	l, err := New(dir, ratelimit.Limits{Default: ratelimit.Limit{Rate: 1.0 / 60, Burst: 1}}, clock) // one call a minute
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, p := range []string{"alice", "bob", "carol"} {
		if ok, _, err := l.Allow(ctx, p, "search"); !ok || err != nil {
			t.Fatalf("%s: %v %v", p, ok, err)
		}
	}
	// A lock file whose state is gone (a crash between two removals).
	if err := os.WriteFile(filepath.Join(dir, strings.Repeat("ab", 32)+".lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		entries, _ := os.ReadDir(dir)
		return len(entries)
	}
	if n, err := l.Sweep(ctx); err != nil || n != 1 || count() != 6 {
		t.Fatalf("sweep while draining: removed %d (%v), %d files left; want the orphan lock only", n, err, count())
	}
	now = now.Add(90 * time.Second) // refilled (60 s) but within the slack
	if ok, _, _ := l.Allow(ctx, "carol", "search"); !ok {
		t.Fatal("carol's bucket has refilled")
	}
	if n, _ := l.Sweep(ctx); n != 0 {
		t.Fatalf("removed %d keys inside the slack", n)
	}
	now = now.Add(30 * time.Second) // +120 s: alice's and bob's buckets refilled at +60 s, exactly a slack ago
	if n, err := l.Sweep(ctx); err != nil || n != 2 || count() != 2 {
		t.Fatalf("sweep at the slack's edge: removed %d (%v), %d files left; want alice's and bob's gone", n, err, count())
	}
	now = now.Add(10 * time.Second) // +130 s: carol's call at +90 s drains until +150 s
	if n, err := l.Sweep(ctx); err != nil || n != 0 || count() != 2 {
		t.Fatalf("sweep: removed %d (%v), %d files left; want carol's kept", n, err, count())
	}
	if ok, _, _ := l.Allow(ctx, "carol", "search"); ok {
		t.Fatal("after the sweep carol may call again 40 s after her last call: her state was lost")
	}
	if ok, _, _ := l.Allow(ctx, "alice", "search"); !ok {
		t.Fatal("alice's removed state does not allow her")
	}
}

// TestStoredZeroIsAState: a TAT of 0 (the epoch) is a valid, long-refilled
// state, not corruption.
func TestStoredZeroIsAState(t *testing.T) {
	if ok, err := allowOverStored(t, "0\n"); !ok || err != nil {
		t.Fatalf("Allow over a zero TAT: %v %v", ok, err)
	}
}
