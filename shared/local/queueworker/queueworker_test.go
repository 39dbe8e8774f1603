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
	clock := newClock()
	w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, MaxAttempts: 3, now: clock.now, Handle: func(_ context.Context, ev domain.Event) error {
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
		if len(handled) > 0 && len(w.failing) > 0 {
			t.Fatal("a later event ran while an earlier one of its instance was failing")
		}
		clock.advance(time.Minute) // past the backoff
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
	slowDone := make(chan struct{})
	go func() { _ = slow.RunOnce(ctx); close(slowDone) }()
	calls.Wait()
	if err := fast.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	<-slowDone // its delete must end before the temporary directory goes
	if other != 0 {
		t.Fatal("a second worker ran the instance while the first held it")
	}
}

// listed is the file queue telling each scan's end on scans.
type listed struct {
	*filequeue.Queue
	scans chan struct{}
}

func (l listed) List(ctx context.Context) ([]domain.Event, error) {
	evs, err := l.Queue.List(ctx)
	select {
	case l.scans <- struct{}{}:
	default:
	}
	return evs, err
}

// TestWakeEndsThePause: with the queue's Wake, an event queued while the
// worker pauses is taken at once; without it, at the next poll (an hour
// here).
func TestWakeEndsThePause(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wake  bool
		taken bool // within the wait below
	}{
		{"woken: taken at once", true, true},
		{"polling only: waits for the next poll", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fq, _ := filequeue.New(filepath.Join(dir, "queue"))
			q := listed{fq, make(chan struct{}, 1)}
			handled := make(chan string, 1)
			w := &Worker{Queue: q, KeyOf: keyOf, Dir: dir, Poll: time.Hour,
				Handle: func(_ context.Context, ev domain.Event) error { handled <- ev.ID; return nil }}
			if tc.wake {
				w.Wake = fq.Wake()
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { w.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			<-q.scans // the first scan found nothing: the worker pauses
			if err := fq.Enqueue(ctx, event("i1", 0)); err != nil {
				t.Fatal(err)
			}
			wait := 500 * time.Millisecond
			if tc.taken {
				wait = 5 * time.Second
			}
			select {
			case id := <-handled:
				if !tc.taken {
					t.Fatalf("%s taken before the next poll", id)
				}
			case <-time.After(wait):
				if tc.taken {
					t.Fatal("the queued event was not taken while the worker paused")
				}
			}
		})
	}
}

func (w *Worker) wasMissed(k turn.InstanceKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.missed[k]
}

// TestEventQueuedDuringItsInstancesDrain: an event queued for an instance
// while its events are being handled — the scan it wakes finds the
// instance busy — is taken when that drain ends, not at the next poll.
func TestEventQueuedDuringItsInstancesDrain(t *testing.T) {
	dir := t.TempDir()
	fq, _ := filequeue.New(filepath.Join(dir, "queue"))
	q := listed{fq, make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	handled := make(chan string, 2)
	var w *Worker
	w = &Worker{Queue: q, KeyOf: keyOf, Dir: dir, Poll: time.Hour, Wake: fq.Wake(), Handle: func(_ context.Context, ev domain.Event) error {
		if ev.ID == "i1-0" {
			// As a turn that parks while its consent completes: the
			// callback queues the next event of the instance mid-drain,
			// and the scan that wakes finds the instance busy.
			<-q.scans // (the scan that found i1-0)
			if err := fq.Enqueue(ctx, event("i1", 1)); err != nil {
				t.Error(err)
			}
			for !w.wasMissed(keyOf(ev)) { // the woken scan found i1 busy
				time.Sleep(time.Millisecond)
			}
		}
		handled <- ev.ID
		return nil
	}}
	if err := fq.Enqueue(ctx, event("i1", 0)); err != nil {
		t.Fatal(err)
	}
	<-fq.Wake() // no scan yet: the signal of the first event is not needed
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for _, want := range []string{"i1-0", "i1-1"} {
		select {
		case id := <-handled:
			if id != want {
				t.Fatalf("handled %s, want %s", id, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s not handled: left for the next poll", want)
		}
	}
}

// staleQueue lists what its inner queue held at its first List, as a scan
// that raced a delete would.
type staleQueue struct {
	Queue
	mu    sync.Mutex
	first []domain.Event
}

func (s *staleQueue) List(ctx context.Context) ([]domain.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == nil {
		evs, err := s.Queue.List(ctx)
		s.first = evs
		return evs, err
	}
	return s.first, nil
}

// TestStaleListingRunsNothingTwice: events a scan still lists after the
// worker handled and deleted them are not handled again.
func TestStaleListingRunsNothingTwice(t *testing.T) {
	dir := t.TempDir()
	q, err := filequeue.New(filepath.Join(dir, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	for n := range 3 {
		if err := q.Enqueue(context.Background(), event("i1", n)); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	runs := map[string]int{}
	w := &Worker{Queue: &staleQueue{Queue: q}, KeyOf: keyOf, Dir: dir, Poll: 5 * time.Millisecond, Handle: func(_ context.Context, ev domain.Event) error {
		mu.Lock()
		runs[ev.ID]++
		mu.Unlock()
		return nil
	}}
	for range 3 {
		if err := w.RunOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 3 {
		t.Fatalf("runs %v", runs)
	}
	for id, n := range runs {
		if n != 1 {
			t.Fatalf("%s ran %d times from a stale listing", id, n)
		}
	}
}

// clock is a settable clock for the backoff and the dead letters' times.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
