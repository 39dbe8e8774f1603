package sqsqueue

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// The SQS suite runs against the fake (queue_test.go) and against the
// emulator (integration_test.go). storetest.RunQueue needs a List that
// shows what is queued without consuming it; SQS has no such read
// (receiving hides a message, counts towards the dead-letter
// maxReceiveCount and locks its group, so past the first batch of a group
// nothing is visible until it is deleted). drainingQueue lists by receiving
// and acknowledging everything, which RunQueue allows because each of its
// cases lists a fresh queue once; the SQS-specific cases below cover what
// List cannot: group locking, redelivery, dedup after delete.

// drainingQueue adapts a Queue to storetest.Queue.
type drainingQueue struct {
	*Queue
	wait time.Duration
}

func (d drainingQueue) List(ctx context.Context) ([]domain.Event, error) {
	ds, err := drain(ctx, d.Queue, d.wait)
	events := make([]domain.Event, len(ds))
	for i, x := range ds {
		events[i] = x.Event
	}
	return events, err
}

// drain receives and acknowledges until a receive comes back empty, and
// returns the deliveries in the order they came.
func drain(ctx context.Context, q *Queue, wait time.Duration) ([]Delivery, error) {
	var all []Delivery
	for range 1000 {
		ds, err := q.Receive(ctx, MaxReceiveMessages, wait)
		if err != nil {
			return all, err
		}
		if len(ds) == 0 {
			return all, nil
		}
		for _, d := range ds {
			if err := q.Ack(ctx, d); err != nil {
				return all, err
			}
		}
		all = append(all, ds...)
	}
	return all, fmt.Errorf("queue never drained")
}

type suiteEnv struct {
	// newQueue returns an empty queue of its own.
	newQueue func(t *testing.T) *Queue
	// wait is how long a receive waits for a message that should come.
	wait time.Duration
}

func runSQSSuite(t *testing.T, env suiteEnv) {
	t.Run("Conformance", func(t *testing.T) {
		storetest.RunQueue(t, func(t *testing.T) storetest.Queue {
			return drainingQueue{Queue: env.newQueue(t), wait: env.wait}
		})
	})
	tests := []struct {
		name string
		run  func(t *testing.T, env suiteEnv, q *Queue)
	}{
		{"DeliveredAsSent", testDeliveredAsSent},
		{"OrderPerGroupTwoGroupsInterleaved", testOrderPerGroup},
		{"GroupLockedWhileInFlight", testGroupLock},
		{"DedupSequential", testDedupSequential},
		{"DedupConcurrent", testDedupConcurrent},
		{"DedupAfterAck", testDedupAfterAck},
		{"HashedIDs", testHashedIDs},
		{"BodyCharacters", testBodyCharacters},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, env, env.newQueue(t)) })
	}
}

var suiteT0 = time.Date(2026, 2, 3, 4, 5, 6, 789000000, time.UTC)

// grantedEvent is an auth.granted event as the OAuth core's emitGranted
// builds it, for instance key and id.
func grantedEvent(instanceKey, id string) domain.Event {
	return domain.Event{
		ID:          id,
		SwarmRef:    domain.ObjectRef{Kind: "Swarm", Name: "support"},
		InstanceKey: instanceKey,
		AgentName:   "planner",
		Input:       `{"type":"auth.granted","oauthAppRef":{"kind":"OAuthApp","name":"slack-bot"},"provider":"slack","subject":"slack:user:T1:U1","scopesGranted":["chat:write"],"grantId":"grant-0123456789abcdef"}`,
		Origin:      map[string]any{"connector": "slack-main", "channel": "C42", "thread": map[string]any{"ts": "1700000000.000100"}, "n": 3.5, "ok": true},
		Auth: domain.TurnAuth{
			Actor:    &domain.Actor{Type: "user", ID: "slack:U1", Display: "Ada"},
			Subjects: &domain.Subjects{Global: "slack:team:T1", User: "slack:user:T1:U1"},
		},
		Metadata:   map[string]string{"eventType": "auth.granted", "authSessionId": id},
		EnqueuedAt: suiteT0,
	}
}

