package app

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentauth/agentauth/shared/observe/metrics"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// notifier watches the engine's committed turn events (engine.Notify).
type notifier = func(ctx context.Context, t turn.Turn, events []turn.TurnEvent)

// chainNotify tells each notifier, in order, every committed batch: the
// engine has one Notify, and the turn metrics, origin delivery and live
// streams all watch it. Nil notifiers are skipped; with none it is nil.
func chainNotify(ns ...notifier) notifier {
	var live []notifier
	for _, n := range ns {
		if n != nil {
			live = append(live, n)
		}
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return func(ctx context.Context, t turn.Turn, events []turn.TurnEvent) {
		for _, n := range live {
			n(ctx, t, events)
		}
	}
}

// turnMetrics records a step's figures when its step.completed is
// committed and a turn's when it ends (turn.completed — also an
// interrupted turn's — or turn.failed): what the engine committed, so a
// turn resumed in another process still counts once.
func turnMetrics(rec metrics.TurnRecorder) notifier {
	return func(ctx context.Context, t turn.Turn, events []turn.TurnEvent) {
		for _, ev := range events {
			switch ev.Type {
			case turn.EvStepCompleted:
				rec.Step(ctx, stepFigures(t, ev))
			case turn.EvTurnCompleted, turn.EvTurnFailed:
				f := metrics.Turn{Swarm: t.Instance.Swarm, Agent: t.Instance.Agent, TurnID: t.ID, TraceID: t.TraceID, Status: string(t.Status),
					Steps: t.Steps, ToolCalls: t.ToolCalls, Errors: t.Errors, Usage: usage(t.Usage)}
				if t.EndedAt != nil {
					f.Latency = t.EndedAt.Sub(t.StartedAt)
				}
				rec.Turn(ctx, f)
			}
		}
	}
}

// stepFigures reads a step.completed event's data (the engine's
// stepFigures).
func stepFigures(t turn.Turn, ev turn.TurnEvent) metrics.Step {
	var d struct {
		Step      int          `json:"step"`
		ToolCalls int          `json:"toolCalls"`
		Errors    int          `json:"errors"`
		Usage     model.Usage  `json:"usage"`
		LatencyMs *json.Number `json:"latencyMs"`
	}
	_ = json.Unmarshal(ev.Data, &d) // a field it lacks stays zero
	s := metrics.Step{Swarm: t.Instance.Swarm, Agent: t.Instance.Agent, TurnID: t.ID, TraceID: t.TraceID, Step: d.Step,
		ToolCalls: d.ToolCalls, Errors: d.Errors, Usage: usage(d.Usage)}
	if d.LatencyMs != nil {
		if ms, err := d.LatencyMs.Float64(); err == nil {
			s.Latency, s.HasLatency = time.Duration(ms*float64(time.Millisecond)), true
		}
	}
	return s
}

func usage(u model.Usage) metrics.TokenUsage {
	return metrics.TokenUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
}
