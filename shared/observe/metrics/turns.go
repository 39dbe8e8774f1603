package metrics

import (
	"context"
	"log/slog"
	"time"
)

// TokenUsage is a model's token count.
type TokenUsage struct {
	PromptTokens, CompletionTokens, TotalTokens int64
}

// Turn is an ended turn's figures.
type Turn struct {
	// Swarm and Agent are the dimensions (bundle names: a bounded set).
	Swarm, Agent string
	// TurnID and TraceID find the turn's lines; never dimensions.
	TurnID, TraceID string
	// Status is completed, failed or interrupted.
	Status string
	// Latency is from the turn's start to its end, waits for consent
	// included.
	Latency                  time.Duration
	Steps, ToolCalls, Errors int
	Usage                    TokenUsage
}

// Step is a completed step's figures.
type Step struct {
	Swarm, Agent    string
	TurnID, TraceID string
	Step            int
	// Latency is from step.pre to the step's end (its tool calls run); a
	// step whose start is unknown has none (HasLatency false).
	Latency           time.Duration
	HasLatency        bool
	ToolCalls, Errors int
	Usage             TokenUsage
}

// TurnRecorder records the turns' metrics. Implementations are safe for
// concurrent use and never fail a turn.
type TurnRecorder interface {
	Turn(ctx context.Context, t Turn)
	Step(ctx context.Context, s Step)
}

var (
	_ TurnRecorder = Nop{}
	_ TurnRecorder = Log{}
	_ TurnRecorder = (*EMF)(nil)
)

// Turn does nothing.
func (Nop) Turn(context.Context, Turn) {}

// Step does nothing.
func (Nop) Step(context.Context, Step) {}

// Turn logs the turn's figures under the names of the runtime spec
// (latencyMs, stepCount, toolCallCount, errorCount, tokenUsage).
func (l Log) Turn(ctx context.Context, t Turn) {
	l.Logger.InfoContext(ctx, "turn metrics", "swarm", t.Swarm, "agent", t.Agent, "turnId", t.TurnID, "traceId", t.TraceID,
		"status", t.Status, "latencyMs", ms(t.Latency), "stepCount", t.Steps, "toolCallCount", t.ToolCalls, "errorCount", t.Errors,
		usageAttr(t.Usage))
}

// Step logs the step's figures.
func (l Log) Step(ctx context.Context, s Step) {
	attrs := []any{"swarm", s.Swarm, "agent", s.Agent, "turnId", s.TurnID, "traceId", s.TraceID, "step", s.Step}
	if s.HasLatency {
		attrs = append(attrs, "latencyMs", ms(s.Latency))
	}
	l.Logger.InfoContext(ctx, "step metrics", append(attrs, "toolCallCount", s.ToolCalls, "errorCount", s.Errors, usageAttr(s.Usage))...)
}

func usageAttr(u TokenUsage) slog.Attr {
	return slog.Group("tokenUsage", "promptTokens", u.PromptTokens, "completionTokens", u.CompletionTokens, "totalTokens", u.TotalTokens)
}

// turnDimensions: every turn and step metric is per (swarm, agent).
var turnDimensions = [][]string{{"swarm", "agent"}}

// Turn writes one EMF document of the turn metrics.
func (e *EMF) Turn(_ context.Context, t Turn) {
	e.write(turnDimensions, []metric{
		{"turn_latency", "Milliseconds", ms(t.Latency)},
		{"turn_steps", "Count", t.Steps},
		{"turn_tool_calls", "Count", t.ToolCalls},
		{"turn_errors", "Count", t.Errors},
		{"turn_prompt_tokens", "Count", t.Usage.PromptTokens},
		{"turn_completion_tokens", "Count", t.Usage.CompletionTokens},
		{"turn_total_tokens", "Count", t.Usage.TotalTokens},
	}, map[string]any{"swarm": t.Swarm, "agent": t.Agent, "turnId": t.TurnID, "traceId": t.TraceID, "status": t.Status})
}

// Step writes one EMF document of the step metrics.
func (e *EMF) Step(_ context.Context, s Step) {
	list := []metric{
		{"step_tool_calls", "Count", s.ToolCalls},
		{"step_errors", "Count", s.Errors},
		{"step_prompt_tokens", "Count", s.Usage.PromptTokens},
		{"step_completion_tokens", "Count", s.Usage.CompletionTokens},
		{"step_total_tokens", "Count", s.Usage.TotalTokens},
	}
	if s.HasLatency {
		list = append(list, metric{"step_latency", "Milliseconds", ms(s.Latency)})
	}
	e.write(turnDimensions, list, map[string]any{"swarm": s.Swarm, "agent": s.Agent, "turnId": s.TurnID, "traceId": s.TraceID, "step": s.Step})
}