func mustEnqueue(t *testing.T, q *Queue, e domain.Event) {
	t.Helper()
	if err := q.Enqueue(context.Background(), e); err != nil {
		t.Fatalf("Enqueue %s: %v", e.ID, err)
	}
}

func mustDrain(t *testing.T, env suiteEnv, q *Queue) []Delivery {
	t.Helper()
	ds, err := drain(context.Background(), q, env.wait)
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	return ds
}

func testDeliveredAsSent(t *testing.T, env suiteEnv, q *Queue) {
	ctx := context.Background()
	e := grantedEvent("1700000000.000100", storetest.NewSessionID())
	mustEnqueue(t, q, e)
	ds, err := q.Receive(ctx, MaxReceiveMessages, env.wait)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %d deliveries, %v", len(ds), err)
	}
	d := ds[0]
	if !reflect.DeepEqual(d.Event, e) {
		t.Fatalf("delivered event differs\n got: %#v\nwant: %#v", d.Event, e)
	}
	if d.GroupID != "Swarm/support/1700000000.000100/planner" || d.GroupID != GroupID(e) {
		t.Fatalf("GroupID %q", d.GroupID)
	}
	if d.EventType != "auth.granted" || d.ReceiveCount != 1 || d.ReceiptHandle == "" || d.MessageID == "" {
		t.Fatalf("delivery %+v", d)
	}
	if err := q.Ack(ctx, d); err != nil {
		t.Fatal(err)
	}
	if rest := mustDrain(t, env, q); len(rest) != 0 {
		t.Fatalf("acknowledged event delivered again: %d", len(rest))
	}
}

func testOrderPerGroup(t *testing.T, env suiteEnv, q *Queue) {
	ctx := context.Background()
	run := storetest.NewSessionID()
	want := map[string][]string{}
	for i := range 5 {
		for _, inst := range []string{"A", "B"} {
			e := grantedEvent(inst+"-"+run, fmt.Sprintf("%s-%s-%d", run, inst, i))
			want[GroupID(e)] = append(want[GroupID(e)], e.ID)
			mustEnqueue(t, q, e)
		}
	}
	// The heads of both groups are available at once: instances run in
	// parallel.
	first, err := q.Receive(ctx, MaxReceiveMessages, env.wait)
	if err != nil {
		t.Fatal(err)
	}
	heads := map[string]string{}
	for _, d := range first {
		if _, ok := heads[d.GroupID]; !ok {
			heads[d.GroupID] = d.Event.ID
		}
	}
	for g, ids := range want {
		if heads[g] != ids[0] {
			t.Fatalf("first receive: group %s starts with %q, want %q (batch of %d)", g, heads[g], ids[0], len(first))
		}
	}
	got := map[string][]string{}
	for _, d := range first {
		if err := q.Ack(ctx, d); err != nil {
			t.Fatal(err)
		}
		got[d.GroupID] = append(got[d.GroupID], d.Event.ID)
	}
	for _, d := range mustDrain(t, env, q) {
		if d.GroupID != GroupID(d.Event) {
			t.Fatalf("event %s in group %s", d.Event.ID, d.GroupID)
		}
		got[d.GroupID] = append(got[d.GroupID], d.Event.ID)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("per-group order\n got: %v\nwant: %v", got, want)
	}
}

