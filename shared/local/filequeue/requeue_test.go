package filequeue

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// TestRequeueAfterAck: an acknowledged ID is deduplicated by Enqueue for
// the window, but Requeue (a dead letter's redrive) queues it again, once
// however often it is called, and the tombstone keeps working after the
// requeued event is acknowledged in its turn.
func TestRequeueAfterAck(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, filepath.Join(t.TempDir(), "queue"))
	e := storetest.SampleEvent("ev-1")
	if err := q.Enqueue(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := q.Delete(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, e); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, q); len(got) != 0 {
		t.Fatalf("Enqueue within the window queued %v", got)
	}
	for range 3 {
		if err := q.Requeue(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(t, q); !slices.Equal(got, []string{"ev-1"}) {
		t.Fatalf("after Requeue: %v, want ev-1 once", got)
	}
	if err := q.Delete(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, e); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, q); len(got) != 0 {
		t.Fatalf("the requeued event's ack does not deduplicate: %v", got)
	}
}
