// Package queueworker is the local server's turn worker: it takes agent
// events from the file queue and hands each to the turn engine, one at a
// time per agent instance and several instances at once — what SQS FIFO
// message groups and the turn function do in AWS.
//
// An event leaves the queue only once the engine has handled it; a
// failure is retried with backoff, and an event that keeps failing is
// moved to <dir>/deadletter (kept, logged, never dropped silently). It
// never logs an event's input.
package queueworker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/turn"
)

// Queue is what the worker needs of the file queue.
type Queue interface {
	List(ctx context.Context) ([]domain.Event, error)
	Delete(ctx context.Context, id string) error
}

// Handler handles one event (turn/engine.Engine.Handle).
type Handler func(ctx context.Context, ev domain.Event) error

// Worker polls the queue, and scans at once when Wake says something was
// queued.
type Worker struct {
	Queue  Queue
	Handle Handler
	KeyOf  func(domain.Event) turn.InstanceKey
	Log    *slog.Logger
	// Dir holds the dead letters (<Dir>/deadletter) and the instances'
	// worker locks (<Dir>/locks), shared by every server on the home.
	Dir string
	// Poll is the pause between scans when idle (default 200 ms);
	// Parallel bounds the instances handled at once (default 4);
	// MaxAttempts moves an event to the dead letters (default 5).
	Poll        time.Duration
	Parallel    int
	MaxAttempts int
	// Wake, when set, ends the pause at once: the queue signals it when
	// this process queues an event (filequeue.Queue.Wake), so a consent's
	// auth.granted or a posted message is taken without waiting out Poll.
	// Polling still finds what other processes queue.
	Wake <-chan struct{}

	mu        sync.Mutex
	busy      map[turn.InstanceKey]bool
	missed    map[turn.InstanceKey]bool // a scan found it busy
	attempts  map[string]int
	notBefore map[string]time.Time
	// acked are the events this worker handled and deleted lately: a scan
	// that listed the queue before a delete still names them, and a drain
	// that claims their instance after it must not run them again.
	acked map[string]time.Time
}

// ackedMemory is how long the worker remembers an acknowledged event:
// far longer than a scan's listing can be stale.
const ackedMemory = time.Minute

func (w *Worker) defaults() {
	if w.Poll <= 0 {
		w.Poll = 200 * time.Millisecond
	}
	if w.Parallel <= 0 {
		w.Parallel = 4
	}
	if w.MaxAttempts <= 0 {
		w.MaxAttempts = 5
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
	w.mu.Lock()
	if w.busy == nil {
		w.busy, w.missed, w.attempts, w.notBefore = map[turn.InstanceKey]bool{}, map[turn.InstanceKey]bool{}, map[string]int{}, map[string]time.Time{}
		w.acked = map[string]time.Time{}
	}
	w.mu.Unlock()
}

// Run works until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	w.defaults()
	slots := make(chan struct{}, w.Parallel)
	// again ends the pause when a drain ends whose instance a scan found
	// busy: what was queued for it meanwhile is not left to the next poll.
	again := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	for ctx.Err() == nil {
		events, err := w.Queue.List(ctx)
		if err != nil && len(events) == 0 {
			w.Log.WarnContext(ctx, "turn worker: queue unreadable", "err", err)
		}
		groups, order := w.group(events)
		for _, key := range order {
			if !w.claim(key) {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				w.release(key)
				return
			}
			wg.Add(1)
			go func(key turn.InstanceKey, evs []domain.Event) {
				defer wg.Done()
				defer func() { <-slots }()
				defer func() {
					if w.release(key) {
						select {
						case again <- struct{}{}:
						default:
						}
					}
				}()
				w.drain(ctx, key, evs)
			}(key, groups[key])
		}
		select {
		case <-ctx.Done():
		case <-time.After(w.Poll):
		case <-w.Wake:
		case <-again:
		}
	}
}

// RunOnce handles everything queued now and returns (tests, admin).
func (w *Worker) RunOnce(ctx context.Context) error {
	w.defaults()
	events, err := w.Queue.List(ctx)
	if err != nil && len(events) == 0 {
		return err
	}
	groups, order := w.group(events)
	for _, key := range order {
		w.drain(ctx, key, groups[key])
	}
	return nil
}

// group splits events by instance, keeping queue order within each.
func (w *Worker) group(events []domain.Event) (map[turn.InstanceKey][]domain.Event, []turn.InstanceKey) {
	groups := map[turn.InstanceKey][]domain.Event{}
	var order []turn.InstanceKey
	for _, ev := range events {
		k := w.KeyOf(ev)
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		groups[k] = append(groups[k], ev)
	}
	return groups, order
}

func (w *Worker) claim(k turn.InstanceKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy[k] {
		w.missed[k] = true
		return false
	}
	w.busy[k] = true
	return true
}

