// Package turnstoretest is the conformance suite of turn.Store: the file
// store of the local server and the DynamoDB store of the AWS deployment
// run Run, so commits are atomic, fenced and read back the same way
// everywhere.
//
// Only tests import it.
package turnstoretest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

// Key returns a fresh instance key for one test.
func Key(t *testing.T) turn.InstanceKey {
	return turn.InstanceKey{Swarm: "default", Key: fmt.Sprintf("thread-%d", time.Now().UnixNano()), Agent: "assistant"}
}

// First is the commit that creates an instance with one running turn.
func First(k turn.InstanceKey) turn.Commit {
	tr := turn.Turn{ID: "t1", Instance: k, InputEventID: "ev-1", InputType: "user.input", Status: turn.TurnRunning, TraceID: "trace-1",
		Auth: domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "alice"}}, StartedAt: t0, Origin: map[string]any{"channel": "C1"}, NextEvent: 1}
	return turn.Commit{
		Expect:    0,
		Instance:  turn.Instance{Key: k, Status: turn.Active, ActiveTurn: "t1", NextSeq: 1, CreatedAt: t0, UpdatedAt: t0, Version: 1},
		Turn:      &tr,
		Messages:  []message.Event{{Seq: 0, Type: message.LLMMessage, Message: &message.Message{ID: "u1", Role: message.User, Content: []message.Part{{Type: message.Text, Text: "hi"}}}}},
		Events:    []turn.TurnEvent{{TurnID: "t1", Seq: 0, Type: turn.EvTurnStarted, At: t0, Data: json.RawMessage(`{"input":"user.input"}`)}},
		Processed: "ev-1",
	}
}

// next is a commit over st that changes the instance's UpdatedAt and
// whatever mut adds.
func next(st turn.State, mut func(*turn.Commit)) turn.Commit {
	inst := st.Instance
	inst.Version++
	inst.UpdatedAt = inst.UpdatedAt.Add(time.Second)
	c := turn.Commit{Expect: st.Instance.Version, Instance: inst}
	if mut != nil {
		mut(&c)
	}
	return c
}

// Run runs the suite against fresh stores from newStore.
func Run(t *testing.T, newStore func(t *testing.T) turn.Store) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, turn.Store)
	}{
		{"NotFound", testNotFound},
		{"CreateAndLoad", testCreateAndLoad},
		{"Fence", testFence},
		{"Race", testRace},
		{"MessagesAndRebase", testMessagesAndRebase},
		{"Backlog", testBacklog},
		{"Processed", testProcessed},
		{"InvalidKeys", testInvalidKeys},
		{"ListAndDelete", testListAndDelete},
		{"TurnEvents", testTurnEvents},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func load(t *testing.T, s turn.Store, k turn.InstanceKey) turn.State {
	t.Helper()
	st, err := s.Load(context.Background(), k)
	must(t, err, "Load")
	return st
}

func testNotFound(t *testing.T, s turn.Store) {
	_, err := s.Load(context.Background(), Key(t))
	if !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("Load of a new key: %v, want ErrNotFound", err)
	}
}

func testCreateAndLoad(t *testing.T, s turn.Store) {
	ctx := context.Background()
	k := Key(t)
	first := First(k)
	must(t, s.Commit(ctx, first), "first commit")
	want, err := turn.Apply(turn.NewState(), first)
	must(t, err, "Apply")
	got := load(t, s, k)
	if !reflect.DeepEqual(normalize(got), normalize(want)) {
		t.Fatalf("loaded\n%+v\nwant\n%+v", got, want)
	}
	if got.Turns["t1"].Auth.Actor.ID != "alice" || got.Turns["t1"].Origin["channel"] != "C1" || !got.HasProcessed("ev-1") {
		t.Fatalf("loaded turn %+v", got.Turns["t1"])
	}
}

// normalize makes empty and nil maps and slices compare equal, and times
// compare by instant.
func normalize(s turn.State) string {
	b, _ := json.Marshal(s)
	var v any
	_ = json.Unmarshal(b, &v)
	out, _ := json.Marshal(v)
	return string(out)
}

