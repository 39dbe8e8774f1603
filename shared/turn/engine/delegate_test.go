package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/turnfile"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

type agentsConfig map[string]Agent

func (c agentsConfig) Agent(_ context.Context, key turn.InstanceKey) (Agent, string, error) {
	return c[key.Agent], "rev-1", nil
}

func delegateTo(agent, input string) func(model.Request) model.Response {
	return func(req model.Request) model.Response {
		args, _ := json.Marshal(map[string]string{"agent": agent, "input": input})
		return model.Response{Message: message.Message{Role: message.Assistant, Content: []message.Part{
			{Type: message.ToolUse, CallID: "d1", Name: DelegateTool, Input: args}}}, Finish: model.FinishToolUse}
	}
}

// TestDelegation: agents.delegate hands a task to a peer with turn.auth
// unchanged and the origin extended; the delegating turn goes on at once
// (the call answers pending); the peer's answer comes back to the
// delegating agent as agent.delegationResult, in a turn of its own.
func TestDelegation(t *testing.T) {
	store, _ := turnfile.New(t.TempDir())
	planner := &scriptModel{script: []func(model.Request) model.Response{
		delegateTo("helper", "find the order 42"), say("I asked the helper."), say("The helper says: order 42 shipped."),
	}}
	helper := &scriptModel{script: []func(model.Request) model.Response{say("order 42 shipped")}}
	q := &memQueue{}
	e := &Engine{Store: store, Queue: q, Tools: &fakeTools{}, Config: agentsConfig{
		"planner": {Model: planner, Peers: []string{"helper"}},
		"helper":  {Model: helper},
	}}
	f := &fixture{e: e, store: store, model: planner, tools: &fakeTools{}, key: turn.InstanceKey{Swarm: "default", Key: "thread-1", Agent: "planner"}}
	ev := f.event("ev-1", `{"type":"user.input","text":"where is order 42?"}`)
	ev.Auth = domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "alice"}, Subjects: &domain.Subjects{User: "demo:user:alice"}}
	ev.Origin = map[string]any{"channel": "C1"}
	if err := e.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	// The delegating turn answered without waiting.
	st := f.state(t)
	if first := lastTurn(st); first.Status != turn.TurnCompleted || first.Final != "I asked the helper." {
		t.Fatalf("planner's turn: %+v", first)
	}
	// The delegation event: the peer, the same instance key, auth unchanged.
	if len(q.evs) != 1 {
		t.Fatalf("%d events queued", len(q.evs))
	}
	d := q.evs[0]
	if d.AgentName != "helper" || d.InstanceKey != "thread-1" || d.Auth.Subjects.User != "demo:user:alice" || d.Auth.Actor.ID != "alice" ||
		d.Origin["delegatedFrom"] != "planner" || d.Origin["channel"] != "C1" || !strings.Contains(d.Input, "find the order 42") {
		t.Fatalf("delegation event %+v", d)
	}
	if tools := planner.calls[0].Tools; len(tools) != 4 || tools[3].Name != DelegateTool {
		t.Fatalf("the planner's catalog lacks agents.delegate: %+v", tools)
	}
	if len(helper.calls) != 0 {
		t.Fatal("the helper ran before its event was delivered")
	}
	f.drain(t) // the helper's turn, then the result back to the planner
	if len(helper.calls) != 1 || helper.calls[0].Messages[len(helper.calls[0].Messages)-1].TextOf() != "find the order 42" {
		t.Fatalf("the helper was sent %+v", helper.calls)
	}
	for _, tl := range helper.calls[0].Tools {
		if tl.Name == DelegateTool {
			t.Fatal("an agent with no peers was offered agents.delegate")
		}
	}
	st = f.state(t)
	if last := lastTurn(st); last.InputType != EventDelegationResult || last.Final != "The helper says: order 42 shipped." {
		t.Fatalf("the result's turn: %+v", last)
	}
	req := planner.calls[len(planner.calls)-1].Messages
	if got := req[len(req)-1].TextOf(); !strings.Contains(got, `"answer":"order 42 shipped"`) || !strings.Contains(got, EventDelegationResult) {
		t.Fatalf("the planner was told %s", got)
	}
}

func TestDelegationRefusesUnknownPeers(t *testing.T) {
	store, _ := turnfile.New(t.TempDir())
	m := &scriptModel{script: []func(model.Request) model.Response{delegateTo("nobody", "x"), say("ok")}}
	q := &memQueue{}
	e := &Engine{Store: store, Queue: q, Tools: &fakeTools{}, Config: agentsConfig{"planner": {Model: m, Peers: []string{"helper"}}}}
	f := &fixture{e: e, store: store, model: m, key: turn.InstanceKey{Swarm: "default", Key: "t", Agent: "planner"}}
	f.send(t, "ev-1", "go")
	if len(q.evs) != 0 {
		t.Fatal("a delegation to an agent outside the swarm was queued")
	}
	last := m.calls[1].Messages
	if res := last[len(last)-1]; !strings.Contains(string(res.Content[0].Output), "E_TOOL_INVALID_ARGS") {
		t.Fatalf("the model was told %+v", res)
	}
}

// TestDelegationToATerminatedPeer: a task handed to a peer whose instance
// is terminated does not leave the delegating agent waiting: it gets its
// agent.delegationResult, status interrupted, saying why.
func TestDelegationToATerminatedPeer(t *testing.T) {
	store, _ := turnfile.New(t.TempDir())
	planner := &scriptModel{script: []func(model.Request) model.Response{
		delegateTo("helper", "find the order 42"), say("I asked the helper."), say("The helper could not take it."),
	}}
	helper := &scriptModel{script: []func(model.Request) model.Response{say("hello"), say("unused")}}
	q := &memQueue{}
	e := &Engine{Store: store, Queue: q, Tools: &fakeTools{}, Config: agentsConfig{
		"planner": {Model: planner, Peers: []string{"helper"}},
		"helper":  {Model: helper},
	}}
	f := &fixture{e: e, store: store, model: planner, tools: &fakeTools{}, key: turn.InstanceKey{Swarm: "default", Key: "thread-1", Agent: "planner"}}
	helperKey := turn.InstanceKey{Swarm: "default", Key: "thread-1", Agent: "helper"}
	hello := domain.Event{ID: "h-1", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: "thread-1", AgentName: "helper", Input: "hi"}
	if err := e.Handle(context.Background(), hello); err != nil {
		t.Fatal(err)
	}
	if err := e.Terminate(context.Background(), helperKey, "closed"); err != nil {
		t.Fatal(err)
	}
	if err := e.Handle(context.Background(), f.event("ev-1", `{"type":"user.input","text":"where is order 42?"}`)); err != nil {
		t.Fatal(err)
	}
	f.drain(t) // the delegation reaches the terminated helper; its refusal comes back
	if len(helper.calls) != 1 {
		t.Fatalf("the terminated helper ran: %d calls", len(helper.calls))
	}
	last := lastTurn(f.state(t))
	req := planner.calls[len(planner.calls)-1].Messages
	got := req[len(req)-1].TextOf()
	if last.InputType != EventDelegationResult || !strings.Contains(got, `"status":"interrupted"`) || !strings.Contains(got, "terminated") {
		t.Fatalf("the planner was told %s (turn %+v)", got, last)
	}
}
