package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestIdleRelease: serve releases its caches once after --idle-release
// with no request, not before, not again while it stays idle, and again
// after a request and another idle period; a request in between puts the
// release off. The clock and the ticks are the test's.
func TestIdleRelease(t *testing.T) {
	var clock atomic.Int64
	clock.Store(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	advance := func(d time.Duration) { clock.Add(int64(d)) }
	var released atomic.Int32
	r := newIdleRelease(30*time.Second, func() { released.Add(1) }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	r.now = now
	r.last.Store(now().UnixNano())
	h := r.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	request := func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code != http.StatusNoContent {
			t.Fatalf("the wrapped handler answered %d", rec.Code)
		}
	}
	steps := []struct {
		what    string
		do      func()
		release bool // check releases now
		total   int32
	}{
		{"at the start", func() {}, false, 0},
		{"29s idle", func() { advance(29 * time.Second) }, false, 0},
		{"a request at 29s", request, false, 0},
		{"30s after the start, 1s after the request", func() { advance(time.Second) }, false, 0},
		{"30s after the request", func() { advance(29 * time.Second) }, true, 1},
		{"still idle 10 min later", func() { advance(10 * time.Minute) }, false, 1},
		{"a request", request, false, 1},
		{"10s after it", func() { advance(10 * time.Second) }, false, 1},
		{"31s after it", func() { advance(21 * time.Second) }, true, 2},
	}
	for _, s := range steps {
		s.do()
		if got := r.check(); got != s.release {
			t.Fatalf("%s: check released %v, want %v", s.what, got, s.release)
		}
		if got := released.Load(); got != s.total {
			t.Fatalf("%s: released %d times, want %d", s.what, got, s.total)
		}
	}

	// run checks on each tick and stops with its context.
	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() { r.run(ctx, tick); close(done) }()
	request()
	advance(time.Minute)
	tick <- now()
	tick <- now() // run has finished the first check when it takes this one
	if got := released.Load(); got != 3 {
		t.Fatalf("after a tick a minute after a request: released %d times, want 3", got)
	}
	cancel()
	<-done
}

// TestServeIdleReleaseFlag: a negative --idle-release is refused with what
// to give instead.
func TestServeIdleReleaseFlag(t *testing.T) {
	t.Setenv("AGENTAUTH_HOME", t.TempDir())
	_, _, err := runCmd(t, "serve", "--idle-release", "-1s")
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(ue.msg, "--idle-release -1s: want a duration ≥ 0") {
		t.Fatalf("serve --idle-release -1s: %v", err)
	}
}
