package app

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/agentauth/agentauth/shared/observe/metrics"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
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

// CountTurns records the end of every turn the engine runs in stats (the
// console's turns per hour), after the notifiers it has: Build does it
// with the backends' TurnStats. A nil stats changes nothing.
func (t *Turns) CountTurns(stats turn.TurnStats, log *slog.Logger) {
	if stats == nil {
		return
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t.Notify = chainNotify(t.Notify, turnStats(stats, t.Store, log))
}

// turnStats records a turn's end when the commit that ends it is
// committed (turn.completed, turn.failed, turn.interrupted; with
// turn.stepLimitReached the turn is completed by status and counted as
// failed: it is given the step limit's Failure), with the time it was
// parked on consent, read from the store's events of the turn: the park
// and the resume may have been committed by other processes. What is
// recorded is idempotent per turn, so a commit told twice counts once. A
// failure is logged and never fails the turn; an events read that fails
// records the turn with the parked time of the events at hand.
func turnStats(stats turn.TurnStats, store turn.Store, log *slog.Logger) notifier {
	return func(ctx context.Context, t turn.Turn, events []turn.TurnEvent) {
		ended, limit := false, false
		for _, ev := range events {
			switch ev.Type {
			case turn.EvTurnCompleted, turn.EvTurnFailed, turn.EvTurnInterrupted:
				ended = true
			case turn.EvStepLimitReached:
				ended, limit = true, true
			}
		}
		if !ended {
			return
		}
		if limit && t.Error == nil {
			t.Error = &turn.Failure{Code: engine.CodeStepLimitReached, Message: "the turn reached the step limit"}
		}
		all := events
		if _, stored, err := store.TurnEvents(ctx, t.Instance, t.ID, -1); err != nil {
			log.WarnContext(ctx, "turn stats: could not read the turn's events; its parked time is the last commit's",
				"turnId", t.ID, "traceId", t.TraceID, "error", err.Error())
		} else {
			all = stored
		}
		if err := stats.RecordTurnEnd(ctx, t, parkedTime(all).Seconds()); err != nil {
			log.WarnContext(ctx, "turn stats: the turn's end was not recorded", "turnId", t.ID, "traceId", t.TraceID, "error", err.Error())
		}
	}
}

// parkedTime is how long a turn waited for consent, from its events in
// Seq order: each turn.parked to the turn.resumed after it, and a park
// still open when the turn ended (interrupted or failed while parked) to
// the end. A second turn.parked while parked (two calls parked in one
// step) starts no new wait.
func parkedTime(events []turn.TurnEvent) time.Duration {
	var total time.Duration
	var since time.Time
	for _, ev := range events {
		switch ev.Type {
		case turn.EvTurnParked:
			if since.IsZero() {
				since = ev.At
			}
		case turn.EvTurnResumed, turn.EvTurnCompleted, turn.EvTurnFailed, turn.EvTurnInterrupted:
			if !since.IsZero() {
				if d := ev.At.Sub(since); d > 0 {
					total += d
				}
				since = time.Time{}
			}
		}
	}
	return total
}
