package queueworker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/filequeue"
	"github.com/agentauth/agentauth/shared/turn"
)

func keyOf(ev domain.Event) turn.InstanceKey {
	return turn.InstanceKey{Swarm: ev.SwarmRef.Name, Key: ev.InstanceKey, Agent: ev.AgentName}
}

func event(inst string, n int) domain.Event {
	return domain.Event{ID: fmt.Sprintf("%s-%d", inst, n), SwarmRef: domain.ObjectRef{Name: "s"}, InstanceKey: inst, AgentName: "a", Input: "x"}
}

// TestOrderPerInstanceAndAck: one instance's events are handled in queue
// order, each once, and leave the queue after; instances run at once.
func TestOrderPerInstanceAndAck(t *testing.T) {
	dir := t.TempDir()
	q, err := filequeue.New(filepath.Join(dir, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	for n := range 5 {
		for _, inst := range []string{"i1", "i2", "i3"} {
			if err := q.Enqueue(context.Background(), event(inst, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var mu sync.Mutex
	seen := map[string][]string{}
	inFlight, maxInFlight := map[string]int{}, 0
	w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, Poll: 10 * time.Millisecond, Handle: func(_ context.Context, ev domain.Event) error {
		mu.Lock()
		inFlight[ev.InstanceKey]++
		if inFlight[ev.InstanceKey] > 1 {
			t.Errorf("instance %s ran two events at once", ev.InstanceKey)
		}
		total := 0
		for _, n := range inFlight {
			total += n
		}
		maxInFlight = max(maxInFlight, total)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		seen[ev.InstanceKey] = append(seen[ev.InstanceKey], ev.ID)
		inFlight[ev.InstanceKey]--
		mu.Unlock()
		return nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	for {
		left, _ := q.List(ctx)
		if len(left) == 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	for _, inst := range []string{"i1", "i2", "i3"} {
		want := []string{inst + "-0", inst + "-1", inst + "-2", inst + "-3", inst + "-4"}
		if strings.Join(seen[inst], ",") != strings.Join(want, ",") {
			t.Errorf("%s handled %v", inst, seen[inst])
		}
	}
	if maxInFlight < 2 {
		t.Errorf("instances never ran at once (max %d in flight)", maxInFlight)
	}
}

// TestFailuresRetryThenDeadLetter: a failing event holds its instance's
// later events (order), is retried, and after the last attempt is kept in
// the dead letters and the instance goes on.
func TestFailuresRetryThenDeadLetter(t *testing.T) {
	dir := t.TempDir()
	q, _ := filequeue.New(filepath.Join(dir, "queue"))
	ctx := context.Background()
	for n := range 2 {
		_ = q.Enqueue(ctx, event("i1", n))
	}
	var handled []string
	w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, MaxAttempts: 3, Handle: func(_ context.Context, ev domain.Event) error {
		if ev.ID == "i1-0" {
			return errors.New("model unreachable")
		}
		handled = append(handled, ev.ID)
		return nil
	}}
	for range 3 {
		if err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		if len(handled) > 0 && len(w.attempts) > 0 {
			t.Fatal("a later event ran while an earlier one of its instance was failing")
		}
		w.mu.Lock()
		for id := range w.notBefore {
			w.notBefore[id] = time.Time{} // skip the backoff
		}
		w.mu.Unlock()
	}
	if strings.Join(handled, ",") != "i1-1" {
		t.Fatalf("handled %v", handled)
	}
	dead, _ := os.ReadDir(filepath.Join(dir, "deadletter"))
	left, _ := q.List(ctx)
	if len(dead) != 1 || len(left) != 0 {
		t.Fatalf("%d dead letters, %d left in the queue", len(dead), len(left))
	}
	b, _ := os.ReadFile(filepath.Join(dir, "deadletter", dead[0].Name()))
	if !strings.Contains(string(b), `"i1-0"`) || !strings.Contains(string(b), "model unreachable") {
		t.Fatalf("dead letter %s", b)
	}
}

// TestTwoWorkersOneHome: the instance lock keeps two servers' workers from
// running one instance at once.
func TestTwoWorkersOneHome(t *testing.T) {
	dir := t.TempDir()
	q, _ := filequeue.New(filepath.Join(dir, "queue"))
	ctx := context.Background()
	_ = q.Enqueue(ctx, event("i1", 0))
	release := make(chan struct{})
	var calls sync.WaitGroup
	calls.Add(1)
	slow := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, Handle: func(context.Context, domain.Event) error { calls.Done(); <-release; return nil }}
	other := 0
	fast := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, Handle: func(context.Context, domain.Event) error { other++; return nil }}
	go slow.RunOnce(ctx)
	calls.Wait()
	if err := fast.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	if other != 0 {
		t.Fatal("a second worker ran the instance while the first held it")
	}
}
