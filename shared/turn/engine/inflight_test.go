package engine

import (
	"context"
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

// injector fires an operator's lifecycle operation once, at one point of
// a step in flight: during a model call, during a tool call, or just
// before the nth commit of the worker. It counts what starts after it
// fired.
type injector struct {
	mu        sync.Mutex
	point     string // "model#1", "tool:echo", "commit#3"
	op        func() error
	fired     bool
	opErr     error
	commits   int
	models    int
	afterOp   []string // model calls and tool runs started after the op
	toolsSeen map[string]int
}

func (in *injector) reach(p string) {
	in.mu.Lock()
	if in.fired {
		if !strings.HasPrefix(p, "commit#") { // a commit after it is a retry, not a start
			in.afterOp = append(in.afterOp, p)
		}
		in.mu.Unlock()
		return
	}
	fire := p == in.point
	in.fired = fire
	in.mu.Unlock()
	if fire {
		in.opErr = in.op()
	}
}

type injStore struct {
	turn.Store
	in *injector
}

func (s *injStore) Commit(ctx context.Context, c turn.Commit) error {
	s.in.mu.Lock()
	s.in.commits++
	n := s.in.commits
	s.in.mu.Unlock()
	s.in.reach(fmt.Sprint("commit#", n))
	return s.Store.Commit(ctx, c)
}

type injModel struct {
	inner model.Model
	in    *injector
}

func (m *injModel) Call(ctx context.Context, req model.Request) (model.Response, error) {
	m.in.mu.Lock()
	m.in.models++
	n := m.in.models
	m.in.mu.Unlock()
	// The request is out: the operation lands while the model thinks.
	resp, err := m.inner.Call(ctx, req)
	m.in.reach(fmt.Sprint("model#", n))
	return resp, err
}

type injTools struct {
	*fakeTools
	in *injector
}

func (t *injTools) Invoke(ctx context.Context, inv Invocation) Outcome {
	out := t.fakeTools.Invoke(ctx, inv) // the upstream has run it
	t.in.reach("tool:" + inv.Call.Tool)
	return out
}

// scenario is a turn the in-flight tests run: its script, the tools it
// calls, and whether a call parks for consent (whoami, granted as as-1).
type scenario struct {
	name   string
	script func() []func(model.Request) model.Response
	tools  []string
	parks  bool
	final  string
	models int // model calls of an uninterrupted run
}

var inflightScenarios = []scenario{
	{name: "two tools", tools: []string{"echo", "lookup"}, final: "done", models: 2,
		script: func() []func(model.Request) model.Response {
			return []func(model.Request) model.Response{callTools("echo", "lookup"), say("done"), say("spare"), say("spare")}
		}},
	{name: "a tool that parks", tools: []string{"whoami", "echo"}, parks: true, final: "you are alice", models: 2,
		script: func() []func(model.Request) model.Response {
			return []func(model.Request) model.Response{callTools("whoami", "echo"), say("you are alice"), say("spare"), say("spare")}
		}},
}

// TestLifecycleAgainstAStepInFlight lands a pause, a terminate and a
// delete at every point of a step in flight — during each model call,
// during each tool call, and before each commit — and checks what each
// promises (issue 16, items 1, 2 and 9):
//   - pause: the step in flight finishes and stores its model answer and
//     its tools' results; nothing starts after the step's end; after
//     resume the turn ends as an uninterrupted run would, with every model
//     call made once and every tool run once (no E_TOOL_OUTCOME_UNKNOWN);
//     a step whose call waits for consent ends parked, and the consent
//     resumes it;
//   - terminate: nothing starts after it, the turn is interrupted, every
//     call has a result, and a later event starts no turn;
//   - delete: nothing starts after it and the instance stays deleted.
func TestLifecycleAgainstAStepInFlight(t *testing.T) {
	for _, sc := range inflightScenarios {
		// A clean run: its commits and model calls.
		clean := &injector{point: "never"}
		{
			f := newFixture(t, sc.script()...)
			f.e.Store = &injStore{Store: f.store, in: clean}
			f.e.Config = fixedConfig{Agent{Model: &injModel{inner: f.model, in: clean}, MaxSteps: 8}}
			f.send(t, "ev-1", "go")
			if sc.parks {
				f.tools.granted = true
				f.granted(t, "as-1")
			}
			if tr := lastTurn(f.state(t)); tr.Status != turn.TurnCompleted || tr.Final != sc.final {
				t.Fatalf("%s, clean run: %+v", sc.name, tr)
			}
		}
		var points []string
		for n := 1; n <= clean.models; n++ {
			points = append(points, fmt.Sprint("model#", n))
		}
		for _, tool := range sc.tools {
			points = append(points, "tool:"+tool)
		}
		for n := 2; n <= clean.commits; n++ { // commit#1 creates the instance
			points = append(points, fmt.Sprint("commit#", n))
		}
		for _, op := range []string{"pause", "terminate", "delete"} {
			for _, p := range points {
				t.Run(sc.name+"/"+op+" at "+p, func(t *testing.T) {
					runInFlight(t, sc, op, p)
				})
			}
		}
	}
}

func runInFlight(t *testing.T, sc scenario, op, point string) {
	dir := t.TempDir()
	store, err := turnfile.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := &scriptModel{script: sc.script()}
	tools := &fakeTools{}
	q := &memQueue{}
	key := turn.InstanceKey{Swarm: "default", Key: "thread-1", Agent: "assistant"}
	operator := &Engine{Store: store, Queue: q}
	in := &injector{point: point}
	in.op = func() error {
		switch op {
		case "pause":
			return operator.Pause(context.Background(), key)
		case "terminate":
			return operator.Terminate(context.Background(), key, "operator")
		}
		return operator.Delete(context.Background(), key)
	}
	cfg := fixedConfig{Agent{Model: &injModel{inner: m, in: in}, MaxSteps: 8}}
	worker := &Engine{Store: &injStore{Store: store, in: in}, Config: cfg, Tools: &injTools{fakeTools: tools, in: in}, Queue: q}
	f := &fixture{e: worker, store: store, model: m, tools: tools, key: key, dir: dir}
	if err := worker.Handle(context.Background(), f.event("ev-1", `{"type":"user.input","text":"go"}`)); err != nil {
		t.Fatalf("the worker in flight: %v", err)
	}
	if sc.parks && !in.fired {
		// The point comes after the consent (the resumed call's commits).
		f.tools.granted = true
		f.granted(t, "as-1")
	}
	if !in.fired || in.opErr != nil {
		t.Fatalf("the %s at %s: fired %v, %v", op, point, in.fired, in.opErr)
	}
	switch op {
	case "pause":
		checkPausedInFlight(t, sc, f, in, operator)
	case "terminate":
		checkTerminatedInFlight(t, f, in)
	case "delete":
		if len(in.afterOp) != 0 {
			t.Fatalf("started after the delete: %v", in.afterOp)
		}
		if _, err := store.Load(context.Background(), key); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("the deleted instance came back: %v", err)
		}
	}
}

