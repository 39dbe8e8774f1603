package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLeastSquares(t *testing.T) {
	for _, tc := range []struct {
		name             string
		xs, ys           []float64
		slope, mean, max float64 // max: the largest se allowed
	}{
		{"a line", []float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}, 2, 8, 1e-9},
		{"flat", []float64{0, 1, 2, 3}, []float64{4, 4, 4, 4}, 0, 4, 1e-9},
		{"noise around flat", []float64{0, 1, 2, 3, 4, 5}, []float64{10, 11, 9, 10, 11, 9}, -0.1143, 10, 0.5},
		{"falling", []float64{0, 0.5, 1}, []float64{3, 2, 1}, -2, 2, 1e-9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := leastSquares(tc.xs, tc.ys)
			if math.Abs(f.slope-tc.slope) > 1e-3 || math.Abs(f.mean-tc.mean) > 1e-9 || f.se > tc.max || f.n != len(tc.xs) {
				t.Fatalf("fit = %+v, want slope %g mean %g se ≤ %g", f, tc.slope, tc.mean, tc.max)
			}
		})
	}
	if f := leastSquares([]float64{1, 2}, []float64{1, 3}); !math.IsInf(f.se, 1) || f.slope != 2 {
		t.Fatalf("two points: %+v, want slope 2 and an unknown error", f)
	}
	if f := leastSquares(nil, nil); f.n != 0 || f.slope != 0 {
		t.Fatalf("no points: %+v", f)
	}
}

func TestJudge(t *testing.T) {
	hours := []float64{0, 1, 2, 3, 4, 5}
	line := func(b float64) []float64 {
		ys := make([]float64, len(hours))
		for i, x := range hours {
			ys[i] = 100 + b*x
		}
		return ys
	}
	for _, tc := range []struct {
		name    string
		m       metric
		verdict string
		failed  bool
	}{
		{"within the limit", metric{limit: 10, gated: true, xs: hours, ys: line(5)}, "flat", false},
		{"rising beyond it", metric{limit: 10, gated: true, xs: hours, ys: line(50)}, "RISING: not flat", true},
		{"falling beyond it", metric{limit: 10, gated: true, xs: hours, ys: line(-50)}, "falling", false},
		{"relative limit", metric{limit: 10, rel: true, gated: true, xs: hours, ys: line(20)}, "RISING: not flat", true},
		{"relative limit kept", metric{limit: 50, rel: true, gated: true, xs: hours, ys: line(20)}, "flat", false},
		{"within noise", metric{limit: 0, gated: true, xs: hours, ys: []float64{100, 130, 90, 125, 95, 120}}, "flat (within noise)", false},
		{"informational", metric{limit: math.Inf(1), xs: hours, ys: line(50)}, "rising (informational)", false},
		{"too few samples", metric{limit: 0, gated: true, xs: hours[:2], ys: line(50)[:2]}, "too few samples to judge", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := judge(tc.m, 2)
			if j.verdict != tc.verdict || j.failed != tc.failed {
				t.Fatalf("verdict %q failed %v, want %q %v (fit %+v, bound %g, noise %g)", j.verdict, j.failed, tc.verdict, tc.failed, j.fit, j.bound, j.noise)
			}
		})
	}
}

func TestQuantile(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := quantile(ds, tc.q); got != tc.want {
			t.Errorf("q%g = %s, want %s", tc.q, got, tc.want)
		}
	}
	if quantile(nil, 0.5) != 0 || quantile(ds[:1], 0.99) != time.Millisecond {
		t.Error("edge cases")
	}
}

func TestLatenciesCut(t *testing.T) {
	l := newLatencies()
	l.observe("a", 2*time.Millisecond, nil)
	l.observe("a", 4*time.Millisecond, nil)
	l.observe("b", 0, errTest)
	got := l.cut()
	if got["a"].n != 2 || got["a"].p50 != 2*time.Millisecond || got["a"].p99 != 4*time.Millisecond || got["b"].errs != 1 || got["b"].n != 0 {
		t.Fatalf("cut = %+v", got)
	}
	if again := l.cut(); len(again) != 0 {
		t.Fatalf("second cut = %+v, want empty", again)
	}
	totals, first := l.totals()
	if totals["a"].ok != 2 || totals["b"].errs != 1 || first["b"] != errTest.Error() {
		t.Fatalf("totals %+v first %v", totals, first)
	}
}

var errTest = testError("boom")

type testError string

func (e testError) Error() string { return string(e) }

