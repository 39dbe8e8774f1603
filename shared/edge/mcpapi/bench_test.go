//go:build unix

package mcpapi

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/tools/ratelimit"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRequestsOnOneSession (issue 17, point 4): b.N tools/call
// requests on one session of a session-keeping server, over loopback
// HTTP. Besides time and allocations per request (client and server: one
// process), it reports what the requests leave behind once answered: the
// goroutines still running, the live heap, and the CPU the process spends
// in the idle second that follows. Run it at two sizes to see that all
// three are flat in the number of requests:
//
//	go test -run '^$' -bench RequestsOnOneSession -benchtime 200x ./shared/edge/mcpapi/
//	go test -run '^$' -bench RequestsOnOneSession -benchtime 2000x ./shared/edge/mcpapi/
func BenchmarkRequestsOnOneSession(b *testing.B) {
	h := newHarness(b, harnessConfig{})
	h.tools.quiet = true
	c := h.raw(b, "tok-alice")
	c.open()
	for range 20 { // warm: the connection, the watch loop, the event store
		c.call("tools/call", `{"name":"echo","arguments":{"q":"warm"}}`)
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	heap0, goroutines0 := ms.HeapAlloc, runtime.NumGoroutine()

	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if resp, body := c.call("tools/call", `{"name":"echo","arguments":{"q":"hi"}}`); resp.StatusCode != 200 {
			b.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	b.StopTimer()

	// What the requests left: give the connection's goroutines a moment
	// to settle, then read the idle second.
	deadline := time.Now().Add(time.Second)
	for runtime.NumGoroutine() > goroutines0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cpu0 := cpuTime(b)
	time.Sleep(time.Second)
	idle := cpuTime(b) - cpu0
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(runtime.NumGoroutine()-goroutines0), "goroutines-left")
	b.ReportMetric(float64(int64(ms.HeapAlloc)-int64(heap0))/1024, "heap-KiB-left")
	b.ReportMetric(float64(idle.Microseconds())/1000, "idle-cpu-ms/s")
}

// BenchmarkIdleSessions (issue 17, point 4): 1,000 sessions that listed
// their tools, then nothing: per idle second (one op), the process's CPU
// and the manifests the watch resolves (each a metrics line in serve).
// The plane's revision does not move, so the watch resolves none.
//
//	go test -run '^$' -bench IdleSessions -benchtime 5x ./shared/edge/mcpapi/
func BenchmarkIdleSessions(b *testing.B) {
	const sessions = 1000
	h := newHarness(b, harnessConfig{manifestEvery: time.Second, revision: func(context.Context) string { return "r1" },
		limits: SessionLimits{MaxSessions: sessions, MaxPerPrincipal: sessions, InitializeRate: ratelimit.Limit{Rate: 1e6, Burst: sessions}}})
	h.tools.quiet = true
	for range sessions {
		c := h.raw(b, "tok-alice")
		c.open()
		c.call("tools/list", `{}`)
	}
	manifests := func() int {
		h.tools.mu.Lock()
		defer h.tools.mu.Unlock()
		return h.tools.manifests
	}
	m0, g0 := manifests(), runtime.NumGoroutine()
	b.ResetTimer()
	var idle time.Duration
	for range b.N {
		cpu0 := cpuTime(b)
		time.Sleep(time.Second)
		idle += cpuTime(b) - cpu0
	}
	b.StopTimer()
	b.ReportMetric(float64(idle.Microseconds())/1000/float64(b.N), "idle-cpu-ms/s")
	b.ReportMetric(float64(manifests()-m0)/float64(b.N), "manifests/s")
	b.ReportMetric(float64(g0), "goroutines")
}