func checkPausedInFlight(t *testing.T, sc scenario, f *fixture, in *injector, operator *Engine) {
	t.Helper()
	st := f.state(t)
	if st.Instance.Status != turn.Paused {
		t.Fatalf("status %s", st.Instance.Status)
	}
	// Nothing of a new step started while paused: at most the calls of
	// the step in flight.
	for _, s := range in.afterOp {
		if strings.HasPrefix(s, "model#") {
			t.Fatalf("a model call started after the pause: %v", in.afterOp)
		}
	}
	// The step in flight stored every result it had: no call is left
	// started (its outcome thrown away), none planned behind it.
	for _, cl := range st.Calls {
		if cl.State == turn.CallStarted || cl.State == turn.CallPlanned {
			t.Fatalf("call %s (%s) left %s by the paused worker", cl.ID, cl.Tool, cl.State)
		}
	}
	operator.Config, operator.Tools = f.e.Config, f.e.Tools
	if err := operator.Resume(context.Background(), f.key); err != nil {
		t.Fatal(err)
	}
	f.drain(t)
	st = f.state(t)
	tr := lastTurn(st)
	if sc.parks && tr.Status == turn.TurnParked {
		f.tools.granted = true
		f.granted(t, "as-1")
		st = f.state(t)
		tr = lastTurn(st)
	}
	if tr.Status != turn.TurnCompleted || tr.Final != sc.final {
		t.Fatalf("after resume: %s %q (%+v)", tr.Status, tr.Final, tr.Error)
	}
	if f.model.count() != sc.models {
		t.Fatalf("%d model calls in all, want %d: an answer was thrown away and asked for again", f.model.count(), sc.models)
	}
	for _, tool := range sc.tools {
		if f.tools.ran(tool) != 1 {
			t.Fatalf("%s ran %d times; want once", tool, f.tools.ran(tool))
		}
	}
	msgs := mustFold(st)
	if bad := message.CheckToolPairs(msgs); len(bad) != 0 {
		t.Fatalf("history %+v", bad)
	}
	for _, m := range msgs {
		for _, p := range m.Content {
			if p.Type == message.ToolResult && strings.Contains(string(p.Output), CodeOutcomeUnknown) {
				t.Fatalf("the model was told %s of %s", CodeOutcomeUnknown, p.CallID)
			}
		}
	}
}

func checkTerminatedInFlight(t *testing.T, f *fixture, in *injector) {
	t.Helper()
	if len(in.afterOp) != 0 {
		t.Fatalf("started after the terminate: %v", in.afterOp)
	}
	st := f.state(t)
	tr := lastTurn(st)
	if st.Instance.Status != turn.Terminated || st.Instance.ActiveTurn != "" || !tr.Status.Ended() {
		t.Fatalf("instance %s, active %q, turn %s", st.Instance.Status, st.Instance.ActiveTurn, tr.Status)
	}
	if bad := message.CheckToolPairs(mustFold(st)); len(bad) != 0 {
		t.Fatalf("history %+v", bad)
	}
	// A terminated instance never grows a new running turn.
	before := f.model.count()
	f.send(t, "ev-2", "still there?")
	f.tools.granted = true
	f.granted(t, "as-1-late")
	f.drain(t)
	st = f.state(t)
	if f.model.count() != before || st.Instance.ActiveTurn != "" {
		t.Fatalf("a terminated instance ran: %d model calls, active %q", f.model.count()-before, st.Instance.ActiveTurn)
	}
	for _, tr := range st.Turns {
		if !tr.Status.Ended() {
			t.Fatalf("turn %s is %s on a terminated instance", tr.ID, tr.Status)
		}
	}
}
