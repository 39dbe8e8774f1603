package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Bounds of the debug endpoints' reads.
const (
	debugTimeout    = 10 * time.Second
	maxVarsBytes    = 64 << 10
	maxProfileBytes = 32 << 20 // a goroutine or heap profile as text
	// What a failure prints of the profiles.
	topStacks    = 10
	stackFrames  = 12
	topHolders   = 10
	topHeapSites = 5
	heapFrames   = 8
)

// ownPrefix starts the functions of this module: a heap site is put down
// to the innermost of them on its stack (holder).
const ownPrefix = "github.com/agentauth/agentauth/"

// debugVars is what serve's /debug/vars answers (cmd/agentauth/debug.go).
type debugVars struct {
	Goroutines  int    `json:"goroutines"`
	HeapAlloc   uint64 `json:"heapAlloc"`
	HeapInuse   uint64 `json:"heapInuse"`
	HeapObjects uint64 `json:"heapObjects"`
	Sys         uint64 `json:"sys"`
	NumGC       uint32 `json:"numGC"`
}

// debugClient reads serve's debug listener (--debug-addr, loopback).
type debugClient struct {
	base string // http://127.0.0.1:port
	http *http.Client
}

func newDebugClient(addr string) *debugClient {
	// Its own transport: the load's idle connections are closed before
	// the idle period, and these reads must not count as the load's.
	return &debugClient{base: "http://" + addr, http: &http.Client{Timeout: debugTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}}
}

// get reads path, at most limit bytes.
func (c *debugClient) get(ctx context.Context, path string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, debugTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("debug %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("debug %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("debug %s: HTTP %d", path, resp.StatusCode)
	}
	return body, nil
}

// vars reads /debug/vars.
func (c *debugClient) vars(ctx context.Context) (debugVars, error) {
	var v debugVars
	body, err := c.get(ctx, "/debug/vars", maxVarsBytes)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("debug /debug/vars: %w", err)
	}
	return v, nil
}

// profiles are the goroutine and heap profiles (debug=1 text) at one time.
type profiles struct {
	goroutines []stackCount
	total      int // goroutines in all
	heapHeader string
	heap       []heapSite
}

// profiles reads both profiles; an error leaves the part it could not read
// empty.
func (c *debugClient) profiles(ctx context.Context) (profiles, error) {
	var p profiles
	g, gerr := c.get(ctx, "/debug/pprof/goroutine?debug=1", maxProfileBytes)
	if gerr == nil {
		p.total, p.goroutines = parseGoroutines(string(g))
	}
	h, herr := c.get(ctx, "/debug/pprof/heap?debug=1", maxProfileBytes)
	if herr == nil {
		p.heapHeader, p.heap = parseHeap(string(h))
	}
	if gerr != nil {
		return p, gerr
	}
	return p, herr
}

// stackCount is one stack of a goroutine profile and how many goroutines
// wait in it.
type stackCount struct {
	n      int
	frames []string // function and file:line, innermost first
}

func (s stackCount) key() string { return strings.Join(s.frames, "\n") }

// profileHeader is a record's first line in a debug=1 profile: a goroutine
// count ("5 @ 0x…") or a heap record ("3: 4096 [10: 8192] @ 0x…").
var (
	goroutineRecord = regexp.MustCompile(`^(\d+) @`)
	heapRecord      = regexp.MustCompile(`^(\d+): (\d+) \[(\d+): (\d+)\] @`)
	heapRate        = regexp.MustCompile(`@ heap/(\d+)$`)
	goroutineTotal  = regexp.MustCompile(`^goroutine profile: total (\d+)`)
)

// frame is a "#\t0x4a2b3c\tpkg.Func+0x1c\t\t/path/file.go:123" line as
// "pkg.Func file.go:123"; ok false for another line.
func frame(line string) (string, bool) {
	rest, ok := strings.CutPrefix(line, "#\t")
	if !ok {
		return "", false
	}
	f := strings.Fields(rest) // the runtime pads with tabs to align the files
	if len(f) < 3 {
		return strings.TrimSpace(rest), true
	}
	fn := f[1]
	if i := strings.LastIndex(fn, "+0x"); i > 0 {
		fn = fn[:i]
	}
	file := strings.TrimSpace(f[2])
	if i := strings.LastIndexByte(file, '/'); i >= 0 {
		file = file[i+1:]
	}
	return fn + " " + file, true
}

