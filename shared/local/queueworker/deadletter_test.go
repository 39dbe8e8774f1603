package queueworker

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/local/filequeue"
)

// deleteFails is the file queue with deletes that fail while failing is
// set, and a count of the deletes asked for.
type deleteFails struct {
	*filequeue.Queue
	mu      sync.Mutex
	failing bool
	deletes map[string]int
}

func (d *deleteFails) Delete(ctx context.Context, id string) error {
	d.mu.Lock()
	d.deletes[id]++
	failing := d.failing
	d.mu.Unlock()
	if failing {
		return errors.New("disk full")
	}
	return d.Queue.Delete(ctx, id)
}

func (d *deleteFails) set(failing bool) {
	d.mu.Lock()
	d.failing = failing
	d.mu.Unlock()
}

func queuedIDs(t *testing.T, q Queue) []string {
	t.Helper()
	evs, err := q.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	return ids
}

// TestEventStaysQueuedUntilItsDeadLetterIsWritten: an event that failed
// every attempt leaves the queue only once its dead letter is written. A
// dead letter that cannot be written, or a delete that fails after it,
// keeps the event queued (never acknowledged) and holds its instance's
// later events; after the backoff the failed step is tried again — not
// the handler, which would cost another model call — and no second dead
// letter is written.
func TestEventStaysQueuedUntilItsDeadLetterIsWritten(t *testing.T) {
	for _, tc := range []struct {
		name string
		// letterFails and deleteFails: the failures, each for the first
		// two tries of its step.
		letterFails, deleteFails bool
	}{
		{"dead letter not written", true, false},
		{"delete after the dead letter fails", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			fq, err := filequeue.New(filepath.Join(dir, "queue"))
			if err != nil {
				t.Fatal(err)
			}
			q := &deleteFails{Queue: fq, deletes: map[string]int{}}
			for n := range 2 {
				if err := fq.Enqueue(ctx, event("i1", n)); err != nil {
					t.Fatal(err)
				}
			}
			clock := newClock()
			var handled []string
			letterTries := 0
			w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, MaxAttempts: 2, now: clock.now,
				Handle: func(_ context.Context, ev domain.Event) error {
					handled = append(handled, ev.ID)
					if ev.ID == "i1-0" {
						return errors.New("model unreachable")
					}
					return nil
				},
				createFile: func(path string, data []byte, perm fs.FileMode) error {
					letterTries++
					if tc.letterFails && letterTries <= 2 {
						return errors.New("disk full")
					}
					return atomicfile.CreateExclusive(path, data, perm)
				},
			}
			q.set(tc.deleteFails)
			run := func() {
				t.Helper()
				if err := w.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
			run()
			clock.advance(time.Minute)
			run() // the last attempt fails; the first try of its step too
			for try := 2; try <= 3; try++ {
				if got := queuedIDs(t, q); !slices.Equal(got, []string{"i1-0", "i1-1"}) {
					t.Fatalf("queued %v: the event left without its dead letter, or its instance went on", got)
				}
				run() // within the backoff: nothing is tried
				if try == 3 {
					q.set(false)
				}
				clock.advance(time.Minute)
				run() // try: fails (2), succeeds (3)
			}
			if got := strings.Join(handled, ","); got != "i1-0,i1-0,i1-1" {
				t.Fatalf("handled %s, want i1-0 twice (its attempts) and then i1-1", got)
			}
			if got := queuedIDs(t, q); len(got) != 0 {
				t.Fatalf("queued after the dead letter: %v", got)
			}
			dead, _ := os.ReadDir(filepath.Join(dir, "deadletter"))
			if len(dead) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dead))
			}
			wantDeletes := 1
			if tc.deleteFails {
				wantDeletes = 3
			}
			if got := q.deletes["i1-0"]; got != wantDeletes {
				t.Fatalf("i1-0 deleted %d times, want %d (deleted before its dead letter was written?)", got, wantDeletes)
			}
		})
	}
}

// TestDeadLettersAtOneClockReading: events dead-lettered at the same
// instant (a coarse clock, instances failing together) each keep their
// dead letter.
func TestDeadLettersAtOneClockReading(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q, err := filequeue.New(filepath.Join(dir, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	for _, inst := range []string{"i1", "i2", "i3"} {
		if err := q.Enqueue(ctx, event(inst, 0)); err != nil {
			t.Fatal(err)
		}
	}
	clock := newClock() // never moves
	w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, MaxAttempts: 1, now: clock.now,
		Handle: func(context.Context, domain.Event) error { return errors.New("model unreachable") }}
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	// The same event dead-lettered again at the same instant (queued
	// again past the dedup window) keeps its first letter too.
	w.forget("i1-0")
	if err := w.deadLetter(event("i1", 0), errors.New("again"), 1); err != nil {
		t.Fatal(err)
	}
	dead, _ := os.ReadDir(filepath.Join(dir, "deadletter"))
	var ids []string
	for _, d := range dead {
		b, err := os.ReadFile(filepath.Join(dir, "deadletter", d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"i1-0", "i2-0", "i3-0"} {
			if strings.Contains(string(b), `"`+id+`"`) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	if want := []string{"i1-0", "i1-0", "i2-0", "i3-0"}; !slices.Equal(ids, want) {
		t.Fatalf("dead letters for %v, want %v", ids, want)
	}
	if got := queuedIDs(t, q); len(got) != 0 {
		t.Fatalf("queued %v", got)
	}
}