func TestCPUTicks(t *testing.T) {
	// A command name may hold spaces and parentheses: fields count after
	// the last ')'.
	stat := "4242 (agent auth) (x) S 1 4242 4242 0 -1 4194560 1021 0 0 0 153 47 0 0 20 0 9 0 12345 1300000000 5000 18446744073709551615"
	got, err := cpuTicks(stat)
	if err != nil || got != 200 {
		t.Fatalf("cpuTicks = %d, %v, want 200", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x y"} {
		if _, err := cpuTicks(bad); err == nil {
			t.Errorf("cpuTicks(%q) accepted", bad)
		}
	}
}

func TestCPUPercent(t *testing.T) {
	now := time.Now()
	a := resources{at: now, cpuTicks: 1000}
	b := resources{at: now.Add(2 * time.Second), cpuTicks: 1100} // 1 s of CPU in 2 s
	if got := cpuPercent(a, b); math.Abs(got-50) > 1e-9 {
		t.Fatalf("cpuPercent = %g, want 50", got)
	}
	if got := cpuPercent(b, a); got != 0 {
		t.Fatalf("backwards: %g", got)
	}
}

func TestDirKind(t *testing.T) {
	for in, want := range map[string]string{
		".":                                      ".",
		"queue":                                  "queue",
		"oauth/sessions":                         "oauth/sessions",
		"turns/3fa4c0ffee0123456789abcdef012345": "turns/*",
		"turns/3fa4c0ffee0123456789abcdef012345/journal": "turns/*",
		"worker/locks/deep/er":                           "worker/locks",
	} {
		if got := dirKind(in); got != want {
			t.Errorf("dirKind(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCountFiles(t *testing.T) {
	root := t.TempDir()
	write := func(rel string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("abc"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("runtime-token")
	write("oauth/sessions/s1")
	write("oauth/sessions/s2")
	write("turns/0123456789abcdef0123/snapshot")
	files, bytes, dirs, err := countFiles(root)
	if err != nil || files != 4 || bytes != 12 {
		t.Fatalf("countFiles = %d files %d bytes, %v", files, bytes, err)
	}
	if dirs["."] != 1 || dirs["oauth/sessions"] != 2 || dirs["turns/*"] != 1 {
		t.Fatalf("dirs = %v", dirs)
	}
}

func TestVerdictError(t *testing.T) {
	err := verdictError{reasons: []string{"a rising", "b not back"}}
	if got := err.Error(); !strings.HasPrefix(got, "FAIL: ") || !strings.Contains(got, "a rising; b not back") {
		t.Fatalf("Error() = %q", got)
	}
}

// TestIdleGoroutinesAndHeap: the goroutines and the heap in use must come
// back within their tolerance of the baseline by the idle period's end;
// the threads are shown, never judged.
func TestIdleGoroutinesAndHeap(t *testing.T) {
	l := limits{idleCPU: 5, idleRSS: 64, idleGoroutines: 10, idleHeap: 48, idleFDs: 10}
	base := resources{rssKiB: 30 << 10, goroutines: 12, heapInuse: 8 << 20, fds: 15, threads: 7}
	at := func(s int, goroutines int, heapMiB uint64, threads int) idlePoint {
		r := base
		r.goroutines, r.heapInuse, r.threads = goroutines, heapMiB<<20, threads
		return idlePoint{at: time.Duration(s) * time.Second, res: r}
	}
	for _, tc := range []struct {
		name  string
		idle  []idlePoint
		fails []string // substrings, one per failure
	}{
		{"back", []idlePoint{at(5, 80, 90, 12), at(10, 20, 50, 12), at(60, 22, 50, 12)}, nil},
		{"goroutines stay", []idlePoint{at(5, 80, 20, 7), at(60, 23, 20, 7)}, []string{"idle goroutines 23 not back within 1m0s (baseline 12, tolerance +10)"}},
		{"heap stays", []idlePoint{at(5, 12, 57, 7), at(60, 12, 57, 7)}, []string{"idle heap in use (MiB) 57 not back"}},
		{"back, then up again", []idlePoint{at(5, 12, 8, 7), at(60, 40, 8, 7)}, []string{"idle goroutines 40"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			fails := printIdle(&out, 0, base, tc.idle, l)
			if len(fails) != len(tc.fails) {
				t.Fatalf("fails %q, want %d like %q\n%s", fails, len(tc.fails), tc.fails, out.String())
			}
			for i, want := range tc.fails {
				if !strings.Contains(fails[i], want) {
					t.Errorf("fail %q lacks %q", fails[i], want)
				}
			}
			if !strings.Contains(out.String(), "informational: the Go runtime keeps the OS threads it started") {
				t.Errorf("threads not shown as informational:\n%s", out.String())
			}
		})
	}
}

// TestFilesJudgedFromTheirLevelOff: the files under the home are fitted
// from filesFit.from and gated only when filesFit says so; the threads
// are informational and the goroutines and heap gated.
func TestFilesJudgedFromTheirLevelOff(t *testing.T) {
	var samples []sample
	for i := range 60 { // a sample a minute; files rise for 20 min, then stay
		r := resources{files: 300 * min(i, 20), goroutines: 30, heapInuse: 20 << 20, threads: 8 + i/10}
		samples = append(samples, sample{at: time.Duration(i) * time.Minute, res: r})
	}
	l := limits{filesSlope: 1000, goroutinesSlope: 100, heapSlope: 32}
	for _, tc := range []struct {
		files   filesFit
		verdict string
		failed  bool
	}{
		{filesFit{from: 25 * time.Minute, gated: true}, "flat (within noise)", false},
		{filesFit{from: 12 * time.Minute, gated: true}, "RISING: not flat", true},
		{filesFit{from: 12 * time.Minute}, "rising (informational)", false},
	} {
		byName := map[string]judged{}
		for _, m := range metrics(samples, 12*time.Minute, tc.files, l) {
			byName[m.name] = judge(m, 2)
		}
		f := byName["files under home"]
		if f.verdict != tc.verdict || f.failed != tc.failed || f.xs[0] != tc.files.from.Hours() {
			t.Errorf("%+v: files %q failed %v from %gh", tc.files, f.verdict, f.failed, f.xs[0])
		}
		if g, h, th := byName["goroutines"], byName["heap in use (MiB)"], byName["threads"]; !g.gated || !h.gated || th.gated || th.failed {
			t.Errorf("gated: goroutines %v, heap %v, threads %v (failed %v)", g.gated, h.gated, th.gated, th.failed)
		}
	}
}