func testGroupLock(t *testing.T, env suiteEnv, q *Queue) {
	ctx := context.Background()
	run := storetest.NewSessionID()
	a0, a1 := grantedEvent("A-"+run, run+"-a0"), grantedEvent("A-"+run, run+"-a1")
	b0 := grantedEvent("B-"+run, run+"-b0")
	for _, e := range []domain.Event{a0, a1, b0} {
		mustEnqueue(t, q, e)
	}
	ds, err := q.Receive(ctx, 1, env.wait)
	if err != nil || len(ds) != 1 || ds[0].Event.ID != a0.ID {
		t.Fatalf("first receive: %v %v", ids(ds), err)
	}
	held := ds[0]
	// While a0 is in flight its group is closed; the other group is not.
	ds, err = q.Receive(ctx, MaxReceiveMessages, env.wait)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(ds); !reflect.DeepEqual(got, []string{b0.ID}) {
		t.Fatalf("receive while %s is in flight: %v, want only %s", a0.ID, got, b0.ID)
	}
	for _, d := range append(ds, held) {
		if err := q.Ack(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(mustDrain(t, env, q)); !reflect.DeepEqual(got, []string{a1.ID}) {
		t.Fatalf("after ack: %v, want %s", got, a1.ID)
	}
}

func ids(ds []Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.Event.ID
	}
	return out
}

func testDedupSequential(t *testing.T, env suiteEnv, q *Queue) {
	e := grantedEvent("1", storetest.NewSessionID())
	mustEnqueue(t, q, e)
	replay := e
	replay.Input, replay.EnqueuedAt = "replayed callback", time.Time{}
	mustEnqueue(t, q, replay)
	ds := mustDrain(t, env, q)
	if len(ds) != 1 || ds[0].Event.Input != e.Input {
		t.Fatalf("same id enqueued twice: delivered %d, first input kept: %v", len(ds), len(ds) == 1 && ds[0].Event.Input == e.Input)
	}
}

func testDedupConcurrent(t *testing.T, env suiteEnv, q *Queue) {
	id := storetest.NewSessionID()
	var wg sync.WaitGroup
	errs := make([]error, 10)
	start := make(chan struct{})
	for i := range errs {
		wg.Go(func() {
			<-start
			e := grantedEvent("1", id)
			e.Input = fmt.Sprint("racer-", i)
			errs[i] = q.Enqueue(context.Background(), e)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("racer %d: %v", i, err)
		}
	}
	if got := ids(mustDrain(t, env, q)); !reflect.DeepEqual(got, []string{id}) {
		t.Fatalf("10 concurrent enqueues of one id delivered %v", got)
	}
}

func testDedupAfterAck(t *testing.T, env suiteEnv, q *Queue) {
	e := grantedEvent("1", storetest.NewSessionID())
	mustEnqueue(t, q, e)
	if got := mustDrain(t, env, q); len(got) != 1 {
		t.Fatalf("delivered %d", len(got))
	}
	// The sweep re-sends an event whose first send did arrive: within the
	// deduplication window the agent is not resumed again.
	mustEnqueue(t, q, e)
	if got := mustDrain(t, env, q); len(got) != 0 {
		t.Fatalf("re-sent event delivered again after ack: %v", ids(got))
	}
}

func testHashedIDs(t *testing.T, env suiteEnv, q *Queue) {
	run := storetest.NewSessionID()
	e := grantedEvent("thread é "+run+strings.Repeat("x", 150), "event id with spaces é "+run+strings.Repeat("y", 200))
	e.AgentName = "agent/with/slashes"
	group, dedup := GroupID(e), DeduplicationID(e.ID)
	if !strings.HasPrefix(group, "~") || !strings.HasPrefix(dedup, "~") {
		t.Fatalf("expected hashed ids, got %q %q", group, dedup)
	}
	mustEnqueue(t, q, e)
	mustEnqueue(t, q, e)
	ds := mustDrain(t, env, q)
	if len(ds) != 1 || ds[0].GroupID != group || !reflect.DeepEqual(ds[0].Event, e) {
		t.Fatalf("delivered %d; group %q want %q", len(ds), firstGroup(ds), group)
	}
}

func firstGroup(ds []Delivery) string {
	if len(ds) == 0 {
		return ""
	}
	return ds[0].GroupID
}

func testBodyCharacters(t *testing.T, env suiteEnv, q *Queue) {
	e := grantedEvent("1", storetest.NewSessionID())
	// Control characters, the two non-characters SQS refuses, a surrogate
	// pair's worth of emoji and a line separator.
	e.Input = "nul\x00 bell\x07 fffe\uFFFE ffff\uFFFF emoji\U0001F600 ls\u2028 <&>"
	e.Origin = map[string]any{"k\uFFFE": "v\x01"}
	mustEnqueue(t, q, e)
	ds := mustDrain(t, env, q)
	if len(ds) != 1 || !reflect.DeepEqual(ds[0].Event, e) {
		t.Fatalf("delivered %d; event %#v", len(ds), ds)
	}
}
