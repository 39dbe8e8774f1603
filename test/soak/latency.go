package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// The routes the soak times, in the order it prints them.
var routes = []string{
	routeTokenReady, routeTokenConsent, routeConsent,
	routeInvoke,
	routeTurnPost, routeTurnInspect, routeTurnSSE, routeTurnTerminate, routeTurnDelete,
	routeMCPInit, routeMCPList, routeMCPCall, routeMCPClose,
}

const (
	routeTokenReady    = "token.ready"    // POST /v1/oauth/token, the consented grant
	routeTokenConsent  = "token.consent"  // POST /v1/oauth/token, the consent app
	routeConsent       = "consent"        // GET authorize → callback (a completed consent)
	routeInvoke        = "tools.invoke"   // POST /v1/tools/invoke
	routeTurnPost      = "turn.post"      // POST /v1/instances/{swarm}/{key}/events
	routeTurnInspect   = "turn.inspect"   // GET /v1/instances/{swarm}/{key}/{agent}
	routeTurnSSE       = "turn.sse"       // the event stream, open → end or turn.parked
	routeTurnTerminate = "turn.terminate" // POST …/terminate of a parked instance
	routeTurnDelete    = "turn.delete"    // DELETE … of a parked instance
	routeMCPInit       = "mcp.initialize" // connect: initialize + initialized
	routeMCPList       = "mcp.tools/list"
	routeMCPCall       = "mcp.tools/call"
	routeMCPClose      = "mcp.close" // DELETE of the session
)

// maxWindow bounds the latencies kept per route and interval.
const maxWindow = 1 << 18

// latencies collects request times per route for the current interval
// and counts per route over the whole run. Safe for concurrent use.
type latencies struct {
	mu     sync.Mutex
	window map[string][]time.Duration
	errs   map[string]int // in the window
	total  map[string]*count
	first  map[string]string // the first error of each route
}

type count struct{ ok, errs int }

// routeStats is one route over one interval.
type routeStats struct {
	n, errs  int
	p50, p99 time.Duration
}

func newLatencies() *latencies {
	return &latencies{window: map[string][]time.Duration{}, errs: map[string]int{}, total: map[string]*count{}, first: map[string]string{}}
}

// observe records one request of route that took d; err != nil counts it
// as failed (its time is not kept).
func (l *latencies) observe(route string, d time.Duration, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.total[route]
	if c == nil {
		c = &count{}
		l.total[route] = c
	}
	if err != nil {
		c.errs++
		l.errs[route]++
		if _, ok := l.first[route]; !ok {
			l.first[route] = err.Error()
		}
		return
	}
	c.ok++
	if len(l.window[route]) < maxWindow {
		l.window[route] = append(l.window[route], d)
	}
}

// cut returns the interval's stats per route and starts the next one.
func (l *latencies) cut() map[string]routeStats {
	l.mu.Lock()
	window, errs := l.window, l.errs
	l.window, l.errs = map[string][]time.Duration{}, map[string]int{}
	l.mu.Unlock()
	out := map[string]routeStats{}
	for r, ds := range window {
		slices.Sort(ds)
		out[r] = routeStats{n: len(ds), errs: errs[r], p50: quantile(ds, 0.50), p99: quantile(ds, 0.99)}
	}
	for r, e := range errs {
		if _, ok := out[r]; !ok {
			out[r] = routeStats{errs: e}
		}
	}
	return out
}

// totals returns the whole run's counts and first errors.
func (l *latencies) totals() (map[string]count, map[string]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]count{}
	for r, c := range l.total {
		out[r] = *c
	}
	return out, maps.Clone(l.first)
}

// quantile of sorted durations (nearest rank); 0 for none.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// formatRoutes is the routes' part of a sample line: name p50/p99 ms and
// the count (and failures), for routes that saw requests.
func formatRoutes(stats map[string]routeStats) string {
	var b strings.Builder
	for _, r := range routes {
		s, ok := stats[r]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, " %s %s/%s×%d", r, ms(s.p50), ms(s.p99), s.n)
		if s.errs > 0 {
			fmt.Fprintf(&b, "!%d", s.errs)
		}
	}
	return b.String()
}

// ms prints a duration in milliseconds with two significant decimals at
// most.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
