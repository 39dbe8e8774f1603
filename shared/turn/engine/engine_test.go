package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/turnfile"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// scriptModel answers each call with the next entry of its script (a
// scripted model: no language model is involved).
type scriptModel struct {
	mu     sync.Mutex
	script []func(req model.Request) model.Response
	calls  []model.Request
}

func (m *scriptModel) Call(_ context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, req)
	if len(m.calls) > len(m.script) {
		return model.Response{}, &model.Error{Status: 500, Message: "script exhausted"}
	}
	return m.script[len(m.calls)-1](req), nil
}

func (m *scriptModel) count() int { m.mu.Lock(); defer m.mu.Unlock(); return len(m.calls) }

func say(text string) func(model.Request) model.Response {
	return func(model.Request) model.Response {
		return model.Response{Message: message.Message{Role: message.Assistant, Content: []message.Part{{Type: message.Text, Text: text}}},
			Finish: model.FinishStop, Usage: model.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}
	}
}

func callTools(calls ...string) func(model.Request) model.Response {
	return func(model.Request) model.Response {
		var parts []message.Part
		for i, name := range calls {
			parts = append(parts, message.Part{Type: message.ToolUse, CallID: fmt.Sprintf("call-%d-%s", i, name), Name: name, Input: json.RawMessage(`{}`)})
		}
		return model.Response{Message: message.Message{Role: message.Assistant, Content: parts}, Finish: model.FinishToolUse,
			Usage: model.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}
	}
}

// fakeTools: echo answers; whoami needs a consent until granted; flaky is
// idempotent.
type fakeTools struct {
	mu      sync.Mutex
	granted bool
	runs    map[string]int
	parks   int
}