// parseGoroutines reads a goroutine profile (debug=1): the total and each
// stack with its count, as the runtime sorts them (most goroutines first).
func parseGoroutines(text string) (int, []stackCount) {
	total := 0
	var out []stackCount
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := goroutineTotal.FindStringSubmatch(line); m != nil {
			total, _ = strconv.Atoi(m[1])
			continue
		}
		if m := goroutineRecord.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, stackCount{n: n})
			continue
		}
		if f, ok := frame(line); ok && len(out) > 0 {
			last := &out[len(out)-1]
			last.frames = append(last.frames, f)
		}
	}
	return total, out
}

// heapSite is one allocation site of a heap profile: what it holds in
// use (as of the last GC) and what it has allocated since the start,
// estimated from the sampled allocations (see scaleHeap).
type heapSite struct {
	inuseObjects, inuseBytes int64
	allocObjects, allocBytes int64
	frames                   []string
}

func (h heapSite) key() string { return strings.Join(h.frames, "\n") }

// scaleHeap estimates what count sampled allocations of size bytes in
// all stand for, as pprof does (scaleHeapSample): the runtime samples an
// allocation with probability 1-exp(-size/rate), and a debug=1 profile
// prints the samples unscaled.
func scaleHeap(count, size, rate int64) (int64, int64) {
	if count == 0 || size == 0 || rate <= 1 {
		return count, size
	}
	scale := 1 / (1 - math.Exp(-float64(size)/float64(count)/float64(rate)))
	return int64(float64(count) * scale), int64(float64(size) * scale)
}

// parseHeap reads a heap profile (debug=1): its header line and the sites
// that hold heap, sorted by bytes in use, most first, their counts
// scaled to estimates (scaleHeap). The runtime.MemStats comment block at
// its end is left out.
func parseHeap(text string) (string, []heapSite) {
	header := ""
	rate := int64(0) // the sampling rate; the header says twice it
	var out []heapSite
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if header == "" && strings.HasPrefix(line, "heap profile:") {
			header = line
			if m := heapRate.FindStringSubmatch(line); m != nil {
				rate, _ = strconv.ParseInt(m[1], 10, 64)
				rate /= 2
			}
			continue
		}
		if strings.HasPrefix(line, "# runtime.MemStats") {
			break
		}
		if m := heapRecord.FindStringSubmatch(line); m != nil {
			var s heapSite
			s.inuseObjects, _ = strconv.ParseInt(m[1], 10, 64)
			s.inuseBytes, _ = strconv.ParseInt(m[2], 10, 64)
			s.allocObjects, _ = strconv.ParseInt(m[3], 10, 64)
			s.allocBytes, _ = strconv.ParseInt(m[4], 10, 64)
			s.inuseObjects, s.inuseBytes = scaleHeap(s.inuseObjects, s.inuseBytes, rate)
			s.allocObjects, s.allocBytes = scaleHeap(s.allocObjects, s.allocBytes, rate)
			out = append(out, s)
			continue
		}
		if f, ok := frame(line); ok && len(out) > 0 {
			last := &out[len(out)-1]
			last.frames = append(last.frames, f)
		}
	}
	out = slices.DeleteFunc(out, func(s heapSite) bool { return s.inuseBytes == 0 })
	slices.SortStableFunc(out, func(a, b heapSite) int { return cmp.Compare(b.inuseBytes, a.inuseBytes) })
	return header, out
}

