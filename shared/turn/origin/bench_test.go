package origin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkNotify is what the engine pays per committed turn.completed
// while every worker is held by a receiver that does not answer: the
// body built and queued, the oldest queued delivery dropped.
func BenchmarkNotify(b *testing.B) {
	hold := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hold }))
	defer srv.Close()
	defer close(hold)
	var logs logBuffer
	cfg := testConfig(&logs, connector("chat", srv.URL))
	cfg.Log = nil
	d, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = d.Close(ctx)
	}()
	tr := aTurn("turn-1", map[string]any{"connector": "chat", "channel": "C123"})
	evs := turnEvents("turn-1")[4:5]
	b.ReportAllocs()
	for b.Loop() {
		d.Notify(context.Background(), tr, evs)
	}
}