func testFence(t *testing.T, s turn.Store) {
	ctx := context.Background()
	k := Key(t)
	must(t, s.Commit(ctx, First(k)), "first commit")
	if err := s.Commit(ctx, First(k)); !errors.Is(err, turn.ErrStale) {
		t.Fatalf("second create: %v, want ErrStale", err)
	}
	st := load(t, s, k)
	c := next(st, func(c *turn.Commit) {
		c.Calls = []turn.Call{{ID: "c1", TurnID: "t1", Tool: "whoami", State: turn.CallPlanned}}
	})
	stale := c
	stale.Expect, stale.Instance.Version = st.Instance.Version-1, st.Instance.Version
	if err := s.Commit(ctx, stale); !errors.Is(err, turn.ErrStale) {
		t.Fatalf("stale commit: %v, want ErrStale", err)
	}
	if got := load(t, s, k); len(got.Calls) != 0 || got.Instance.Version != st.Instance.Version {
		t.Fatal("a refused commit changed the instance")
	}
	must(t, s.Commit(ctx, c), "commit")
	if got := load(t, s, k); got.Calls["t1/c1"].Tool != "whoami" || got.Instance.Version != st.Instance.Version+1 {
		t.Fatalf("after commit: %+v", got.Calls)
	}
}

// testRace: copies of one commit (two workers after the same read) — one
// lands, the others get ErrStale.
func testRace(t *testing.T, s turn.Store) {
	ctx := context.Background()
	k := Key(t)
	must(t, s.Commit(ctx, First(k)), "first commit")
	st := load(t, s, k)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			errs[i] = s.Commit(ctx, next(st, func(c *turn.Commit) {
				c.Calls = []turn.Call{{ID: fmt.Sprint("c", i), TurnID: "t1", Tool: "whoami", State: turn.CallStarted}}
			}))
		})
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, turn.ErrStale):
			t.Errorf("racer %d: %v", i, err)
		}
	}
	got := load(t, s, k)
	if won != 1 || len(got.Calls) != 1 || got.Instance.Version != st.Instance.Version+1 {
		t.Fatalf("%d won, %d calls, version %d", won, len(got.Calls), got.Instance.Version)
	}
}

func textMsg(id string, role message.Role, text string) *message.Message {
	return &message.Message{ID: id, Role: role, Content: []message.Part{{Type: message.Text, Text: text}}}
}

func testMessagesAndRebase(t *testing.T, s turn.Store) {
	ctx := context.Background()
	k := Key(t)
	must(t, s.Commit(ctx, First(k)), "first commit")
	for i := range 5 {
		st := load(t, s, k)
		must(t, s.Commit(ctx, next(st, func(c *turn.Commit) {
			c.Instance.NextSeq++
			c.Messages = []message.Event{{Seq: st.Instance.NextSeq, Type: message.LLMMessage, Message: textMsg(fmt.Sprint("a", i), message.Assistant, "x")}}
		})), "append")
	}
	st := load(t, s, k)
	if len(st.Events) != 6 || len(st.Base) != 0 {
		t.Fatalf("%d events, %d base", len(st.Events), len(st.Base))
	}
	folded, _ := message.Fold(st.Base, st.Events)
	done := st.Turns["t1"]
	done.Status = turn.TurnCompleted
	must(t, s.Commit(ctx, next(st, func(c *turn.Commit) {
		c.Instance.ActiveTurn = ""
		c.Turn = &done
		c.Rebase, c.NewBase = true, folded
	})), "rebase")
	st = load(t, s, k)
	if len(st.Events) != 0 || len(st.Base) != 6 || st.Base[0].ID != "u1" || st.Instance.ActiveTurn != "" {
		t.Fatalf("after rebase: %d events, base %d", len(st.Events), len(st.Base))
	}
	// Appending after a rebase continues from the new base.
	must(t, s.Commit(ctx, next(st, func(c *turn.Commit) {
		c.Instance.NextSeq++
		c.Messages = []message.Event{{Seq: st.Instance.NextSeq, Type: message.Truncate}}
	})), "append after rebase")
	st = load(t, s, k)
	if got, _ := message.Fold(st.Base, st.Events); len(got) != 0 {
		t.Fatalf("truncate after rebase: %d messages", len(got))
	}
}