// release frees k; true when a scan found k busy meanwhile.
func (w *Worker) release(k turn.InstanceKey) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	missed := w.missed[k]
	delete(w.busy, k)
	delete(w.missed, k)
	return missed
}

// drain handles one instance's events in order, under the instance's
// worker lock (so two servers on one home never run one instance at
// once); it stops at the first that fails, which keeps the order.
func (w *Worker) drain(ctx context.Context, key turn.InstanceKey, evs []domain.Event) {
	lock, ok := w.lock(ctx, key)
	if !ok {
		return
	}
	defer lock.Unlock()
	for _, ev := range evs {
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		wait := time.Until(w.notBefore[ev.ID])
		_, done := w.acked[ev.ID]
		w.mu.Unlock()
		if done {
			// Handled and deleted since the scan listed it; queued again
			// meanwhile, it is the same event (the queue deduplicates by
			// id, like SQS within its window): gone either way.
			if derr := w.Queue.Delete(ctx, ev.ID); derr != nil && !errors.Is(derr, domain.ErrNotFound) {
				w.Log.WarnContext(ctx, "turn worker: duplicate event not removed", "eventId", ev.ID, "err", derr)
			}
			continue
		}
		if wait > 0 {
			return // backing off: later events of the instance wait too
		}
		err := w.Handle(ctx, ev)
		if err == nil {
			if derr := w.Queue.Delete(ctx, ev.ID); derr != nil && !errors.Is(derr, domain.ErrNotFound) {
				w.Log.ErrorContext(ctx, "turn worker: handled event not acknowledged", "eventId", ev.ID, "err", derr)
				return
			}
			w.forget(ev.ID)
			w.remember(ev.ID)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if !w.failed(ctx, ev, err) {
			return
		}
	}
}

// failed records a failure; true when the event went to the dead letters
// (the instance may go on).
func (w *Worker) failed(ctx context.Context, ev domain.Event, err error) bool {
	w.mu.Lock()
	w.attempts[ev.ID]++
	n := w.attempts[ev.ID]
	w.notBefore[ev.ID] = time.Now().Add(time.Duration(1<<min(n, 6)) * 100 * time.Millisecond)
	w.mu.Unlock()
	if n < w.MaxAttempts {
		w.Log.WarnContext(ctx, "turn worker: event failed; will retry", "eventId", ev.ID, "attempt", n, "err", err)
		return false
	}
	w.Log.ErrorContext(ctx, "turn worker: event failed every attempt; moved to the dead letters", "eventId", ev.ID, "attempts", n, "err", err)
	if derr := w.deadLetter(ev, err); derr != nil {
		w.Log.ErrorContext(ctx, "turn worker: dead letter not written; the event stays queued", "eventId", ev.ID, "err", derr)
		return false
	}
	if derr := w.Queue.Delete(ctx, ev.ID); derr != nil && !errors.Is(derr, domain.ErrNotFound) {
		return false
	}
	w.forget(ev.ID)
	return true
}

// remember notes an event as handled and deleted, and lets go of those
// noted more than ackedMemory ago.
func (w *Worker) remember(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for old, at := range w.acked {
		if now.Sub(at) > ackedMemory {
			delete(w.acked, old)
		}
	}
	w.acked[id] = now
}

func (w *Worker) forget(id string) {
	w.mu.Lock()
	delete(w.attempts, id)
	delete(w.notBefore, id)
	w.mu.Unlock()
}

// deadLetter keeps the event and the error's text (the engine's errors
// carry no secret) for an operator.
func (w *Worker) deadLetter(ev domain.Event, cause error) error {
	dir := filepath.Join(w.Dir, "deadletter")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(map[string]any{"event": ev, "error": cause.Error(), "at": time.Now().UTC()})
	if err != nil {
		return err
	}
	return atomicfile.Replace(filepath.Join(dir, fmt.Sprintf("%d.json", time.Now().UnixNano())), b, 0o600)
}

// lock takes the instance's worker lock without waiting: another server
// on the home is at it, and will be again next poll.
func (w *Worker) lock(ctx context.Context, key turn.InstanceKey) (*atomicfile.Lock, bool) {
	dir := filepath.Join(w.Dir, "locks")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		w.Log.WarnContext(ctx, "turn worker: lock directory", "err", err)
		return nil, false
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	l, err := atomicfile.LockFile(lctx, filepath.Join(dir, lockName(key)))
	if err != nil {
		return nil, false
	}
	return l, true
}

// lockName names an instance's lock file by a hash of its key.
func lockName(k turn.InstanceKey) string {
	sum := sha256.Sum256([]byte(k.String()))
	return hex.EncodeToString(sum[:16]) + ".lock"
}