// printProfiles writes where the goroutines and the heap are now, against
// the baseline's profiles: the stacks that gained the most goroutines and
// the sites that hold the most heap, each cut to a few frames.
func printProfiles(w io.Writer, base, now profiles) {
	fmt.Fprintf(w, "soak: goroutine profile (/debug/pprof/goroutine?debug=1): %d goroutines now, %d at the baseline; the %d stacks that gained the most (now / at the baseline), %d frames at most:\n",
		now.total, base.total, topStacks, stackFrames)
	before := map[string]int{}
	for _, s := range base.goroutines {
		before[s.key()] += s.n
	}
	type grown struct {
		stackCount
		was int
	}
	var gains []grown
	for _, s := range now.goroutines {
		gains = append(gains, grown{s, before[s.key()]})
	}
	slices.SortStableFunc(gains, func(a, b grown) int { return cmp.Compare(b.n-b.was, a.n-a.was) })
	for _, g := range gains[:min(topStacks, len(gains))] {
		if g.n <= g.was {
			break
		}
		fmt.Fprintf(w, "  %d / %d  (%+d)\n", g.n, g.was, g.n-g.was)
		printFrames(w, g.frames, stackFrames)
	}
	fmt.Fprintf(w, "soak: heap profile (/debug/pprof/heap?debug=1, as of the last GC; sampled, so a site's bytes are estimates in steps of about half a MiB): %s\n", orNone(now.heapHeader))
	fmt.Fprintf(w, "soak: the heap in use by holder — the innermost function of this module on the site's stack, else the stack's outermost — the %d largest (now / at the baseline):\n", topHolders)
	baseBy := map[string]int64{}
	for _, h := range holders(base.heap) {
		baseBy[h.name] = h.inuseBytes
	}
	for _, h := range holders(now.heap)[:min(topHolders, len(holders(now.heap)))] {
		fmt.Fprintf(w, "  %10s in %7d objects / %10s  %s\n", mib(h.inuseBytes), h.inuseObjects, mib(baseBy[h.name]), h.name)
		if h.via != "" {
			fmt.Fprintf(w, "      via %s\n", h.via)
		}
	}
	fmt.Fprintf(w, "soak: the %d sites holding the most heap (in use now / at the baseline), %d frames at most:\n", topHeapSites, heapFrames)
	was := map[string]int64{}
	for _, s := range base.heap {
		was[s.key()] += s.inuseBytes
	}
	for _, s := range now.heap[:min(topHeapSites, len(now.heap))] {
		fmt.Fprintf(w, "  %s in %d objects / %s  (allocated since the start: %s in %d objects)\n",
			mib(s.inuseBytes), s.inuseObjects, mib(was[s.key()]), mib(s.allocBytes), s.allocObjects)
		printFrames(w, s.frames, heapFrames)
	}
}

// holder is the heap in use put down to one function.
type holder struct {
	name                     string
	via                      string // the next callers of this module, outwards (of the largest site)
	inuseObjects, inuseBytes int64
}

// holders sums sites by holder, largest first.
func holders(sites []heapSite) []holder {
	by := map[string]*holder{}
	var order []*holder
	for _, s := range sites { // largest first: via is the largest site's
		name, via := holderOf(s.frames)
		h := by[name]
		if h == nil {
			h = &holder{name: name, via: via}
			by[name] = h
			order = append(order, h)
		}
		h.inuseObjects += s.inuseObjects
		h.inuseBytes += s.inuseBytes
	}
	out := make([]holder, len(order))
	for i, h := range order {
		out[i] = *h
	}
	slices.SortStableFunc(out, func(a, b holder) int { return cmp.Compare(b.inuseBytes, a.inuseBytes) })
	return out
}

// holderOf is the function of the innermost frame of this module and up
// to three of its callers of this module; without one, the outermost
// frame's function.
func holderOf(frames []string) (string, string) {
	fn := func(f string) string { name, _, _ := strings.Cut(f, " "); return name }
	var own []string
	for _, f := range frames {
		if strings.HasPrefix(f, ownPrefix) {
			own = append(own, strings.TrimPrefix(fn(f), ownPrefix))
		}
	}
	switch {
	case len(own) > 0:
		return own[0], strings.Join(own[1:min(4, len(own))], " ← ")
	case len(frames) > 0:
		return fn(frames[len(frames)-1]), ""
	}
	return "(no stack)", ""
}

func printFrames(w io.Writer, frames []string, n int) {
	for _, f := range frames[:min(n, len(frames))] {
		fmt.Fprintf(w, "      %s\n", f)
	}
	if len(frames) > n {
		fmt.Fprintf(w, "      … %d more\n", len(frames)-n)
	}
}

func mib(b int64) string { return fmt.Sprintf("%.2fMiB", float64(b)/(1<<20)) }
