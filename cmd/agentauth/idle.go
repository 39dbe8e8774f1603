package main

import (
	"context"
	"log/slog"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// defaultIdleRelease is how long serve waits with no request before it
// releases its caches (--idle-release).
const defaultIdleRelease = 30 * time.Second

// idleRelease gives memory back when serve has been idle: after a burst
// the stores' caches (tens of MiB of decoded states and records) stay
// warm, and Go returns the heap they free only at its next collection
// (forced every 2 minutes on an idle process) and to the OS gradually. A
// laptop process that handled a burst should drop back to its idle
// footprint, so after `after` with no request it drops the caches once,
// collects and returns the freed memory to the OS (debug.FreeOSMemory).
// The caches refill on the next reads; nothing is lost, as they only save
// decoding files.
type idleRelease struct {
	after   time.Duration
	release func()
	log     *slog.Logger
	now     func() time.Time

	last     atomic.Int64 // unix nanos of the last request started
	released atomic.Bool  // released since the last request
}

func newIdleRelease(after time.Duration, release func(), log *slog.Logger) *idleRelease {
	r := &idleRelease{after: after, release: release, log: log, now: time.Now}
	r.last.Store(r.now().UnixNano())
	return r
}

// wrap marks every request as activity. A long-lived request (an SSE
// stream, a long poll) counts when it starts: caches are a speed-up, so
// releasing them under an open stream costs a re-read, never a result.
func (r *idleRelease) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.last.Store(r.now().UnixNano())
		r.released.Store(false)
		h.ServeHTTP(w, req)
	})
}

// check releases when the last request is at least after ago and nothing
// was released since; it reports whether it released.
func (r *idleRelease) check() bool {
	if r.released.Load() || r.now().Sub(time.Unix(0, r.last.Load())) < r.after {
		return false
	}
	r.released.Store(true)
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	r.release()
	debug.FreeOSMemory()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	r.log.Info("idle: caches released", "idleFor", r.after.String(),
		"heapInuseBefore", before.HeapInuse, "heapInuseAfter", after.HeapInuse)
	return true
}

// run checks on every tick until ctx ends.
func (r *idleRelease) run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			r.check()
		}
	}
}
