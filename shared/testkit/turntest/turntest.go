// Package turntest runs the turn plane for tests of what sits on it (the
// HTTP routes, the CLI): a real engine on a file turn store in a temporary
// directory, behind app.Turns and a real bundle's swarms, with a scripted
// fake model (no language model), fake tools and an in-memory queue that
// the test delivers by hand, as the worker would.
//
// Only tests import it.
package turntest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/turnfile"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// Bundle has the swarm "support": agents assistant (the entrypoint) and
// billing, which gets user.input whose property channel is billing. Its
// Model is never called: the engine gets the fake one.
const Bundle = `apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: fake}
spec: {provider: openai, model: fake, endpoint: "http://127.0.0.1:1/v1"}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec: {modelRef: Model/fake, systemPrompt: be brief}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: billing}
spec: {modelRef: Model/fake}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: support}
spec:
  agents: [Agent/assistant, Agent/billing]
  entrypoint: Agent/assistant
  ingress:
    - match: {event: user.input, properties: {channel: billing}}
      route: {agentRef: Agent/billing}
`

// Answer is one model answer of a script.
type Answer func(model.Request) model.Response

// Say answers text: the turn's final answer.
func Say(text string) Answer {
	return func(model.Request) model.Response {
		return model.Response{Message: message.Message{Role: message.Assistant, Content: []message.Part{{Type: message.Text, Text: text}}},
			Finish: model.FinishStop, Usage: model.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}
	}
}

// Call asks for one call of tool with the JSON arguments args.
func Call(tool, args string) Answer {
	return func(req model.Request) model.Response {
		return model.Response{Message: message.Message{Role: message.Assistant, Content: []message.Part{
			{Type: message.ToolUse, CallID: fmt.Sprintf("call-%d", len(req.Messages)), Name: tool, Input: json.RawMessage(args)}}},
			Finish: model.FinishToolUse, Usage: model.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}}
	}
}

// Model answers each call with the next answer of its script; past the
// end it fails as a provider's 500 would. Like an adapter it says which
// provider model answered: the bundle Model's id, "fake", unless the
// answer names another.
type Model struct {
	mu     sync.Mutex
	script []Answer
	calls  int
}

// Call implements model.Model.
func (m *Model) Call(_ context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.calls > len(m.script) {
		return model.Response{}, &model.Error{Status: 500, Message: "script exhausted"}
	}
	resp := m.script[m.calls-1](req)
	if resp.ModelID == "" {
		resp.ModelID = "fake"
	}
	return resp, nil
}

// Calls counts the model's calls.
func (m *Model) Calls() int { m.mu.Lock(); defer m.mu.Unlock(); return m.calls }

// Tools has echo, whose result holds its arguments, and whoami, which
// needs the user's consent (parks on session "as-1") until Grant.
type Tools struct {
	mu      sync.Mutex
	granted bool
}

// Catalog implements engine.Tools.
func (f *Tools) Catalog(context.Context, turn.Turn) ([]engine.Tool, error) {
	return []engine.Tool{
		{Spec: model.ToolSpec{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		{Spec: model.ToolSpec{Name: "whoami", InputSchema: json.RawMessage(`{"type":"object"}`)}},
	}, nil
}

// Invoke implements engine.Tools.
func (f *Tools) Invoke(_ context.Context, in engine.Invocation) engine.Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.Call.Tool == "whoami" && !f.granted {
		return engine.Outcome{Kind: engine.OutcomeAuthorizationRequired, AuthSession: "as-1", AuthorizationURL: "https://idp.example/auth?client_id=demo"}
	}
	return engine.Outcome{Kind: engine.OutcomeOK, Result: json.RawMessage(`{"status":"ok","output":{"echo":` + string(in.Call.Args) + `}}`)}
}

// Grant makes whoami run.
func (f *Tools) Grant() { f.mu.Lock(); f.granted = true; f.mu.Unlock() }

type fixedAgent struct{ m model.Model }

func (c fixedAgent) Agent(context.Context, turn.InstanceKey) (engine.Agent, string, error) {
	return engine.Agent{Model: c.m, ModelName: "fake", SystemPrompt: "be brief", MaxSteps: 8}, "rev-1", nil
}

// Queue keeps what is queued until the test delivers it.
type Queue struct {
	mu  sync.Mutex
	evs []domain.Event
}

// Enqueue implements domain.EventQueue.
func (q *Queue) Enqueue(_ context.Context, e domain.Event) error {
	q.mu.Lock()
	q.evs = append(q.evs, e)
	q.mu.Unlock()
	return nil
}

// Pending is what waits to be delivered, in order.
func (q *Queue) Pending() []domain.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]domain.Event(nil), q.evs...)
}

func (q *Queue) pop() (domain.Event, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.evs) == 0 {
		return domain.Event{}, false
	}
	ev := q.evs[0]
	q.evs = q.evs[1:]
	return ev, true
}

// Plane is the turn plane of one test.
type Plane struct {
	Turns  *app.Turns
	Engine *engine.Engine
	Queue  *Queue
	Model  *Model
	Tools  *Tools
}

// New builds the plane on a temporary turn store; the model answers with
// script.
func New(t testing.TB, script ...Answer) *Plane {
	t.Helper()
	b, err := bundle.Parse([]bundle.File{{Name: "turns.yaml", Data: []byte(Bundle)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store, err := turnfile.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p := &Plane{Queue: &Queue{}, Model: &Model{script: script}, Tools: &Tools{}}
	p.Engine = &engine.Engine{Store: store, Config: fixedAgent{p.Model}, Tools: p.Tools, Queue: p.Queue}
	p.Turns = app.NewTurns(p.Engine, p.Queue, b)
	return p
}

// Deliver hands every queued event to the engine in order, those queued
// meanwhile (wake-ups) included, as the worker would.
func (p *Plane) Deliver(t testing.TB) {
	t.Helper()
	for {
		ev, ok := p.Queue.pop()
		if !ok {
			return
		}
		if err := p.Engine.Handle(context.Background(), ev); err != nil {
			t.Fatalf("handle %s: %v", ev.ID, err)
		}
	}
}