func testBacklog(t *testing.T, s turn.Store) {
	ctx := context.Background()
	k := Key(t)
	must(t, s.Commit(ctx, First(k)), "first commit")
	ev := func(id string) domain.Event {
		return domain.Event{ID: id, InstanceKey: k.Key, AgentName: k.Agent, Input: `{"type":"user.input"}`}
	}
	st := load(t, s, k)
	must(t, s.Commit(ctx, next(st, func(c *turn.Commit) { c.BacklogPush = []domain.Event{ev("b1"), ev("b2")}; c.Processed = "b1" })), "push")
	st = load(t, s, k)
	must(t, s.Commit(ctx, next(st, func(c *turn.Commit) { c.BacklogPush = []domain.Event{ev("b3")}; c.Processed = "b3" })), "push")
	st = load(t, s, k)
	if len(st.Backlog) != 3 || st.Backlog[0].ID != "b1" || st.Backlog[2].ID != "b3" {
		t.Fatalf("backlog %+v", st.Backlog)
	}
	if err := s.Commit(ctx, next(st, func(c *turn.Commit) { c.BacklogPop = 4 })); err == nil {
		t.Fatal("popping more than the backlog holds was accepted")
	}
	must(t, s.Commit(ctx, next(st, func(c *turn.Commit) { c.BacklogPop = 1 })), "pop")
	if st = load(t, s, k); len(st.Backlog) != 2 || st.Backlog[0].ID != "b2" {
		t.Fatalf("after pop: %+v", st.Backlog)
	}
}

func testProcessed(t *testing.T, s turn.Store) {
	ctx := context.Background()
	k := Key(t)
	must(t, s.Commit(ctx, First(k)), "first commit")
	for i := range turn.KeepProcessed + 5 {
		st := load(t, s, k)
		must(t, s.Commit(ctx, next(st, func(c *turn.Commit) { c.Processed = fmt.Sprint("ev-x", i) })), "mark")
	}
	st := load(t, s, k)
	if len(st.Processed) != turn.KeepProcessed || !st.HasProcessed(fmt.Sprint("ev-x", turn.KeepProcessed+4)) || st.HasProcessed("ev-1") {
		t.Fatalf("processed: %d kept", len(st.Processed))
	}
}

func testInvalidKeys(t *testing.T, s turn.Store) {
	ctx := context.Background()
	for _, k := range []turn.InstanceKey{{}, {Swarm: "s", Key: "../x", Agent: "a"}, {Swarm: "s", Key: "k\n", Agent: "a"}} {
		if _, err := s.Load(ctx, k); !errors.Is(err, domain.ErrInvalidID) {
			t.Errorf("Load(%q): %v", k.String(), err)
		}
		if err := s.Commit(ctx, First(k)); !errors.Is(err, domain.ErrInvalidID) {
			t.Errorf("Commit(%q): %v", k.String(), err)
		}
	}
}

func testListAndDelete(t *testing.T, s turn.Store) {
	ctx := context.Background()
	a, b := Key(t), Key(t)
	b.Agent = "other"
	must(t, s.Commit(ctx, First(a)), "a")
	must(t, s.Commit(ctx, First(b)), "b")
	list, bad, err := s.List(ctx)
	must(t, err, "List")
	if len(bad) != 0 {
		t.Fatalf("List found unreadable instances in a store without any: %+v", bad)
	}
	found := 0
	for _, in := range list {
		if in.Key == a || in.Key == b {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("List found %d of 2", found)
	}
	must(t, s.Delete(ctx, a), "Delete")
	if _, err := s.Load(ctx, a); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("Load after Delete: %v", err)
	}
	if err := s.Delete(ctx, a); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("second Delete: %v", err)
	}
	load(t, s, b)
	// A deleted instance starts over.
	must(t, s.Commit(ctx, First(a)), "re-create")
}

// Canary is what a corrupter passed to RunUnreadable writes into the
// record it breaks: no reason or error may show it.
const Canary = "s3cret-canary-6d1f"

