package turntools

import (
	"context"
	"testing"
)

// BenchmarkCatalog: step.tools of one turn, the principal's resolution
// cached (every step but a turn's first).
func BenchmarkCatalog(b *testing.B) {
	h := newHarness(b)
	t := turnOf("assistant", alice)
	ctx := context.Background()
	for b.Loop() {
		if _, err := h.tools.Catalog(ctx, t); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInvokeNative: the adapter and the hooks around a native tool
// that answers at once (no rate limit: its cost is the limiter's).
func BenchmarkInvokeNative(b *testing.B) {
	h := newHarness(b)
	h.tools.cfg.Hooks.Limiter = nil
	h.tools.cfg.Hooks.Sink = nil
	in := invocation(turnOf("assistant", alice), "c1", "echo", `{"q":"soup","n":2}`, "echo")
	ctx := context.Background()
	for b.Loop() {
		h.tools.Invoke(ctx, in)
	}
}
