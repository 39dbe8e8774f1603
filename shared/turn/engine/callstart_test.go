package engine

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/local/turnfile"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// killedAtOutcome loses the worker at the commit of tool's result, as
// when the process dies after the tool ran.
type killedAtOutcome struct {
	turn.Store
	tool   string
	killed bool
}

func (k *killedAtOutcome) Commit(ctx context.Context, c turn.Commit) error {
	for _, cl := range c.Calls {
		if cl.Tool == k.tool && cl.State.Done() {
			k.killed = true
		}
	}
	if k.killed {
		return errKilled
	}
	return k.Store.Commit(ctx, c)
}

// TestCallLatencyFromItsFirstStart: a call whose worker died after it ran
// keeps the StartedAt committed with its first start; the next worker's
// result — the idempotent tool run again, or E_TOOL_OUTCOME_UNKNOWN for
// one that is not — measures latencyMs from there. A call refused before
// it started has no latencyMs.
func TestCallLatencyFromItsFirstStart(t *testing.T) {
	for _, tc := range []struct {
		tool, event string
		starts      int
		latencyMs   float64
		code        string
	}{
		// 100 ms run, the worker dies, 10 s until redelivery, 100 ms again.
		{tool: "lookup", event: turn.EvToolCompleted, starts: 2, latencyMs: 10200},
		// Not run again: its outcome is unknown at redelivery.
		{tool: "echo", event: turn.EvToolFailed, starts: 1, latencyMs: 10100, code: CodeOutcomeUnknown},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			store, err := turnfile.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			c := &clock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
			m := &scriptModel{script: []func(model.Request) model.Response{callTools(tc.tool), say("done")}}
			tools := &fakeTools{}
			hooks := Hooks{ToolExecMiddleware: []func(ToolCall) ToolCall{func(next ToolCall) ToolCall {
				return func(ctx context.Context, in Invocation) Outcome {
					c.advance(100 * time.Millisecond)
					return next(ctx, in)
				}
			}}}
			cfg := fixedConfig{Agent{Model: m, MaxSteps: 8, MaxToolCallsPerStep: 1}}
			f := &fixture{key: turn.InstanceKey{Swarm: "default", Key: "thread-1", Agent: "assistant"}, store: store}
			ev := f.event("ev-1", `{"type":"user.input","text":"go"}`)

			first := &Engine{Store: &killedAtOutcome{Store: store, tool: tc.tool}, Config: cfg, Tools: tools, Hooks: hooks, Now: c.now}
			if err := first.Handle(context.Background(), ev); !errors.Is(err, errKilled) {
				t.Fatalf("first worker: %v", err)
			}
			st := f.state(t)
			var began time.Time
			for _, cl := range st.Calls {
				began = cl.StartedAt
			}
			if want := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC); !began.Equal(want) {
				t.Fatalf("StartedAt %v, want %v", began, want)
			}

			c.advance(10 * time.Second)
			second := &Engine{Store: store, Config: cfg, Tools: tools, Hooks: hooks, Now: c.now}
			if err := second.Handle(context.Background(), ev); err != nil {
				t.Fatalf("second worker: %v", err)
			}
			st = f.state(t)
			tr := lastTurn(st)
			if tr.Status != turn.TurnCompleted {
				t.Fatalf("turn %s", tr.Status)
			}
			for _, cl := range st.Calls {
				if !cl.StartedAt.Equal(began) || cl.Starts != tc.starts {
					t.Fatalf("call started at %v (%d starts), want %v (%d)", cl.StartedAt, cl.Starts, began, tc.starts)
				}
			}
			var got map[string]any
			for _, e := range st.TurnEvents[tr.ID] {
				if e.Type == tc.event {
					_ = json.Unmarshal(e.Data, &got)
				}
			}
			if got["latencyMs"] != tc.latencyMs || (tc.code != "" && got["code"] != tc.code) {
				t.Fatalf("%s %v, want latencyMs %v", tc.event, got, tc.latencyMs)
			}
		})
	}

	t.Run("refused before it started", func(t *testing.T) {
		f := newFixture(t, callTools("echo", "lookup"), say("done"))
		f.e.Config = fixedConfig{Agent{Model: f.model, MaxSteps: 8, MaxToolCallsPerStep: 1}}
		f.send(t, "ev-1", "go")
		st := f.state(t)
		tr := lastTurn(st)
		var failed, completed map[string]any
		for _, e := range st.TurnEvents[tr.ID] {
			switch e.Type {
			case turn.EvToolFailed:
				_ = json.Unmarshal(e.Data, &failed)
			case turn.EvToolCompleted:
				_ = json.Unmarshal(e.Data, &completed)
			}
		}
		if _, ok := failed["latencyMs"]; ok || failed["code"] != CodeTooManyCalls {
			t.Fatalf("tool.failed of a call that never ran: %v", failed)
		}
		if _, ok := completed["latencyMs"]; !ok {
			t.Fatalf("tool.completed without latencyMs: %v", completed)
		}
	})
}
