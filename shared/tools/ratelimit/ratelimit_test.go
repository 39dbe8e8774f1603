package ratelimit

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

func TestMemoryConformance(t *testing.T) {
	runConformance(t, func(t *testing.T, limits Limits, now func() time.Time) (toolhooks.Limiter, error) {
		return NewMemory(limits, now)
	})
}

func TestFileConformance(t *testing.T) {
	runConformance(t, func(t *testing.T, limits Limits, now func() time.Time) (toolhooks.Limiter, error) {
		return NewFile(t.TempDir(), limits, now)
	})
}

func TestDecide(t *testing.T) {
	g := Limit{Rate: 1, Burst: 3}.gcra() // T = 1 s, τ = 2 s
	const s = 1_000_000
	for _, tc := range []struct {
		name      string
		tat, now  int64
		wantTAT   int64
		wantOK    bool
		wantRetry time.Duration
	}{
		{"new key", 0, 100 * s, 101 * s, true, 0},
		{"idle", 50 * s, 100 * s, 101 * s, true, 0},
		{"tat at now", 100 * s, 100 * s, 101 * s, true, 0},
		{"busy within tolerance", 102 * s, 100 * s, 103 * s, true, 0},
		{"just over", 103 * s, 100 * s, 103 * s, false, time.Second},
		{"one microsecond over", 102*s + 1, 100 * s, 102*s + 1, false, time.Second},
		{"far over", 110 * s, 100 * s, 110 * s, false, 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tat, ok, retry := g.decide(tc.tat, tc.now)
			if tat != tc.wantTAT || ok != tc.wantOK || retry != tc.wantRetry {
				t.Fatalf("decide(%d, %d) = %d, %v, %v; want %d, %v, %v", tc.tat, tc.now, tat, ok, retry, tc.wantTAT, tc.wantOK, tc.wantRetry)
			}
		})
	}
}

func TestLimitValidate(t *testing.T) {
	for _, l := range []Limit{{Rate: math.NaN(), Burst: 1}, {Rate: math.Inf(1), Burst: 1}, {Rate: 1, Burst: 400 * 24 * 3600}} {
		if err := l.Validate(); err == nil {
			t.Errorf("%+v accepted", l)
		}
	}
	for _, l := range []Limit{{Rate: 1e6, Burst: 1}, {Rate: 0.001, Burst: 10}, {Rate: 100, Burst: 1000}} {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
}

func TestFileNamesHoldNoInput(t *testing.T) {
	dir := t.TempDir()
	l, err := NewFile(dir, Limits{Default: Limit{Rate: 1, Burst: 1}}, nil)
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

func TestFileCorruptStateIsAnError(t *testing.T) {
	dir := t.TempDir()
	l, err := NewFile(dir, Limits{Default: Limit{Rate: 1, Burst: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, keyHash("alice", "search")+".tat")
	if err := os.WriteFile(path, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	ok, _, err := l.Allow(context.Background(), "alice", "search")
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
	childDirEnv  = "AGENTAUTH_RATELIMIT_CHILD_DIR"
	crossBurst   = 25
	crossWorkers = 8
	crossCalls   = 20 // per worker
)

var frozen = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// TestFileChildProcess is the child's side; it does nothing unless run by
// TestFileAcrossProcesses.
func TestFileChildProcess(t *testing.T) {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		t.Skip("run by TestFileAcrossProcesses")
	}
	l, err := NewFile(dir, Limits{Default: Limit{Rate: 1, Burst: crossBurst}}, func() time.Time { return frozen })
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
	fmt.Printf("allowed=%d\n", hammer(t, l, crossWorkers, crossCalls))
}

// hammer calls Allow on one key from workers goroutines, calls times each,
// and returns how many calls were allowed.
func hammer(t *testing.T, l toolhooks.Limiter, workers, calls int) int64 {
	t.Helper()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range calls {
				ok, _, err := l.Allow(context.Background(), "alice", "search")
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return allowed.Load()
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
