package app

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/turnfile"
	"github.com/agentauth/agentauth/shared/observe/metrics"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// fakeClock moves only when the fake model and tools say they took time.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// figuresModel takes a second per answer: tool calls of its script's first
// answer, then "done"; fail makes every call fail.
type figuresModel struct {
	clock *fakeClock
	calls []string
	fail  bool
	n     int
}

func (m *figuresModel) Call(_ context.Context, req model.Request) (model.Response, error) {
	m.clock.advance(time.Second)
	m.n++
	if m.fail {
		return model.Response{}, &model.Error{Status: 400, Message: "refused"}
	}
	usage := model.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	if m.n > 1 {
		return model.Response{Message: message.Message{Role: message.Assistant, Content: []message.Part{{Type: message.Text, Text: "done"}}},
			Finish: model.FinishStop, Usage: usage}, nil
	}
	var parts []message.Part
	for i, name := range m.calls {
		parts = append(parts, message.Part{Type: message.ToolUse, CallID: fmt.Sprintf("c%d", i), Name: name, Input: json.RawMessage(`{}`)})
	}
	return model.Response{Message: message.Message{Role: message.Assistant, Content: parts}, Finish: model.FinishToolUse, Usage: usage}, nil
}

// figuresTools take half a second per call: echo answers, broken fails,
// whoami parks until granted.
type figuresTools struct {
	clock   *fakeClock
	granted bool
}

func (f *figuresTools) Catalog(context.Context, turn.Turn) ([]engine.Tool, error) {
	var out []engine.Tool
	for _, n := range []string{"echo", "broken", "whoami"} {
		out = append(out, engine.Tool{Spec: model.ToolSpec{Name: n, InputSchema: json.RawMessage(`{"type":"object"}`)}})
	}
	return out, nil
}

func (f *figuresTools) Invoke(_ context.Context, in engine.Invocation) engine.Outcome {
	f.clock.advance(500 * time.Millisecond)
	switch {
	case in.Call.Tool == "broken":
		return engine.Outcome{Kind: engine.OutcomeError, Result: json.RawMessage(`{"status":"error","error":{"code":"E","message":"m","name":"N"}}`)}
	case in.Call.Tool == "whoami" && !f.granted:
		return engine.Outcome{Kind: engine.OutcomeAuthorizationRequired, AuthSession: "as-1", AuthorizationURL: "https://idp.example/auth"}
	}
	return engine.Outcome{Kind: engine.OutcomeOK, Result: json.RawMessage(`{"status":"ok","output":{}}`)}
}

type oneAgent struct{ a engine.Agent }

func (c oneAgent) Agent(context.Context, turn.InstanceKey) (engine.Agent, string, error) {
	return c.a, "rev-1", nil
}

// turnRecorder keeps what it is told.
type turnRecorder struct {
	mu    sync.Mutex
	turns []metrics.Turn
	steps []metrics.Step
}

func (r *turnRecorder) Turn(_ context.Context, t metrics.Turn) {
	r.mu.Lock()
	r.turns = append(r.turns, t)
	r.mu.Unlock()
}
func (r *turnRecorder) Step(_ context.Context, s metrics.Step) {
	r.mu.Lock()
	r.steps = append(r.steps, s)
	r.mu.Unlock()
}

