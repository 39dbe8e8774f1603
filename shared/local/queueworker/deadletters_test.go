package queueworker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/filequeue"
	"github.com/agentauth/agentauth/shared/testkit/deadlettertest"
)

// localDeadLetters is a worker's home: its file queue, the worker (whose
// handler always fails) and its dead letters.
type localDeadLetters struct {
	dir   string
	queue *filequeue.Queue
	dls   *DeadLetters
	clock *clock
}

func newLocalDeadLetters(t *testing.T) *localDeadLetters {
	t.Helper()
	dir := t.TempDir()
	q, err := filequeue.New(filepath.Join(dir, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	dls, err := NewDeadLetters(dir, q)
	if err != nil {
		t.Fatal(err)
	}
	return &localDeadLetters{dir: dir, queue: q, dls: dls, clock: newClock()}
}

// bury dead-letters e the way the worker does: queued, failed every
// attempt (here one), and acknowledged on the queue — so its id is
// deduplicated by the queue for the window, which a redrive must get past.
func (l *localDeadLetters) bury(t *testing.T, e domain.Event) {
	t.Helper()
	ctx := context.Background()
	if err := l.queue.Enqueue(ctx, e); err != nil {
		t.Fatal(err)
	}
	l.clock.advance(time.Second)
	w := &Worker{Queue: l.queue, KeyOf: keyOf, Dir: l.dir, MaxAttempts: 1, now: l.clock.now,
		Handle: func(context.Context, domain.Event) error { return errors.New("model unreachable") }}
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if evs, _ := l.queue.List(ctx); len(evs) != 0 {
		t.Fatalf("the worker left %d events queued", len(evs))
	}
}

// queued takes what the queue holds (acknowledging it, as the worker does).
func (l *localDeadLetters) queued(t *testing.T) []domain.Event {
	t.Helper()
	ctx := context.Background()
	evs, err := l.queue.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if err := l.queue.Delete(ctx, e.ID); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

func TestDeadLettersConformance(t *testing.T) {
	deadlettertest.Run(t, func(t *testing.T) deadlettertest.Env {
		l := newLocalDeadLetters(t)
		return deadlettertest.Env{DeadLetters: l.dls, Bury: l.bury, Queued: l.queued}
	})
}

// TestDeadLetterRecordsTheFailure: a listed dead letter says why and after
// how many attempts the worker gave up, and when.
func TestDeadLetterRecordsTheFailure(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q, err := filequeue.New(filepath.Join(dir, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, event("i1", 0)); err != nil {
		t.Fatal(err)
	}
	clock := newClock()
	w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, MaxAttempts: 2, now: clock.now,
		Handle: func(context.Context, domain.Event) error { return errors.New("model unreachable") }}
	for range 2 {
		if err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		clock.advance(time.Minute)
	}
	dls, err := NewDeadLetters(dir, q)
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := dls.ListDeadLetters(ctx, 10)
	if err != nil || n != 1 || len(got) != 1 {
		t.Fatalf("ListDeadLetters: %+v of %d, %v", got, n, err)
	}
	d := got[0]
	if d.Event.ID != "i1-0" || d.Error != "model unreachable" || d.Attempts != 2 || !d.At.Equal(clock.now().Add(-time.Minute)) {
		t.Fatalf("dead letter %+v", d)
	}
}

// TestDeadLettersOnDisk: ids that would leave the directory are refused
// before any file is touched; a file that is not a dead letter (a link, a
// temporary file, the lock) is never listed; a corrupt one is listed with
// the reason and refused by a redrive; an older version's file (no
// attempts) reads as unknown attempts.
func TestDeadLettersOnDisk(t *testing.T) {
	ctx := context.Background()
	l := newLocalDeadLetters(t)
	// Nothing dead-lettered yet: no directory.
	if got, n, err := l.dls.ListDeadLetters(ctx, 10); err != nil || len(got) != 0 || n != 0 {
		t.Fatalf("empty: %v %d %v", got, n, err)
	}
	if err := l.dls.RedriveDeadLetter(ctx, "1-00.json"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("redrive without a directory: %v", err)
	}
	dir := filepath.Join(l.dir, DeadLetterDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := `{"event":{"id":"ev-old","swarmRef":{"kind":"Swarm","name":"s"},"instanceKey":"k","agentName":"a","input":"x","auth":{},"enqueuedAt":"2026-01-01T00:00:00Z"},"error":"boom","at":"2026-01-01T00:00:01Z"}`
	write("1767225601000000000-00000000000000aa.json", old)
	write("1767225602000000000-00000000000000bb.json", `{"event":`)
	write(".redrive.lock", "")
	write("notes.txt", old)
	outside := filepath.Join(t.TempDir(), "planted.json")
	if err := os.WriteFile(outside, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "1767225603000000000-00000000000000cc.json")); err != nil {
		t.Fatal(err)
	}
	got, n, err := l.dls.ListDeadLetters(ctx, 10)
	if err != nil || n != 2 || len(got) != 2 {
		t.Fatalf("ListDeadLetters: %+v of %d, %v", got, n, err)
	}
	if got[0].Event.ID != "ev-old" || got[0].Attempts != 0 || got[0].Error != "boom" {
		t.Fatalf("older version's dead letter: %+v", got[0])
	}
	if got[1].Event.ID != "" || !strings.Contains(got[1].Error, "unreadable") || got[1].At.IsZero() {
		t.Fatalf("corrupt dead letter: %+v", got[1])
	}
	if err := l.dls.RedriveDeadLetter(ctx, got[1].ID); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("redrive of a corrupt dead letter: %v, want ErrCorrupt", err)
	}
	for _, id := range []string{"../queue", "..", ".", "a/b.json", ".redrive.lock", "notes.txt", "1767225603000000000-00000000000000cc.json"} {
		if err := l.dls.RedriveDeadLetter(ctx, id); err == nil {
			t.Fatalf("RedriveDeadLetter(%q) redrove", id)
		}
	}
	if evs, _ := l.queue.List(ctx); len(evs) != 0 {
		t.Fatalf("refused redrives queued %+v", evs)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatalf("the linked file's target: %v", err)
	}
}
