package app_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/turntest"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
)

var alice = domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "alice"}}

// TestPostToATerminatedInstance (issue 18.4): a post the ingress rules
// route to a terminated instance is refused with engine.ErrTerminated,
// naming that instance's agent, and nothing is queued — it was answered
// 202 and dropped by the worker. Another agent's instance on the same key
// still takes posts, and after a delete the key starts over.
func TestPostToATerminatedInstance(t *testing.T) {
	ctx := context.Background()
	p := turntest.New(t, turntest.Say("hello"), turntest.Say("hello again"))
	const key = "1712345678.000100"
	assistant := turn.InstanceKey{Swarm: "support", Key: key, Agent: "assistant"}
	if _, err := p.Turns.Post(ctx, "support", key, app.Incoming{Text: "hi", Auth: alice}); err != nil {
		t.Fatal(err)
	}
	p.Deliver(t)
	if err := p.Turns.Terminate(ctx, assistant, "the user left"); err != nil {
		t.Fatal(err)
	}

	for _, in := range []app.Incoming{
		{Text: "are you there?", Auth: alice},
		{ID: "msg-7", Text: "with an id", Auth: alice},
		{Type: engine.EventWakeup, Auth: alice},
		{Text: "named", Agent: "assistant", Auth: alice},
	} {
		ev, err := p.Turns.Post(ctx, "support", key, in)
		if !errors.Is(err, engine.ErrTerminated) || ev.AgentName != "assistant" || ev.InstanceKey != key || ev.SwarmRef.Name != "support" {
			t.Fatalf("post %+v: %+v, %v; want engine.ErrTerminated naming support/%s/assistant", in, ev, err, key)
		}
	}
	if q := p.Queue.Pending(); len(q) != 0 {
		t.Fatalf("refused, yet queued %+v", q)
	}

	// The ingress rules pick billing: its instance is not terminated.
	if ev, err := p.Turns.Post(ctx, "support", key, app.Incoming{Text: "invoice", Properties: map[string]string{"channel": "billing"}, Auth: alice}); err != nil || ev.AgentName != "billing" {
		t.Fatalf("post to billing: %+v %v", ev, err)
	}
	p.Deliver(t)

	// Deleted, the key starts over.
	if err := p.Turns.Delete(ctx, assistant); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Turns.Post(ctx, "support", key, app.Incoming{Text: "hi again", Auth: alice}); err != nil {
		t.Fatalf("post after delete: %v", err)
	}
	p.Deliver(t)
	st, err := p.Turns.Inspect(ctx, assistant)
	if err != nil || st.Instance.Status != turn.Active || len(st.Turns) != 1 {
		t.Fatalf("after delete and post: %+v %v", st.Instance, err)
	}
}

// TestPostThatRacesATerminate: an event accepted before the terminate
// lands is the one that reaches the engine's "recorded, not run" path —
// processed (a redelivery changes nothing), no turn started, the model
// not asked.
func TestPostThatRacesATerminate(t *testing.T) {
	ctx := context.Background()
	p := turntest.New(t, turntest.Say("hello"))
	key := turn.InstanceKey{Swarm: "support", Key: "k1", Agent: "assistant"}
	if _, err := p.Turns.Post(ctx, "support", "k1", app.Incoming{Text: "first", Auth: alice}); err != nil {
		t.Fatal(err)
	}
	p.Deliver(t)
	ev, err := p.Turns.Post(ctx, "support", "k1", app.Incoming{Text: "raced", Auth: alice})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Turns.Terminate(ctx, key, ""); err != nil {
		t.Fatal(err)
	}
	p.Deliver(t)
	st, err := p.Turns.Inspect(ctx, key)
	if err != nil || !st.HasProcessed(ev.ID) || len(st.Turns) != 1 || p.Model.Calls() != 1 {
		t.Fatalf("raced event %s: processed %v, %d turns, %d model calls, %v", ev.ID, st.HasProcessed(ev.ID), len(st.Turns), p.Model.Calls(), err)
	}
}

// unreadableStore fails every read as a store that is down would.
type unreadableStore struct{ turn.Store }

var errStoreDown = errors.New("turn store unreachable")

func (unreadableStore) Load(context.Context, turn.InstanceKey) (turn.State, error) {
	return turn.State{}, errStoreDown
}

// TestPostWhenTheInstanceCannotBeRead: a post whose instance's status
// cannot be read is an error (the edge's 500), not an event queued
// unchecked.
func TestPostWhenTheInstanceCannotBeRead(t *testing.T) {
	b, err := bundle.Parse([]bundle.File{{Name: "turns.yaml", Data: []byte(turntest.Bundle)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	q := &turntest.Queue{}
	turns := app.NewTurns(&engine.Engine{Store: unreadableStore{}, Queue: q}, q, b)
	_, err = turns.Post(context.Background(), "support", "k1", app.Incoming{Text: "hi", Auth: alice})
	if !errors.Is(err, errStoreDown) || errors.Is(err, engine.ErrTerminated) {
		t.Fatalf("post: %v", err)
	}
	if len(q.Pending()) != 0 {
		t.Fatalf("queued %+v", q.Pending())
	}
}
