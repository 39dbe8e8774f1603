package embedded

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/queueworker"
	"github.com/agentauth/agentauth/shared/turn"
)

// TestDeadLettersAreTheWorkers: the home's DeadLetters are those a turn
// worker on WorkerDir writes, and a redrive puts the event back on the
// home's queue.
func TestDeadLettersAreTheWorkers(t *testing.T) {
	ctx := context.Background()
	home := filepath.Join(t.TempDir(), "home")
	b, err := Open(ctx, home, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if b.WorkerDir != filepath.Join(home, "worker") {
		t.Fatalf("WorkerDir %s", b.WorkerDir)
	}
	ev := domain.Event{ID: "ev-1", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "s"}, InstanceKey: "k", AgentName: "a", Input: "hi"}
	if err := b.Queue.Enqueue(ctx, ev); err != nil {
		t.Fatal(err)
	}
	w := &queueworker.Worker{Queue: b.Queue, Dir: b.WorkerDir, MaxAttempts: 1,
		KeyOf:  func(e domain.Event) turn.InstanceKey { return turn.InstanceKey{Key: e.InstanceKey} },
		Handle: func(context.Context, domain.Event) error { return errors.New("model unreachable") }}
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	dls, n, err := b.DeadLetters.ListDeadLetters(ctx, 10)
	if err != nil || n != 1 || len(dls) != 1 || dls[0].Event.ID != "ev-1" {
		t.Fatalf("ListDeadLetters: %+v of %d, %v", dls, n, err)
	}
	if err := b.DeadLetters.RedriveDeadLetter(ctx, dls[0].ID); err != nil {
		t.Fatal(err)
	}
	if evs, err := b.Queue.List(ctx); err != nil || len(evs) != 1 || evs[0].ID != "ev-1" {
		t.Fatalf("queued after the redrive: %+v, %v", evs, err)
	}
}