// TestTurnMetrics: the engine's committed events give one record per
// completed step and one per ended turn, with the figures of the runtime
// spec — a parked step's latency includes the wait for the consent.
func TestTurnMetrics(t *testing.T) {
	usage := metrics.TokenUsage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	twice := metrics.TokenUsage{PromptTokens: 20, CompletionTokens: 10, TotalTokens: 30}
	base := func(step int) metrics.Step {
		return metrics.Step{Swarm: "s", Agent: "a", Step: step, HasLatency: true, Usage: usage}
	}
	withStep := func(s metrics.Step, f func(*metrics.Step)) metrics.Step { f(&s); return s }
	for _, tc := range []struct {
		name    string
		calls   []string
		fail    bool
		consent time.Duration // the user's time to consent (whoami parks)
		steps   []metrics.Step
		turn    metrics.Turn
	}{
		{name: "tool calls, one failing, then an answer", calls: []string{"echo", "broken"},
			steps: []metrics.Step{
				// model 1 s + two tools 0.5 s each
				withStep(base(1), func(s *metrics.Step) { s.Latency, s.ToolCalls, s.Errors = 2*time.Second, 2, 1 }),
				withStep(base(2), func(s *metrics.Step) { s.Latency = time.Second }),
			},
			turn: metrics.Turn{Swarm: "s", Agent: "a", Status: "completed", Latency: 3 * time.Second, Steps: 2, ToolCalls: 2, Errors: 1, Usage: twice}},
		{name: "an answer at once", calls: nil,
			steps: []metrics.Step{withStep(base(1), func(s *metrics.Step) { s.Latency = time.Second })},
			turn:  metrics.Turn{Swarm: "s", Agent: "a", Status: "completed", Latency: time.Second, Steps: 1, Usage: usage}},
		{name: "the model fails: a failed turn, no completed step", fail: true,
			turn: metrics.Turn{Swarm: "s", Agent: "a", Status: "failed", Latency: time.Second, Errors: 1}},
		{name: "a parked call: the step's latency includes the consent", calls: []string{"whoami"}, consent: time.Minute,
			steps: []metrics.Step{
				// model 1 s + park 0.5 s + consent + the resumed call 0.5 s
				withStep(base(1), func(s *metrics.Step) { s.Latency, s.ToolCalls = 2*time.Second+time.Minute, 1 }),
				withStep(base(2), func(s *metrics.Step) { s.Latency = time.Second }),
			},
			turn: metrics.Turn{Swarm: "s", Agent: "a", Status: "completed", Latency: 3*time.Second + time.Minute, Steps: 2, ToolCalls: 1, Usage: twice}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, err := turnfile.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			clock := &fakeClock{t: time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)}
			rec := &turnRecorder{}
			tools := &figuresTools{clock: clock}
			e := &engine.Engine{Store: store, Config: oneAgent{engine.Agent{Model: &figuresModel{clock: clock, calls: tc.calls, fail: tc.fail}}},
				Tools: tools, Now: clock.Now, Notify: chainNotify(turnMetrics(rec))}
			ev := domain.Event{ID: "ev-1", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "s"}, InstanceKey: "k", AgentName: "a",
				Input: `{"type":"user.input","text":"go"}`}
			if err := e.Handle(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			if tc.consent > 0 {
				clock.advance(tc.consent)
				tools.granted = true
				ev.ID, ev.Input, ev.Metadata = "as-1", `{"type":"auth.granted"}`, map[string]string{"authSessionId": "as-1"}
				if err := e.Handle(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
			}
			if len(rec.turns) != 1 {
				t.Fatalf("%d turn records, want 1: %+v", len(rec.turns), rec.turns)
			}
			got := rec.turns[0]
			if got.TurnID == "" || got.TraceID == "" {
				t.Errorf("turn record without turn or trace id: %+v", got)
			}
			for i := range rec.steps {
				if rec.steps[i].TurnID != got.TurnID || rec.steps[i].TraceID != got.TraceID {
					t.Errorf("step %d names turn %s trace %s", i, rec.steps[i].TurnID, rec.steps[i].TraceID)
				}
				rec.steps[i].TurnID, rec.steps[i].TraceID = "", ""
			}
			got.TurnID, got.TraceID = "", ""
			if got != tc.turn {
				t.Errorf("turn = %+v\nwant   %+v", got, tc.turn)
			}
			if !reflect.DeepEqual(rec.steps, tc.steps) {
				t.Errorf("steps = %+v\nwant    %+v", rec.steps, tc.steps)
			}
		})
	}
}

// TestChainNotify: every notifier is told every batch, in order; nil ones
// are skipped.
func TestChainNotify(t *testing.T) {
	var got []string
	n := func(name string) notifier {
		return func(_ context.Context, tr turn.Turn, evs []turn.TurnEvent) {
			got = append(got, fmt.Sprintf("%s:%s:%d", name, tr.ID, len(evs)))
		}
	}
	for _, tc := range []struct {
		name string
		ns   []notifier
		want string
	}{
		{"none", nil, ""},
		{"only nil", []notifier{nil}, ""},
		{"one", []notifier{nil, n("metrics")}, "metrics:t1:2"},
		{"two in order", []notifier{n("metrics"), nil, n("origin")}, "metrics:t1:2,origin:t1:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got = nil
			chained := chainNotify(tc.ns...)
			if (chained == nil) != (tc.want == "") {
				t.Fatalf("chained nil = %v", chained == nil)
			}
			if chained != nil {
				chained(context.Background(), turn.Turn{ID: "t1"}, make([]turn.TurnEvent, 2))
			}
			if s := strings.Join(got, ","); s != tc.want {
				t.Fatalf("told %q, want %q", s, tc.want)
			}
		})
	}
}
