package main

import (
	"bytes"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"
)

// profile is this test process's own profile name as debug=1 text: the
// format serve's /debug/pprof answers, from the runtime the soak runs on.
func profile(t *testing.T, name string) string {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup(name).WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// parkedForTheSoakTest is where TestGoroutineProfile's goroutines wait.
func parkedForTheSoakTest(release <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	<-release
}

// TestGoroutineProfile: the goroutines a stack gained since a baseline
// profile are found, counted and printed with their frames.
func TestGoroutineProfile(t *testing.T) {
	baseTotal, base := parseGoroutines(profile(t, "goroutine"))
	if baseTotal < 1 || len(base) < 1 || len(base[0].frames) == 0 {
		t.Fatalf("baseline: total %d, %d stacks", baseTotal, len(base))
	}
	const n = 25
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go parkedForTheSoakTest(release, &wg)
	}
	defer func() { close(release); wg.Wait() }()
	var now []stackCount
	var total int
	// The goroutines start at once but are scheduled when they are: poll
	// (bounded) until all wait in the channel receive.
	for range 1000 {
		total, now = parseGoroutines(profile(t, "goroutine"))
		if found(now) >= n {
			break
		}
		runtime.Gosched()
	}
	if got := found(now); got != n || total < baseTotal+n {
		t.Fatalf("%d goroutines in parkedForTheSoakTest (total %d, baseline %d), want %d", got, total, baseTotal, n)
	}
	var out bytes.Buffer
	printProfiles(&out, profiles{total: baseTotal, goroutines: base}, profiles{total: total, goroutines: now})
	text := out.String()
	first := strings.SplitN(text, "\n", 3)
	if len(first) < 3 || !strings.HasPrefix(strings.TrimSpace(first[1]), "25 / 0  (+25)") ||
		!strings.Contains(text, ".parkedForTheSoakTest debug_test.go:") {
		t.Fatalf("printed:\n%s", text)
	}
}

func found(stacks []stackCount) int {
	n := 0
	for _, s := range stacks {
		if strings.Contains(s.key(), ".parkedForTheSoakTest ") {
			n += s.n
		}
	}
	return n
}

// heldForTheSoakTest is allocated by one site TestHeapProfile finds.
var heldForTheSoakTest [][]byte

func holdForTheSoakTest(n, size int) {
	for range n {
		heldForTheSoakTest = append(heldForTheSoakTest, make([]byte, size))
	}
}

// TestHeapProfile: a site that holds 16 MiB is the first of the summary,
// its sampled bytes scaled to about what it holds.
func TestHeapProfile(t *testing.T) {
	holdForTheSoakTest(16<<10, 1<<10)
	defer func() { heldForTheSoakTest = nil }()
	runtime.GC() // the profile is as of the last GC
	header, sites := parseHeap(profile(t, "heap"))
	if !strings.HasPrefix(header, "heap profile: ") {
		t.Fatalf("header %q", header)
	}
	var held *heapSite
	for i := range sites {
		if strings.Contains(sites[i].key(), ".holdForTheSoakTest ") {
			held = &sites[i]
			break
		}
	}
	// A sampled estimate: within a factor of two of the 16 MiB.
	if held == nil || held.inuseBytes < 8<<20 || held.inuseBytes > 32<<20 {
		t.Fatalf("the holding site: %+v", held)
	}
	for i := 1; i < len(sites); i++ {
		if sites[i].inuseBytes > sites[i-1].inuseBytes || sites[i].inuseBytes == 0 {
			t.Fatalf("sites not sorted by bytes in use, or one holds none: %d then %d", sites[i-1].inuseBytes, sites[i].inuseBytes)
		}
	}
	var out bytes.Buffer
	printProfiles(&out, profiles{}, profiles{heapHeader: header, heap: sites})
	if !strings.Contains(out.String(), ".holdForTheSoakTest") {
		t.Fatalf("printed:\n%s", out.String())
	}
}

func TestScaleHeap(t *testing.T) {
	// One sample of a 2 MiB object at the 512 KiB rate is close to one
	// object; 10 samples of 1 KiB stand for about 512 times as many.
	if c, b := scaleHeap(1, 2<<20, 512<<10); c != 1 || b < 2<<20 || b > 2<<20+(64<<10) {
		t.Fatalf("large: %d, %d", c, b)
	}
	if c, b := scaleHeap(10, 10<<10, 512<<10); c < 5000 || c > 5200 || b < 5000<<10 || b > 5200<<10 {
		t.Fatalf("small: %d, %d", c, b)
	}
	if c, b := scaleHeap(0, 0, 512<<10); c != 0 || b != 0 {
		t.Fatalf("none: %d, %d", c, b)
	}
}

func TestFrame(t *testing.T) {
	for line, want := range map[string]string{
		"#\t0x4a2b3c\tnet/http.(*persistConn).readLoop+0x1c\t/usr/local/go/src/net/http/transport.go:2395": "net/http.(*persistConn).readLoop transport.go:2395",
		"#\t0x1\tmain.f+0x2\t\t\t\tf.go:3": "main.f f.go:3",
	} {
		if got, ok := frame(line); !ok || got != want {
			t.Errorf("frame(%q) = %q %v, want %q", line, got, ok, want)
		}
	}
	if _, ok := frame("5 @ 0x1 0x2"); ok {
		t.Error("a record line taken for a frame")
	}
}

