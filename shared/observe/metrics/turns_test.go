package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

var (
	aTurn = Turn{Swarm: "support", Agent: "assistant", TurnID: "turn-1", TraceID: "trace-1", Status: "completed",
		Latency: 2500 * time.Microsecond, Steps: 2, ToolCalls: 1, Errors: 1, Usage: TokenUsage{PromptTokens: 20, CompletionTokens: 10, TotalTokens: 30}}
	aStep = Step{Swarm: "support", Agent: "assistant", TurnID: "turn-1", TraceID: "trace-1", Step: 1,
		Latency: 1500 * time.Microsecond, HasLatency: true, ToolCalls: 1, Errors: 1, Usage: TokenUsage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}
)

// TestTurnEMF: one document per turn and per step, dimensions swarm and
// agent only, every declared metric a top-level member with its value;
// the trace id is a property, never a dimension.
func TestTurnEMF(t *testing.T) {
	noLatency := aStep
	noLatency.HasLatency = false
	for _, tc := range []struct {
		name   string
		record func(e *EMF)
		want   map[string]float64
		absent []string
		props  map[string]any
	}{
		{"turn", func(e *EMF) { e.Turn(context.Background(), aTurn) },
			map[string]float64{"turn_latency": 2.5, "turn_steps": 2, "turn_tool_calls": 1, "turn_errors": 1,
				"turn_prompt_tokens": 20, "turn_completion_tokens": 10, "turn_total_tokens": 30}, nil,
			map[string]any{"status": "completed", "turnId": "turn-1", "traceId": "trace-1"}},
		{"step", func(e *EMF) { e.Step(context.Background(), aStep) },
			map[string]float64{"step_latency": 1.5, "step_tool_calls": 1, "step_errors": 1,
				"step_prompt_tokens": 10, "step_completion_tokens": 5, "step_total_tokens": 15}, nil,
			map[string]any{"step": float64(1), "traceId": "trace-1"}},
		{"a step whose start is unknown has no latency", func(e *EMF) { e.Step(context.Background(), noLatency) },
			map[string]float64{"step_tool_calls": 1, "step_errors": 1, "step_prompt_tokens": 10, "step_completion_tokens": 5, "step_total_tokens": 15},
			[]string{"step_latency"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.record(&EMF{W: &buf, Function: "turn", Now: func() time.Time { return time.UnixMilli(1_800_000_000_000) }})
			if strings.Count(buf.String(), "\n") != 1 {
				t.Fatalf("want one line: %q", buf.String())
			}
			var doc map[string]any
			if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			var env struct {
				AWS struct {
					CloudWatchMetrics []struct {
						Namespace  string
						Dimensions [][]string
						Metrics    []struct{ Name, Unit string }
					}
				} `json:"_aws"`
			}
			_ = json.Unmarshal(buf.Bytes(), &env)
			cw := env.AWS.CloudWatchMetrics
			if len(cw) != 1 || cw[0].Namespace != Namespace || len(cw[0].Dimensions) != 1 || strings.Join(cw[0].Dimensions[0], ",") != "swarm,agent" {
				t.Fatalf("envelope %+v", env)
			}
			if doc["swarm"] != "support" || doc["agent"] != "assistant" || doc["function"] != "turn" {
				t.Fatalf("dimension values: %v", doc)
			}
			if len(cw[0].Metrics) != len(tc.want) {
				t.Errorf("declares %d metrics, want %d: %+v", len(cw[0].Metrics), len(tc.want), cw[0].Metrics)
			}
			for _, m := range cw[0].Metrics {
				want, ok := tc.want[m.Name]
				if !ok || doc[m.Name] != want {
					t.Errorf("%s = %v, want %v", m.Name, doc[m.Name], want)
				}
				if unit := map[bool]string{true: "Milliseconds", false: "Count"}[strings.HasSuffix(m.Name, "_latency")]; m.Unit != unit {
					t.Errorf("%s unit %s, want %s", m.Name, m.Unit, unit)
				}
			}
			for _, k := range tc.absent {
				if _, ok := doc[k]; ok {
					t.Errorf("%s present: %v", k, doc)
				}
			}
			for k, v := range tc.props {
				if doc[k] != v {
					t.Errorf("property %s = %v, want %v", k, doc[k], v)
				}
			}
		})
	}
}

// TestTurnLogLines: locally a turn's and a step's figures are one log
// line each, under the runtime spec's names.
func TestTurnLogLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		record func(l Log)
		msg    string
		want   map[string]any
	}{
		{"turn", func(l Log) { l.Turn(context.Background(), aTurn) }, "turn metrics", map[string]any{
			"swarm": "support", "agent": "assistant", "traceId": "trace-1", "status": "completed", "latencyMs": 2.5,
			"stepCount": float64(2), "toolCallCount": float64(1), "errorCount": float64(1)}},
		{"step", func(l Log) { l.Step(context.Background(), aStep) }, "step metrics", map[string]any{
			"traceId": "trace-1", "step": float64(1), "latencyMs": 1.5, "toolCallCount": float64(1), "errorCount": float64(1)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.record(Log{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
			var rec map[string]any
			if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			if rec["msg"] != tc.msg {
				t.Errorf("msg = %v", rec["msg"])
			}
			for k, v := range tc.want {
				if rec[k] != v {
					t.Errorf("%s = %v, want %v", k, rec[k], v)
				}
			}
			usage, _ := rec["tokenUsage"].(map[string]any)
			if usage["promptTokens"] == nil || usage["completionTokens"] == nil || usage["totalTokens"] == nil {
				t.Errorf("tokenUsage = %v", rec["tokenUsage"])
			}
		})
	}
}
