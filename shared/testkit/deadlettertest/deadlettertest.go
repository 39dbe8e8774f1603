// Package deadlettertest is the conformance suite for domain.DeadLetters:
// the local turn worker's dead-letter directory (shared/local/queueworker)
// and the SQS dead-letter queue (shared/aws/sqsqueue) run the same tests,
// so the console and the CLI see one behaviour whichever backend serves
// them.
//
// The suite asserts through the port, the sentinel errors and the events
// the backend's main queue hands out, never through files or queue
// attributes. It must never need a network service of its own.
package deadlettertest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// Env is one fresh backend: its dead letters, a way to make one, and a
// way to see what its main queue now holds.
type Env struct {
	DeadLetters domain.DeadLetters
	// Bury makes e a dead letter, as the backend does when an event
	// fails every attempt. Successive calls are dead-lettered in order.
	Bury func(t *testing.T, e domain.Event)
	// Queued takes every event the main queue holds now, in delivery
	// order (it may consume them).
	Queued func(t *testing.T) []domain.Event
}

// Run runs the suite; newEnv returns a fresh, empty backend per test.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, env Env)
	}{
		{"ListOldestFirstWithLimit", testList},
		{"Redrive", testRedrive},
		{"RedriveUnknown", testRedriveUnknown},
		{"ConcurrentRedrives", testConcurrentRedrives},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newEnv(t)) })
	}
}

// at is the EnqueuedAt of the suite's events (UTC, whole microseconds:
// every backend keeps it exactly).
var at = time.Date(2026, 2, 3, 4, 5, 6, 7000, time.UTC)

var seq struct {
	sync.Mutex
	n int
}

// Event is a user-input event of instance key (one instance: one SQS
// message group) with an id no other test shares.
func Event(key, text string) domain.Event {
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	return domain.Event{
		ID:          fmt.Sprintf("ev-dlt-%d-%d", time.Now().UnixNano(), n),
		SwarmRef:    domain.ObjectRef{Kind: "Swarm", Name: "support"},
		InstanceKey: key,
		AgentName:   "assistant",
		Input:       `{"type":"user.input","text":"` + text + `"}`,
		Origin:      map[string]any{"via": "deadlettertest"},
		Auth:        domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "demo:user:alice"}},
		Metadata:    map[string]string{"type": "user.input"},
		EnqueuedAt:  at,
	}
}

func list(t *testing.T, env Env, limit int) ([]domain.DeadLetter, int) {
	t.Helper()
	dls, n, err := env.DeadLetters.ListDeadLetters(context.Background(), limit)
	if err != nil {
		t.Fatalf("ListDeadLetters(%d): %v", limit, err)
	}
	return dls, n
}

func eventIDs(dls []domain.DeadLetter) []string {
	out := make([]string, len(dls))
	for i, d := range dls {
		out[i] = d.Event.ID
	}
	return out
}

func testList(t *testing.T, env Env) {
	if dls, n := list(t, env, 10); len(dls) != 0 || n != 0 {
		t.Fatalf("empty backend lists %d dead letters of %d", len(dls), n)
	}
	a, b, c := Event("thread-1", "first"), Event("thread-2", "second"), Event("thread-1", "third")
	for _, e := range []domain.Event{a, b, c} {
		env.Bury(t, e)
	}
	dls, n := list(t, env, 2)
	if got := eventIDs(dls); !reflect.DeepEqual(got, []string{a.ID, b.ID}) || n != 3 {
		t.Fatalf("ListDeadLetters(2) = %v of %d, want %v of 3 (oldest first)", got, n, []string{a.ID, b.ID})
	}
	dls, n = list(t, env, 10)
	if got := eventIDs(dls); !reflect.DeepEqual(got, []string{a.ID, b.ID, c.ID}) || n != 3 {
		t.Fatalf("ListDeadLetters(10) = %v of %d, want %v of 3", got, n, []string{a.ID, b.ID, c.ID})
	}
	seen := map[string]bool{}
	for i, d := range dls {
		want := []domain.Event{a, b, c}[i]
		if !reflect.DeepEqual(d.Event, want) {
			t.Fatalf("dead letter %s holds\n %+v\nwant the event as queued\n %+v", d.ID, d.Event, want)
		}
		if err := domain.ValidateDeadLetterID(d.ID); err != nil {
			t.Fatalf("dead letter id: %v", err)
		}
		if seen[d.ID] {
			t.Fatalf("dead letter id %s listed twice", d.ID)
		}
		seen[d.ID] = true
		if d.At.IsZero() || d.Attempts < 0 {
			t.Fatalf("dead letter %s: At %v, Attempts %d", d.ID, d.At, d.Attempts)
		}
	}
	// A listing hides nothing from the next one.
	if again, _ := list(t, env, 10); !reflect.DeepEqual(eventIDs(again), eventIDs(dls)) {
		t.Fatalf("a second listing shows %v, the first %v", eventIDs(again), eventIDs(dls))
	}
}