// TestCopyLines: every byte reaches the log, a line longer than
// maxLogLine included, and the lines around it are matched.
func TestCopyLines(t *testing.T) {
	long := strings.Repeat("x", maxLogLine+10)
	in := "first\n" + long + "\n" + "agentauth listening on http://127.0.0.1:4242 (bundle b)\nlast without newline"
	var out bytes.Buffer
	var seen []string
	copyLines(strings.NewReader(in), &out, func(l string) { seen = append(seen, l) })
	if out.String() != in {
		t.Fatalf("copied %d bytes, want %d", out.Len(), len(in))
	}
	want := []string{"first", "agentauth listening on http://127.0.0.1:4242 (bundle b)", "last without newline"}
	if strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("matched %q, want %q", seen, want)
	}
	if got := startURL(want[1]); got != "http://127.0.0.1:4242" {
		t.Fatalf("startURL = %q", got)
	}
}

func TestDebugAddr(t *testing.T) {
	for line, want := range map[string]string{
		`{"time":"2026-11-28T00:00:00Z","level":"INFO","msg":"debug endpoints on","addr":"127.0.0.1:40123"}`: "127.0.0.1:40123",
		`{"level":"INFO","msg":"debug endpoints on","addr":"[::1]:6060"}`:                                    "[::1]:6060",
		`{"level":"INFO","msg":"debug endpoints on","addr":"10.0.0.5:6060"}`:                                 "", // never called off loopback
		`{"level":"INFO","msg":"agentauth started","addr":"127.0.0.1:8080"}`:                                 "",
		`{"level":"INFO","msg":"request","note":"debug endpoints on","addr":"127.0.0.1:1"}`:                  "",
		`not json "debug endpoints on"`:                                                                      "",
	} {
		if got := debugAddr(line); got != want {
			t.Errorf("debugAddr(%s) = %q, want %q", line, got, want)
		}
	}
}

func TestLevelOff(t *testing.T) {
	got, why := levelOff(5*time.Minute, 5*time.Minute)
	if got != 16*time.Minute || !strings.Contains(why, "sessions after 16m (10m lifetime + 5m retention + a 1m sweep)") ||
		!strings.Contains(why, "queue tombstones after 6m15s (5m window") {
		t.Fatalf("5m, 5m: %s, %q", got, why)
	}
	if got, _ := levelOff(time.Minute, time.Hour); got != 75*time.Minute {
		t.Fatalf("1m, 1h: %s, want the tombstones' 1h15m", got)
	}
	if got, _ := levelOff(0, 0); got != 25*time.Hour {
		t.Fatalf("the defaults: %s, want the tombstones' 25h (sessions: 24h11m)", got)
	}
}

func TestJudgeFiles(t *testing.T) {
	for _, tc := range []struct {
		duration, warmupEnd, levelOff time.Duration
		want                          filesFit
	}{
		{time.Hour, 12 * time.Minute, 16 * time.Minute, filesFit{from: 16 * time.Minute, gated: true}},
		{time.Hour, 12 * time.Minute, 5 * time.Minute, filesFit{from: 12 * time.Minute, gated: true}},
		{time.Hour, 12 * time.Minute, 46 * time.Minute, filesFit{from: 12 * time.Minute}},
		{6 * time.Minute, 72 * time.Second, 16 * time.Minute, filesFit{from: 72 * time.Second}},
	} {
		if got := judgeFiles(tc.duration, tc.warmupEnd, tc.levelOff); got != tc.want {
			t.Errorf("judgeFiles(%s, %s, %s) = %+v, want %+v", tc.duration, tc.warmupEnd, tc.levelOff, got, tc.want)
		}
	}
}

func TestHolders(t *testing.T) {
	own := func(f string) string { return ownPrefix + f }
	sites := []heapSite{
		{inuseBytes: 3 << 20, inuseObjects: 30, frames: []string{"encoding/json.(*decodeState).object decode.go:767", own("shared/local/turnfile.readJournal journal.go:40"), own("shared/local/turnfile.(*Store).Load store.go:90"), "net/http.HandlerFunc.ServeHTTP server.go:2294"}},
		{inuseBytes: 1 << 20, inuseObjects: 10, frames: []string{"reflect.growslice slice.go:373", own("shared/local/turnfile.readJournal journal.go:52")}},
		{inuseBytes: 2 << 20, inuseObjects: 5, frames: []string{"runtime.malg proc.go:5274", "runtime.newproc1 proc.go:5322"}},
	}
	got := holders(sites)
	if len(got) != 2 || got[0].name != "shared/local/turnfile.readJournal" || got[0].inuseBytes != 4<<20 || got[0].inuseObjects != 40 ||
		got[0].via != "shared/local/turnfile.(*Store).Load" || got[1].name != "runtime.newproc1" {
		t.Fatalf("holders = %+v", got)
	}
}
