package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// Queue is what the queue suite needs: the port plus a way to see what is
// queued, in delivery order.
type Queue interface {
	domain.EventQueue
	List(ctx context.Context) ([]domain.Event, error)
}

// SampleEvent is an auth.granted-like event with every field set.
func SampleEvent(id string) domain.Event {
	return domain.Event{
		ID:          id,
		SwarmRef:    domain.ObjectRef{Kind: "Swarm", Name: "default"},
		InstanceKey: "1700000000.000100",
		AgentName:   "planner",
		Input:       `{"type":"auth.granted","grantId":"grant-0123456789abcdef"}`,
		Origin:      map[string]any{"connector": "slack-main", "thread": map[string]any{"ts": "1"}},
		Auth: domain.TurnAuth{
			Actor:    &domain.Actor{Type: "user", ID: "slack:U1"},
			Subjects: &domain.Subjects{User: "slack:user:T1:U1"},
		},
		Metadata: map[string]string{"type": "auth.granted"},
	}
}

// RunQueue runs the domain.EventQueue conformance suite. newQueue must
// return a fresh, empty queue for each call.
func RunQueue(t *testing.T, newQueue func(t *testing.T) Queue) {
	tests := []struct {
		name string
		run  func(t *testing.T, q Queue)
	}{
		{"RoundTrip", testQueueRoundTrip},
		{"Dedup", testQueueDedup},
		{"DedupRace", testQueueDedupRace},
		{"Order", testQueueOrder},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newQueue(t)) })
	}
}

func listIDs(t *testing.T, q Queue) []string {
	t.Helper()
	events, err := q.List(context.Background())
	noErr(t, err, "List")
	ids := make([]string, len(events))
	for i, e := range events {
		ids[i] = e.ID
	}
	return ids
}

func testQueueRoundTrip(t *testing.T, q Queue) {
	ctx := context.Background()
	e := SampleEvent(NewSessionID())
	before := time.Now()
	noErr(t, q.Enqueue(ctx, e), "Enqueue")
	stamped := SampleEvent(NewSessionID())
	stamped.EnqueuedAt = t0
	noErr(t, q.Enqueue(ctx, stamped), "Enqueue with EnqueuedAt")

	events, err := q.List(ctx)
	noErr(t, err, "List")
	if len(events) != 2 {
		t.Fatalf("List: %d events, want 2", len(events))
	}
	got := events[0]
	if got.EnqueuedAt.IsZero() || got.EnqueuedAt.Before(before.Add(-time.Second)) {
		t.Fatalf("EnqueuedAt %v not set on enqueue", got.EnqueuedAt)
	}
	got.EnqueuedAt = time.Time{}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("event differs\n got: %+v\nwant: %+v", got, e)
	}
	if !events[1].EnqueuedAt.Equal(t0) {
		t.Fatalf("a set EnqueuedAt was changed to %v", events[1].EnqueuedAt)
	}
}

func testQueueDedup(t *testing.T, q Queue) {
	ctx := context.Background()
	e := SampleEvent(NewSessionID())
	noErr(t, q.Enqueue(ctx, e), "Enqueue")
	dup := e
	dup.Input = "second"
	noErr(t, q.Enqueue(ctx, dup), "Enqueue of the same id")
	events, err := q.List(ctx)
	noErr(t, err, "List")
	if len(events) != 1 {
		t.Fatalf("same id queued %d times", len(events))
	}
	if events[0].Input != e.Input {
		t.Fatal("a duplicate enqueue replaced the first event")
	}
}

func testQueueDedupRace(t *testing.T, q Queue) {
	ctx := context.Background()
	id := NewSessionID()
	errs := race(20, func(i int) error {
		e := SampleEvent(id)
		e.Input = fmt.Sprint("racer-", i)
		return q.Enqueue(ctx, e)
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("racer %d: %v", i, err)
		}
	}
	if ids := listIDs(t, q); len(ids) != 1 || ids[0] != id {
		t.Fatalf("after 20 concurrent enqueues of one id: %v", ids)
	}
}

func testQueueOrder(t *testing.T, q Queue) {
	ctx := context.Background()
	var want []string
	for i := range 12 {
		id := fmt.Sprintf("event-%02d-%s", 11-i, randomHex(4)) // ids sort opposite to enqueue order
		want = append(want, id)
		noErr(t, q.Enqueue(ctx, SampleEvent(id)), "Enqueue")
	}
	if got := listIDs(t, q); !reflect.DeepEqual(got, want) {
		t.Fatalf("order\n got: %v\nwant: %v", got, want)
	}
}

// randomHex is n random bytes in hex, to keep event ids of one run apart.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}