func testRedrive(t *testing.T, env Env) {
	ctx := context.Background()
	a, b := Event("thread-1", "first"), Event("thread-1", "second")
	env.Bury(t, a)
	env.Bury(t, b)
	dls, _ := list(t, env, 10)
	if len(dls) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dls))
	}
	if err := env.DeadLetters.RedriveDeadLetter(ctx, dls[0].ID); err != nil {
		t.Fatalf("RedriveDeadLetter: %v", err)
	}
	queued := env.Queued(t)
	if len(queued) != 1 || !reflect.DeepEqual(queued[0], a) {
		t.Fatalf("after the redrive the queue holds %+v, want the event as it was queued: %+v", queued, a)
	}
	left, n := list(t, env, 10)
	if got := eventIDs(left); !reflect.DeepEqual(got, []string{b.ID}) || n != 1 || left[0].ID != dls[1].ID {
		t.Fatalf("after the redrive: %v of %d dead letters, want only %s", got, n, b.ID)
	}
	if err := env.DeadLetters.RedriveDeadLetter(ctx, dls[0].ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("second redrive of one dead letter: %v, want ErrNotFound", err)
	}
}

func testRedriveUnknown(t *testing.T, env Env) {
	ctx := context.Background()
	env.Bury(t, Event("thread-1", "kept"))
	for _, id := range []string{"1700000000000000000-0123456789abcdef.json", "6f2d6a1e-8c4b-4c5e-9a57-3f1d2e4b5a6c"} {
		if err := env.DeadLetters.RedriveDeadLetter(ctx, id); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("RedriveDeadLetter(%q): %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range []string{"", ".", "..", "../queue", "a/b", `a\b`} {
		err := env.DeadLetters.RedriveDeadLetter(ctx, id)
		if !errors.Is(err, domain.ErrInvalidID) && !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("RedriveDeadLetter(%q): %v, want ErrInvalidID or ErrNotFound", id, err)
		}
	}
	if q := env.Queued(t); len(q) != 0 {
		t.Fatalf("redrives of unknown ids queued %+v", q)
	}
	if dls, n := list(t, env, 10); len(dls) != 1 || n != 1 {
		t.Fatalf("redrives of unknown ids left %d dead letters of %d, want the 1", len(dls), n)
	}
}

func testConcurrentRedrives(t *testing.T, env Env) {
	ctx := context.Background()
	e := Event("thread-1", "raced")
	env.Bury(t, e)
	dls, _ := list(t, env, 10)
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	const racers = 4
	errs := make([]error, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			errs[i] = env.DeadLetters.RedriveDeadLetter(ctx, dls[0].ID)
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, domain.ErrNotFound):
			t.Fatalf("racer %d: %v, want nil or ErrNotFound", i, err)
		}
	}
	if ok == 0 {
		t.Fatal("no racer redrove the dead letter")
	}
	queued := env.Queued(t)
	if len(queued) != 1 || !reflect.DeepEqual(queued[0], e) {
		t.Fatalf("after %d concurrent redrives the queue holds %d events (%+v), want the one event once", racers, len(queued), queued)
	}
	if left, n := list(t, env, 10); len(left) != 0 || n != 0 {
		t.Fatalf("after the redrives %d dead letters of %d are left", len(left), n)
	}
}