// RunUnreadable checks that one instance the store cannot read never
// hides the others: List answers the rest and names that one (its key
// when the store can still tell it, its store id always) with a reason
// that shows none of the stored content; Load refuses it as
// domain.ErrCorrupt, and the others load and commit as before. corrupt
// breaks the stored record of k on s's backend (writing Canary in it) so
// that it no longer decodes. It returns what List said of that instance,
// for checks of the store's own.
func RunUnreadable(t *testing.T, s turn.Store, corrupt func(t *testing.T, k turn.InstanceKey)) turn.Unreadable {
	t.Helper()
	ctx := context.Background()
	keys := []turn.InstanceKey{Key(t), Key(t), Key(t)}
	for i := range keys {
		keys[i].Agent = fmt.Sprint("agent-", i)
		must(t, s.Commit(ctx, First(keys[i])), "first commit")
	}
	good, broken := []turn.InstanceKey{keys[0], keys[2]}, keys[1]
	corrupt(t, broken)

	list, bad, err := s.List(ctx)
	must(t, err, "List with one unreadable instance")
	listed := map[turn.InstanceKey]bool{}
	for _, in := range list {
		listed[in.Key] = true
	}
	if !listed[good[0]] || !listed[good[1]] || listed[broken] {
		t.Fatalf("List: %+v; want %v and %v, not %v", list, good[0], good[1], broken)
	}
	if len(bad) != 1 {
		t.Fatalf("List named %d unreadable instances, want 1: %+v", len(bad), bad)
	}
	u := bad[0]
	if u.ID == "" || u.Reason == "" || u.Err == nil || u.Key != (turn.InstanceKey{}) && u.Key != broken {
		t.Fatalf("unreadable %+v, want the id, a reason, the error and the key %v or none", u, broken)
	}
	for what, text := range map[string]string{"reason": u.Reason, "error": u.Err.Error()} {
		if strings.Contains(text, Canary) {
			t.Fatalf("the %s shows the stored content: %s", what, text)
		}
	}
	if _, err := s.Load(ctx, broken); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("Load of the unreadable instance: %v, want ErrCorrupt", err)
	}
	for _, k := range good {
		must(t, s.Commit(ctx, next(load(t, s, k), nil)), "commit to a readable instance")
	}
	return u
}

// testTurnEvents: one turn's events after a seq, while it runs and once it
// has ended; ErrNotFound for an unknown turn or instance.
func testTurnEvents(t *testing.T, s turn.Store) {
	ctx := context.Background()
	k := Key(t)
	must(t, s.Commit(ctx, First(k)), "first commit")
	st := load(t, s, k)
	tr := st.Turns["t1"]
	c := next(st, func(c *turn.Commit) {
		for _, typ := range []string{turn.EvStepStarted, turn.EvToolCalled, turn.EvStepCompleted} {
			c.Events = append(c.Events, turn.TurnEvent{TurnID: "t1", Seq: tr.NextEvent, Type: typ, At: t0})
			tr.NextEvent++
		}
		c.Turn = &tr
	})
	must(t, s.Commit(ctx, c), "events")
	seqs := func(evs []turn.TurnEvent) string {
		var out []string
		for _, e := range evs {
			out = append(out, fmt.Sprintf("%d:%s", e.Seq, e.Type))
		}
		return strings.Join(out, ",")
	}
	got, evs, err := s.TurnEvents(ctx, k, "t1", -1)
	must(t, err, "TurnEvents of a running turn")
	if got.Status != turn.TurnRunning || seqs(evs) != "0:turn.started,1:step.started,2:tool.called,3:step.completed" {
		t.Fatalf("running turn: %s, events %s", got.Status, seqs(evs))
	}
	if _, evs, err = s.TurnEvents(ctx, k, "t1", 2); err != nil || seqs(evs) != "3:step.completed" {
		t.Fatalf("after 2: %v %s", err, seqs(evs))
	}
	st = load(t, s, k)
	tr = st.Turns["t1"]
	tr.Status, tr.Final = turn.TurnCompleted, "bye"
	end := next(st, func(c *turn.Commit) {
		c.Instance.ActiveTurn = ""
		c.Events = []turn.TurnEvent{{TurnID: "t1", Seq: tr.NextEvent, Type: turn.EvTurnCompleted, At: t0}}
		tr.NextEvent++
		c.Turn = &tr
	})
	must(t, s.Commit(ctx, end), "end of the turn")
	got, evs, err = s.TurnEvents(ctx, k, "t1", 3)
	if err != nil || got.Status != turn.TurnCompleted || got.Final != "bye" || seqs(evs) != "4:turn.completed" {
		t.Fatalf("ended turn after 3: %v %s %q %s", err, got.Status, got.Final, seqs(evs))
	}
	if _, evs, err = s.TurnEvents(ctx, k, "t1", 4); err != nil || len(evs) != 0 {
		t.Fatalf("after the last: %v %s", err, seqs(evs))
	}
	if _, _, err := s.TurnEvents(ctx, k, "t9", -1); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown turn: %v, want ErrNotFound", err)
	}
	if _, _, err := s.TurnEvents(ctx, Key(t), "t1", -1); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown instance: %v, want ErrNotFound", err)
	}
}