func (f *fakeTools) Catalog(context.Context, turn.Turn) ([]Tool, error) {
	return []Tool{
		{Spec: model.ToolSpec{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		{Spec: model.ToolSpec{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		{Spec: model.ToolSpec{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`)}, Idempotent: true},
	}, nil
}

func (f *fakeTools) Invoke(_ context.Context, in Invocation) Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs == nil {
		f.runs = map[string]int{}
	}
	if in.Call.Tool == "whoami" && !f.granted {
		f.parks++
		if in.Resume.TurnID != in.Turn.ID || in.Resume.CallID != in.Call.ID {
			panic("the resume target does not name the call")
		}
		return Outcome{Kind: OutcomeAuthorizationRequired, AuthSession: "as-1", AuthorizationURL: "https://idp.example/auth?client_id=x"}
	}
	f.runs[in.Call.Tool]++
	return Outcome{Kind: OutcomeOK, Result: json.RawMessage(`{"status":"ok","output":{"tool":"` + in.Call.Tool + `"}}`)}
}

func (f *fakeTools) ran(tool string) int { f.mu.Lock(); defer f.mu.Unlock(); return f.runs[tool] }

type fixedConfig struct{ agent Agent }

func (c fixedConfig) Agent(context.Context, turn.InstanceKey) (Agent, string, error) {
	return c.agent, "rev-1", nil
}

type memQueue struct {
	mu  sync.Mutex
	evs []domain.Event
}

func (q *memQueue) Enqueue(_ context.Context, e domain.Event) error {
	q.mu.Lock()
	q.evs = append(q.evs, e)
	q.mu.Unlock()
	return nil
}

type fixture struct {
	e     *Engine
	store turn.Store
	model *scriptModel
	tools *fakeTools
	key   turn.InstanceKey
	dir   string
}

func newFixture(t *testing.T, script ...func(model.Request) model.Response) *fixture {
	t.Helper()
	dir := t.TempDir()
	store, err := turnfile.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &scriptModel{script: script}
	f := &fixture{store: store, model: m, tools: &fakeTools{}, dir: dir, key: turn.InstanceKey{Swarm: "default", Key: "thread-1", Agent: "assistant"}}
	f.e = &Engine{Store: store, Config: fixedConfig{Agent{Model: m, SystemPrompt: "be brief", MaxSteps: 8}}, Tools: f.tools, Queue: &memQueue{}}
	return f
}

func (f *fixture) event(id, input string) domain.Event {
	return domain.Event{ID: id, SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: f.key.Swarm}, InstanceKey: f.key.Key, AgentName: f.key.Agent,
		Input: input, Auth: domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "alice"}}}
}

func (f *fixture) send(t *testing.T, id, text string) {
	t.Helper()
	if err := f.e.Handle(context.Background(), f.event(id, `{"type":"user.input","text":"`+text+`"}`)); err != nil {
		t.Fatalf("Handle %s: %v", id, err)
	}
}

func (f *fixture) granted(t *testing.T, id string) {
	t.Helper()
	ev := f.event(id, `{"type":"auth.granted","grantId":"grant-1"}`)
	ev.Metadata = map[string]string{"eventType": "auth.granted", "authSessionId": "as-1"}
	if err := f.e.Handle(context.Background(), ev); err != nil {
		t.Fatalf("Handle %s: %v", id, err)
	}
}

// drain delivers what the engine queued (wake-ups, hand-overs), as a
// worker would.
func (f *fixture) drain(t *testing.T) {
	t.Helper()
	q := f.e.Queue.(*memQueue)
	for {
		q.mu.Lock()
		if len(q.evs) == 0 {
			q.mu.Unlock()
			return
		}
		ev := q.evs[0]
		q.evs = q.evs[1:]
		q.mu.Unlock()
		if err := f.e.Handle(context.Background(), ev); err != nil {
			t.Fatalf("Handle %s: %v", ev.ID, err)
		}
	}
}

func (f *fixture) state(t *testing.T) turn.State {
	t.Helper()
	st, err := f.store.Load(context.Background(), f.key)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// history renders the folded conversation as role:kind items.
func history(st turn.State) string {
	msgs, _ := message.Fold(st.Base, st.Events)
	var out []string
	for _, m := range msgs {
		for _, p := range m.Content {
			switch p.Type {
			case message.Text:
				out = append(out, string(m.Role)+":"+p.Text)
			case message.ToolUse:
				out = append(out, string(m.Role)+":use:"+p.Name)
			case message.ToolResult:
				out = append(out, string(m.Role)+":result:"+p.CallID)
			}
		}
	}
	return strings.Join(out, " | ")
}

func eventTypes(st turn.State, turnID string) string {
	var out []string
	for _, e := range st.TurnEvents[turnID] {
		out = append(out, e.Type)
	}
	return strings.Join(out, ",")
}

func lastTurn(st turn.State) turn.Turn {
	var last turn.Turn
	for _, t := range st.Turns {
		if t.StartedAt.After(last.StartedAt) || last.ID == "" || t.StartedAt.Equal(last.StartedAt) && t.ID > last.ID {
			last = t
		}
	}
	return last
}

func TestTextTurn(t *testing.T) {
	f := newFixture(t, say("hello alice"))
	f.send(t, "ev-1", "hi")
	st := f.state(t)
	tr := lastTurn(st)
	if tr.Status != turn.TurnCompleted || st.Instance.ActiveTurn != "" || tr.Final != "hello alice" || tr.Steps != 1 || tr.Usage.TotalTokens != 15 {
		t.Fatalf("turn %+v", tr)
	}
	if h := history(st); h != "user:hi | assistant:hello alice" {
		t.Fatalf("history %s", h)
	}
	if ev := eventTypes(st, tr.ID); ev != "turn.started,step.started,step.completed,turn.completed" {
		t.Fatalf("events %s", ev)
	}
	// The model saw the system prompt first, then the user's message.
	req := f.model.calls[0]
	if req.Messages[0].Role != message.System || req.Messages[0].TextOf() != "be brief" || req.Messages[1].TextOf() != "hi" || len(req.Tools) != 3 {
		t.Fatalf("model request %+v", req.Messages)
	}
	if len(st.Events) != 0 || len(st.Base) != 2 {
		t.Fatalf("the turn end did not fold the conversation into the base: %d events, %d base", len(st.Events), len(st.Base))
	}
}

func TestToolTurn(t *testing.T) {
	f := newFixture(t, callTools("echo"), say("done"))
	f.send(t, "ev-1", "echo please")
	st := f.state(t)
	tr := lastTurn(st)
	if tr.Status != turn.TurnCompleted || tr.Steps != 2 || tr.ToolCalls != 1 || f.tools.ran("echo") != 1 {
		t.Fatalf("turn %+v, echo ran %d", tr, f.tools.ran("echo"))
	}
	if h := history(st); h != "user:echo please | assistant:use:echo | tool:result:call-0-echo | assistant:done" {
		t.Fatalf("history %s", h)
	}
	// The second model call saw the tool's result.
	if pairs := message.CheckToolPairs(f.model.calls[1].Messages); len(pairs) != 0 {
		t.Fatalf("second call's history: %+v", pairs)
	}
}

// TestParkAndResume: a tool that needs the user's consent parks (its
// sibling still runs), the link is out at once, and auth.granted resumes
// exactly that call, once — however often it is delivered.
func TestParkAndResume(t *testing.T) {
	f := newFixture(t, callTools("whoami", "echo"), say("you are alice"))
	f.send(t, "ev-1", "who am I?")
	st := f.state(t)
	tr := lastTurn(st)
	if tr.Status != turn.TurnParked || st.Instance.ActiveTurn != tr.ID || f.tools.ran("echo") != 1 || f.tools.parks != 1 {
		t.Fatalf("after the first event: turn %s, echo ran %d, parks %d", tr.Status, f.tools.ran("echo"), f.tools.parks)
	}
	var parked map[string]any
	for _, e := range st.TurnEvents[tr.ID] {
		if e.Type == turn.EvTurnParked {
			_ = json.Unmarshal(e.Data, &parked)
		}
	}
	if parked["authorizationUrl"] != "https://idp.example/auth?client_id=x" || parked["tool"] != "whoami" {
		t.Fatalf("turn.parked %v", parked)
	}
	// A message while parked waits in the backlog.
	f.model.script = append(f.model.script, say("second answer"))
	f.send(t, "ev-2", "are you there?")
	if st = f.state(t); len(st.Backlog) != 1 || lastTurn(st).ID != tr.ID {
		t.Fatalf("backlog %d", len(st.Backlog))
	}
	f.tools.mu.Lock()
	f.tools.granted = true
	f.tools.mu.Unlock()
	for i := range 5 { // duplicate deliveries, also after SQS's dedup window
		f.granted(t, fmt.Sprint("as-1-delivery-", i%2))
	}
	st = f.state(t)
	if f.tools.ran("whoami") != 1 {
		t.Fatalf("whoami ran %d times, want once", f.tools.ran("whoami"))
	}
	first := st.Turns[tr.ID]
	if first.Status != turn.TurnCompleted || first.Final != "you are alice" {
		t.Fatalf("the parked turn: %+v", first)
	}
	if ev := eventTypes(st, tr.ID); strings.Index(ev, "turn.parked") < 0 || strings.Index(ev, "turn.parked") > strings.Index(ev, "turn.resumed") {
		t.Fatalf("events %s", eventTypes(st, tr.ID))
	}
	// The backlogged message ran after, as its own turn.
	if second := lastTurn(st); second.ID == tr.ID || second.Final != "second answer" || len(st.Backlog) != 0 || st.Instance.ActiveTurn != "" {
		t.Fatalf("the backlogged turn: %+v, backlog %d", second, len(st.Backlog))
	}
	if h := history(st); !strings.Contains(h, "tool:result:call-0-whoami") || !strings.HasSuffix(h, "user:are you there? | assistant:second answer") {
		t.Fatalf("history %s", h)
	}
}

func TestAuthExpiredAnswersTheCall(t *testing.T) {
	f := newFixture(t, callTools("whoami"), say("could not connect"))
	f.send(t, "ev-1", "who am I?")
	ev := f.event("as-1-expired", `{"type":"auth.expired"}`)
	ev.Metadata = map[string]string{"authSessionId": "as-1"}
	if err := f.e.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	st := f.state(t)
	tr := lastTurn(st)
	if tr.Status != turn.TurnCompleted || f.tools.ran("whoami") != 0 || tr.Errors != 1 {
		t.Fatalf("turn %+v", tr)
	}
	last := f.model.calls[len(f.model.calls)-1].Messages
	if res := last[len(last)-1]; res.Role != message.Tool || !strings.Contains(string(res.Content[0].Output), CodeAuthorizationExpired) {
		t.Fatalf("the model was not told: %+v", res)
	}
}

func TestStepLimit(t *testing.T) {
	var script []func(model.Request) model.Response
	for range 10 {
		script = append(script, callTools("echo"))
	}
	f := newFixture(t, script...)
	f.e.Config = fixedConfig{Agent{Model: f.model, MaxSteps: 3}}
	f.send(t, "ev-1", "loop")
	st := f.state(t)
	tr := lastTurn(st)
	if tr.Status != turn.TurnCompleted || tr.Steps != 3 || f.model.count() != 3 || !strings.Contains(eventTypes(st, tr.ID), turn.EvStepLimitReached) {
		t.Fatalf("turn %+v, %d model calls, events %s", tr, f.model.count(), eventTypes(st, tr.ID))
	}
	if bad := message.CheckToolPairs(mustFold(st)); len(bad) != 0 {
		t.Fatalf("history %+v", bad)
	}
}

func mustFold(st turn.State) []message.Message {
	m, _ := message.Fold(st.Base, st.Events)
	return m
}

func TestPauseHoldsEventsAndResumeRunsThemInOrder(t *testing.T) {
	f := newFixture(t, say("one"), say("two"), say("three"))
	ctx := context.Background()
	f.send(t, "ev-1", "first")
	if err := f.e.Pause(ctx, f.key); err != nil {
		t.Fatal(err)
	}
	f.send(t, "ev-2", "second")
	f.send(t, "ev-3", "third")
	if st := f.state(t); len(st.Backlog) != 2 || f.model.count() != 1 {
		t.Fatalf("paused: backlog %d, model calls %d", len(st.Backlog), f.model.count())
	}
	if err := f.e.Resume(ctx, f.key); err != nil {
		t.Fatal(err)
	}
	if f.model.count() != 1 {
		t.Fatal("Resume ran turns itself instead of queueing a wake-up")
	}
	f.drain(t)
	st := f.state(t)
	if h := history(st); h != "user:first | assistant:one | user:second | assistant:two | user:third | assistant:three" {
		t.Fatalf("history %s", h)
	}
	if err := f.e.Terminate(ctx, f.key, "done"); err != nil {
		t.Fatal(err)
	}
	f.send(t, "ev-4", "anyone?")
	if f.model.count() != 3 {
		t.Fatal("a terminated instance ran a turn")
	}
	if err := f.e.Delete(ctx, f.key); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Load(ctx, f.key); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
}

// TestInstancesInParallelOneInstanceSerial: turns of different instances
// run at once; one instance's events never run concurrently (the fence
// turns a second writer into a retry, never a lost or doubled step).
func TestInstancesInParallelOneInstanceSerial(t *testing.T) {
	dir := t.TempDir()
	store, _ := turnfile.New(dir)
	m := &scriptModel{}
	for range 40 {
		m.script = append(m.script, say("ok"))
	}
	e := &Engine{Store: store, Config: fixedConfig{Agent{Model: m}}, Tools: &fakeTools{}}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for inst := range 4 {
		for msg := range 5 {
			wg.Go(func() {
				ev := domain.Event{ID: fmt.Sprintf("ev-%d-%d", inst, msg), SwarmRef: domain.ObjectRef{Name: "s"}, InstanceKey: fmt.Sprint("i", inst),
					AgentName: "a", Input: fmt.Sprintf(`{"type":"user.input","text":"m%d"}`, msg)}
				if err := e.Handle(context.Background(), ev); err != nil {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for inst := range 4 {
		st, err := store.Load(context.Background(), turn.InstanceKey{Swarm: "s", Key: fmt.Sprint("i", inst), Agent: "a"})
		if err != nil {
			t.Fatal(err)
		}
		// Every message ran exactly once, each in its own turn.
		users := strings.Count(history(st), "user:m")
		answers := strings.Count(history(st), "assistant:ok")
		if users != 5 || answers+len(st.Backlog) < 5 {
			t.Fatalf("instance %d: %d messages, %d answers, backlog %d: %s", inst, users, answers, len(st.Backlog), history(st))
		}
	}
}

// TestConsentWhilePaused: a consent that arrives while the instance is
// paused is kept, and the call runs once the instance resumes.
func TestConsentWhilePaused(t *testing.T) {
	f := newFixture(t, callTools("whoami"), say("you are alice"))
	ctx := context.Background()
	f.send(t, "ev-1", "who am I?")
	if err := f.e.Pause(ctx, f.key); err != nil {
		t.Fatal(err)
	}
	f.tools.granted = true
	f.granted(t, "as-1")
	if f.tools.ran("whoami") != 0 {
		t.Fatal("a paused instance ran a tool")
	}
	if err := f.e.Resume(ctx, f.key); err != nil {
		t.Fatal(err)
	}
	f.drain(t)
	if tr := lastTurn(f.state(t)); tr.Status != turn.TurnCompleted || f.tools.ran("whoami") != 1 || tr.Final != "you are alice" {
		t.Fatalf("after resume: %+v, whoami ran %d", tr, f.tools.ran("whoami"))
	}
}

func TestIdempotencyKey(t *testing.T) {
	a, b := idempotencyKey("turn-1", "call 1\n"), idempotencyKey("turn-1", "call 1\n")
	if a != b || a == idempotencyKey("turn-1", "call 2") || a == idempotencyKey("turn-2", "call 1\n") {
		t.Fatal("the key is not one per (turn, call)")
	}
	if len(a) != len("agentauth-")+32 || strings.ContainsAny(a, " \n") {
		t.Fatalf("key %q", a)
	}
}

// TestNotifyAfterCommit: watchers are told every turn event, in order,
// once, after it is stored.
func TestNotifyAfterCommit(t *testing.T) {
	f := newFixture(t, callTools("echo"), say("done"))
	var told []string
	f.e.Notify = func(_ context.Context, tr turn.Turn, evs []turn.TurnEvent) {
		st := f.state(t)
		for _, e := range evs {
			stored := false
			for _, s := range st.TurnEvents[tr.ID] {
				stored = stored || s.Seq == e.Seq && s.Type == e.Type
			}
			if !stored {
				t.Errorf("told %s before it was stored", e.Type)
			}
			told = append(told, e.Type)
		}
	}
	f.send(t, "ev-1", "go")
	if got := strings.Join(told, ","); got != eventTypes(f.state(t), lastTurn(f.state(t)).ID) {
		t.Fatalf("told %s", got)
	}
}

// asyncTools answers every call with a pending result and a handle (a
// tool that finishes later).
type asyncTools struct{ fakeTools }

func (a *asyncTools) Invoke(_ context.Context, in Invocation) Outcome {
	return Outcome{Kind: OutcomeOK, Result: json.RawMessage(`{"status":"pending","handle":"job-` + in.Call.ID + `"}`)}
}

// TestAsyncToolResult: an async tool answers {status: pending, handle} at
// once (so the history never holds a call without its result); its
// completion, posted later as an event of the instance, reaches the model
// in a turn of its own.
func TestAsyncToolResult(t *testing.T) {
	f := newFixture(t, callTools("lookup"), say("started the job"), say("the job finished: 42"))
	f.e.Tools = &asyncTools{}
	f.send(t, "ev-1", "run the job")
	if tr := lastTurn(f.state(t)); tr.Status != turn.TurnCompleted || tr.Final != "started the job" {
		t.Fatalf("first turn %+v", tr)
	}
	done := f.event("job-done", `{"type":"tool.completion","handle":"job-call-0-lookup","output":{"answer":42}}`)
	if err := f.e.Handle(context.Background(), done); err != nil {
		t.Fatal(err)
	}
	last := f.model.calls[len(f.model.calls)-1].Messages
	if got := last[len(last)-1].TextOf(); !strings.Contains(got, `"handle":"job-call-0-lookup"`) || !strings.Contains(got, `"answer":42`) {
		t.Fatalf("the model was given %q", got)
	}
	if tr := lastTurn(f.state(t)); tr.InputType != "tool.completion" || tr.Final != "the job finished: 42" {
		t.Fatalf("the completion's turn %+v", tr)
	}
}

// TestTerminateInterruptsTheTurn: terminating an instance whose turn waits
// for consent ends the turn as interrupted (turn.interrupted with the
// reason, not turn.completed) and answers the parked call.
func TestTerminateInterruptsTheTurn(t *testing.T) {
	f := newFixture(t, callTools("whoami"))
	f.send(t, "ev-1", "who am I?")
	if err := f.e.Terminate(context.Background(), f.key, "user left"); err != nil {
		t.Fatal(err)
	}
	st := f.state(t)
	tr := lastTurn(st)
	evs := st.TurnEvents[tr.ID]
	last := evs[len(evs)-1]
	if tr.Status != turn.TurnInterrupted || last.Type != turn.EvTurnInterrupted || !strings.Contains(string(last.Data), "user left") {
		t.Fatalf("turn %s, last event %s %s", tr.Status, last.Type, last.Data)
	}
	if bad := message.CheckToolPairs(mustFold(st)); len(bad) != 0 {
		t.Fatalf("history %+v", bad)
	}
}
