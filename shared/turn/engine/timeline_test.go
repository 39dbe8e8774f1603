package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/turntest"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// clock is the engine's clock in these tests: it moves only when the
// model or a tool takes time, so every latency is exact.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// timed makes every model call take modelTook and every tool run take
// toolTook on the plane's engine clock.
func timed(p *turntest.Plane, modelTook, toolTook time.Duration) *clock {
	c := &clock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
	p.Engine.Now = c.Now
	p.Engine.Hooks.LLMCallMiddleware = append(p.Engine.Hooks.LLMCallMiddleware, func(next engine.LLMCall) engine.LLMCall {
		return func(ctx context.Context, req model.Request) (model.Response, error) {
			c.advance(modelTook)
			return next(ctx, req)
		}
	})
	p.Engine.Hooks.ToolExecMiddleware = append(p.Engine.Hooks.ToolExecMiddleware, func(next engine.ToolCall) engine.ToolCall {
		return func(ctx context.Context, in engine.Invocation) engine.Outcome {
			c.advance(toolTook)
			return next(ctx, in)
		}
	})
	return c
}

var timelineKey = turn.InstanceKey{Swarm: "support", Key: "thread-1", Agent: "assistant"}

func post(t *testing.T, p *turntest.Plane, text string) {
	t.Helper()
	_, err := p.Turns.Post(context.Background(), timelineKey.Swarm, timelineKey.Key, turn.Incoming{Type: engine.EventUserInput, Text: text,
		Auth: domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Deliver(t)
}

// timeline is the only turn's events, each data decoded.
type event struct {
	Type string
	Data map[string]any
	Raw  string
}

func timeline(t *testing.T, p *turntest.Plane) []event {
	t.Helper()
	st, err := p.Engine.Store.Load(context.Background(), timelineKey)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Turns) != 1 {
		t.Fatalf("%d turns, want 1", len(st.Turns))
	}
	var out []event
	for id := range st.Turns {
		_, evs, err := p.Engine.Store.TurnEvents(context.Background(), timelineKey, id, -1)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			ev := event{Type: e.Type, Raw: string(e.Data)}
			if err := json.Unmarshal(e.Data, &ev.Data); err != nil {
				t.Fatalf("%s: %v", e.Type, err)
			}
			out = append(out, ev)
		}
	}
	return out
}

func ofType(evs []event, typ string) []event {
	var out []event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// TestTimelineFields: the events carry what a turn timeline shows — per
// model call its Model, provider model id, finish reason, latency and
// usage; per tool call its argsHash (the tool audit's) and its latency —
// and never an argument's value.
func TestTimelineFields(t *testing.T) {
	const canary = "canary-value-4711"
	args := `{"q":"` + canary + `","n":2}`
	p := turntest.New(t, turntest.Call("echo", args), turntest.Say("done"))
	timed(p, 1500*time.Millisecond, 250*time.Millisecond)
	post(t, p, "echo it")
	evs := timeline(t, p)

	steps := ofType(evs, turn.EvStepStarted)
	if len(steps) != 2 {
		t.Fatalf("%d step.started, want 2", len(steps))
	}
	for i, want := range []model.FinishReason{model.FinishToolUse, model.FinishStop} {
		d := steps[i].Data
		if d["model"] != "fake" || d["modelId"] != "fake" || d["finishReason"] != string(want) || d["modelLatencyMs"] != 1500.0 ||
			d["step"] != float64(i+1) || d["bundleRevision"] != "rev-1" || d["startedAt"] == nil || d["usage"] == nil {
			t.Errorf("step %d: step.started %s", i+1, steps[i].Raw)
		}
	}

	called := ofType(evs, turn.EvToolCalled)
	wantHash, err := toolhooks.ArgsHash(json.RawMessage(args), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(called) != 1 || called[0].Data["argsHash"] != wantHash || called[0].Data["tool"] != "echo" || called[0].Data["callId"] == "" {
		t.Fatalf("tool.called %+v, want argsHash %s", called, wantHash)
	}
	// The hash depends on the value only, as the audit's does.
	if again, _ := toolhooks.ArgsHash(json.RawMessage(`{ "n": 2.0, "q": "`+canary+`" }`), nil); again != wantHash {
		t.Fatalf("argsHash of the same value respelled: %s", again)
	}
	done := ofType(evs, turn.EvToolCompleted)
	if len(done) != 1 || done[0].Data["latencyMs"] != 250.0 || done[0].Data["callId"] != called[0].Data["callId"] {
		t.Fatalf("tool.completed %+v", done)
	}
	for _, e := range evs {
		if strings.Contains(e.Raw, canary) {
			t.Errorf("%s carries an argument's value: %s", e.Type, e.Raw)
		}
	}
}

// TestTimelineParkedCallLatency: a call parked on consent measures from
// its first start to its result, the wait for the user included (the
// timeline shows that wait apart, between turn.parked and turn.resumed);
// the failed call of a turn gets its latency and code too.
func TestTimelineParkedCallLatency(t *testing.T) {
	p := turntest.New(t, turntest.Call("whoami", `{}`), turntest.Say("you are alice"))
	c := timed(p, 2*time.Second, 100*time.Millisecond)
	post(t, p, "who am i")
	if got := ofType(timeline(t, p), turn.EvTurnParked); len(got) != 1 {
		t.Fatalf("not parked: %d turn.parked", len(got))
	}
	c.advance(30 * time.Second)
	p.Tools.Grant()
	ev := domain.Event{ID: "as-1", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: timelineKey.Swarm}, InstanceKey: timelineKey.Key,
		AgentName: timelineKey.Agent, Input: `{"type":"auth.granted"}`, Metadata: map[string]string{"authSessionId": "as-1"}}
	if err := p.Engine.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	p.Deliver(t)
	evs := timeline(t, p)
	done := ofType(evs, turn.EvToolCompleted)
	// 100 ms to park, 30 s for the user, 100 ms to run.
	if len(done) != 1 || done[0].Data["latencyMs"] != 30200.0 {
		t.Fatalf("tool.completed %+v", done)
	}
	if called := ofType(evs, turn.EvToolCalled); len(called) != 1 || called[0].Data["argsHash"] != "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Fatalf("tool.called %+v (the hash of {})", called)
	}
	if steps := ofType(evs, turn.EvStepStarted); len(steps) != 2 || steps[1].Data["finishReason"] != "stop" || steps[1].Data["modelLatencyMs"] != 2000.0 {
		t.Fatalf("step.started %+v", steps)
	}
}
