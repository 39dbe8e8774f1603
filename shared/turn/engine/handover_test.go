package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn"
)

// TestHandOverMakesProgress: with less time left than a step needs, every
// invocation still runs one step, then hands over with a continuation of
// its own id (cont:<turn>:<step>); the turn ends after as many hops as it
// has steps, and no continuation id repeats (a queue drops a repeated one
// as a duplicate, which would stall the turn).
func TestHandOverMakesProgress(t *testing.T) {
	f := newFixture(t, callTools("echo"), callTools("lookup"), say("done"))
	f.e.Reserve = time.Hour // always short
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := f.e.Queue.(*memQueue)
	if err := f.e.Handle(ctx, f.event("ev-1", `{"type":"user.input","text":"go"}`)); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for hop := 0; ; hop++ {
		if hop > 10 {
			t.Fatal("the turn did not end within 10 hand-overs")
		}
		q.mu.Lock()
		evs := q.evs
		q.evs = nil
		q.mu.Unlock()
		if len(evs) == 0 {
			break
		}
		for _, ev := range evs {
			if seen[ev.ID] || !strings.HasPrefix(ev.ID, "cont:") {
				t.Fatalf("hand-over %d queued %q (seen before: %v)", hop, ev.ID, seen[ev.ID])
			}
			seen[ev.ID] = true
			if err := f.e.Handle(ctx, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := f.store.Load(context.Background(), f.key)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range st.Turns {
		if tn.Status != turn.TurnCompleted || tn.Steps != 3 || tn.Final != "done" {
			t.Fatalf("turn %s: %s after %d steps, %q", tn.ID, tn.Status, tn.Steps, tn.Final)
		}
		for step := 1; step <= 2; step++ {
			if id := fmt.Sprintf("cont:%s:%d", tn.ID, step); !seen[id] {
				t.Fatalf("no continuation %s; queued %v", id, seen)
			}
		}
	}
	if len(seen) != 2 || f.model.count() != 3 || f.tools.ran("echo") != 1 || f.tools.ran("lookup") != 1 {
		t.Fatalf("%d hand-overs, %d model calls, echo %d, lookup %d", len(seen), f.model.count(), f.tools.ran("echo"), f.tools.ran("lookup"))
	}
}
