// Package metrics records the tool plane's metrics (agent_access_resolutions,
// agent_access_denied, agent_tools_resolved and agent_resolution_time) and
// the turns' (per step and per turn: latency, tool calls, errors, token
// usage; steps per turn) — as CloudWatch embedded metric format (EMF)
// lines on stdout in Lambda, where CloudWatch Logs turns them into metrics
// with no API call, and as log lines locally.
//
// It must never record a secret, and never make an unbounded value (an
// instance key, a user or subject id, a trace id) a dimension: each
// distinct dimension value is a metric CloudWatch bills.
package metrics

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Namespace of the CloudWatch metrics.
const Namespace = "agentauth"

// Resolution is one access resolution (a manifest asked for, by the
// discovery route or an invocation).
type Resolution struct {
	// Denied: the caller's claims matched no policy (no group, no tool).
	Denied bool
	// Tools in the caller's manifest.
	Tools int
	// Duration of the resolution.
	Duration time.Duration
	// Cached: answered from the access cache.
	Cached bool
	// Route that asked ("tools", "invoke").
	Route string
}

// Recorder records metrics. Implementations are safe for concurrent use
// and never fail the request.
type Recorder interface {
	Resolution(ctx context.Context, r Resolution)
}

// Nop records nothing.
type Nop struct{}

// Resolution does nothing.
func (Nop) Resolution(context.Context, Resolution) {}

// Log writes one log line per resolution.
type Log struct{ Logger *slog.Logger }

// Resolution logs the four metrics as attributes.
func (l Log) Resolution(ctx context.Context, r Resolution) {
	l.Logger.InfoContext(ctx, "metrics", "agent_access_resolutions", 1, "agent_access_denied", b2i(r.Denied),
		"agent_tools_resolved", r.Tools, "agent_resolution_time", ms(r.Duration), "cached", r.Cached, "route", r.Route)
}

// EMF writes CloudWatch embedded metric format lines, one JSON object per
// line, each in a single Write.
type EMF struct {
	W        io.Writer
	Function string // the "function" dimension
	Now      func() time.Time

	mu sync.Mutex
}

// Resolution writes one EMF document.
func (e *EMF) Resolution(_ context.Context, r Resolution) {
	e.write([][]string{{"function"}}, []metric{
		{"agent_access_resolutions", "Count", 1},
		{"agent_access_denied", "Count", b2i(r.Denied)},
		{"agent_tools_resolved", "Count", r.Tools},
		{"agent_resolution_time", "Milliseconds", ms(r.Duration)},
	}, map[string]any{"cached": r.Cached, "route": r.Route})
}

// metric is one value of an EMF document.
type metric struct {
	name, unit string
	value      any
}

// write writes one EMF document: the metrics under the dimension sets
// dims, each metric's value and each of props (the dimensions' values
// among them) a top-level member, as EMF requires; the "function" member
// names the process.
func (e *EMF) write(dims [][]string, metrics []metric, props map[string]any) {
	now := time.Now
	if e.Now != nil {
		now = e.Now
	}
	doc := make(map[string]any, len(metrics)+len(props)+2)
	doc["function"] = e.Function
	for k, v := range props {
		doc[k] = v
	}
	defs := make([]map[string]string, len(metrics))
	for i, m := range metrics {
		defs[i] = map[string]string{"Name": m.name, "Unit": m.unit}
		doc[m.name] = m.value
	}
	doc["_aws"] = map[string]any{
		"Timestamp": now().UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  Namespace,
			"Dimensions": dims,
			"Metrics":    defs,
		}},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return
	}
	b = append(b, '\n')
	e.mu.Lock()
	_, _ = e.W.Write(b)
	e.mu.Unlock()
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
