// Package queueworker is the local server's turn worker: it takes agent
// events from the file queue and hands each to the turn engine, one at a
// time per agent instance and several instances at once — what SQS FIFO
// message groups and the turn function do in AWS.
//
// An event leaves the queue only once the engine has handled it; a
// failure is retried with backoff, and an event that keeps failing is
// moved to <dir>/deadletter (kept, logged, never dropped silently): it
// leaves the queue only once its dead letter is written, under a name of
// its own. It never logs an event's input. DeadLetters lists those
// dead letters and redrives them to the queue for an operator; a dead
// letter leaves its directory only once its event is queued again.
//
// An instance's lock file (<dir>/locks) lives while its events are being
// handled: the drain that holds it removes it, and Run removes those a
// crash or an older version left.
package queueworker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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

	// now and createFile are the clock and the dead letters' writer
	// (atomicfile.CreateExclusive); tests replace them.
	now        func() time.Time
	createFile func(path string, data []byte, perm fs.FileMode) error

	mu      sync.Mutex
	busy    map[turn.InstanceKey]bool
	missed  map[turn.InstanceKey]bool // a scan found it busy
	failing map[string]*failure       // by event id
	// acked are the events this worker handled and deleted lately: a scan
	// that listed the queue before a delete still names them, and a drain
	// that claims their instance after it must not run them again.
	acked map[string]time.Time
}

// failure is what the worker knows of an event that failed.
type failure struct {
	attempts  int
	notBefore time.Time // the backoff
	cause     error     // of the last attempt
	// lettered: its dead letter is written; what is left is to delete it
	// from the queue.
	lettered bool
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
	if w.now == nil {
		w.now = time.Now
	}
	if w.createFile == nil {
		w.createFile = atomicfile.CreateExclusive
	}
	w.mu.Lock()
	if w.busy == nil {
		w.busy, w.missed = map[turn.InstanceKey]bool{}, map[turn.InstanceKey]bool{}
		w.failing, w.acked = map[string]*failure{}, map[string]time.Time{}
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
	wg.Go(func() { w.removeIdleLocks(ctx) })
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
	// The lock file goes with the lock: a lock file per instance ever
	// run would pile up. A server that opened it meanwhile and waits
	// finds, once it holds the lock, that the path no longer names its
	// file and takes the lock anew (atomicfile.LockFile), so no two
	// drains of one instance ever hold "the" lock.
	defer func() {
		if err := lock.RemoveAndUnlock(); err != nil {
			w.Log.WarnContext(ctx, "turn worker: lock file not removed", "err", err)
		}
	}()
	for _, ev := range evs {
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		f := w.failing[ev.ID]
		var wait time.Duration
		var spent bool // failed every attempt: never handled again
		if f != nil {
			wait, spent = f.notBefore.Sub(w.now()), f.attempts >= w.MaxAttempts
		}
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
		if spent {
			// Its dead letter or the delete after it failed: retry that,
			// not the handler (which would cost a model call again).
			if !w.bury(ctx, ev) {
				return
			}
			continue
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
	f := w.failing[ev.ID]
	if f == nil {
		f = &failure{}
		w.failing[ev.ID] = f
	}
	f.attempts++
	f.cause = err
	n := f.attempts
	f.notBefore = w.now().Add(backoff(n))
	w.mu.Unlock()
	if n < w.MaxAttempts {
		w.Log.WarnContext(ctx, "turn worker: event failed; will retry", "eventId", ev.ID, "attempt", n, "err", err)
		return false
	}
	return w.bury(ctx, ev)
}

// backoff is the pause after the nth failure of an event: 200 ms,
// doubling, at most 6.4 s.
func backoff(n int) time.Duration {
	return time.Duration(1<<min(n, 6)) * 100 * time.Millisecond
}

// bury moves an event that failed every attempt to the dead letters:
// its dead letter first, then its delete from the queue, so that it is
// never gone from both. When either step fails the event stays queued,
// and after the backoff the step is tried again (the handler is not);
// true when the event is gone.
func (w *Worker) bury(ctx context.Context, ev domain.Event) bool {
	w.mu.Lock()
	f := w.failing[ev.ID]
	lettered, cause, n := f.lettered, f.cause, f.attempts
	w.mu.Unlock()
	if !lettered {
		if derr := w.deadLetter(ev, cause, n); derr != nil {
			w.Log.ErrorContext(ctx, "turn worker: event failed every attempt; dead letter not written, the event stays queued and is retried", "eventId", ev.ID, "attempts", n, "err", cause, "writeErr", derr)
			w.pause(ev.ID)
			return false
		}
		w.mu.Lock()
		f.lettered = true
		w.mu.Unlock()
	}
	if derr := w.Queue.Delete(ctx, ev.ID); derr != nil && !errors.Is(derr, domain.ErrNotFound) {
		w.Log.ErrorContext(ctx, "turn worker: dead-lettered event not removed from the queue; retried", "eventId", ev.ID, "err", derr)
		w.pause(ev.ID)
		return false
	}
	w.Log.ErrorContext(ctx, "turn worker: event failed every attempt; moved to the dead letters", "eventId", ev.ID, "attempts", n, "err", cause)
	w.forget(ev.ID)
	return true
}

// pause backs a failing event off again.
func (w *Worker) pause(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if f := w.failing[id]; f != nil {
		f.notBefore = w.now().Add(backoff(f.attempts))
	}
}

// remember notes an event as handled and deleted, and lets go of those
// noted more than ackedMemory ago.
func (w *Worker) remember(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	for old, at := range w.acked {
		if now.Sub(at) > ackedMemory {
			delete(w.acked, old)
		}
	}
	w.acked[id] = now
}

func (w *Worker) forget(id string) {
	w.mu.Lock()
	delete(w.failing, id)
	w.mu.Unlock()
}

// deadLetter keeps the event, the error's text (the engine's errors
// carry no secret) and the attempts for an operator (DeadLetters lists
// and redrives them), in a file of its own: named by the time and the
// event id's hash, and created exclusively, so that two dead letters
// written at one clock reading (a coarse clock, several instances failing
// together) never overwrite each other.
func (w *Worker) deadLetter(ev domain.Event, cause error, attempts int) error {
	dir := filepath.Join(w.Dir, DeadLetterDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	at := w.now().UTC()
	b, err := json.Marshal(letter{Event: ev, Error: cause.Error(), Attempts: attempts, At: at})
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(ev.ID))
	base := fmt.Sprintf("%d-%s", at.UnixNano(), hex.EncodeToString(sum[:8]))
	for i := 0; ; i++ {
		name := base + letterExt
		if i > 0 {
			name = fmt.Sprintf("%s-%d%s", base, i, letterExt)
		}
		err := w.createFile(filepath.Join(dir, name), b, 0o600)
		if !errors.Is(err, fs.ErrExist) || i == 99 {
			return err
		}
	}
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

// removeIdleLocks removes the lock files no drain holds: those a crash
// left (the drains remove their own), or an older version, which kept one
// per instance ever run. Each is taken without waiting and removed while
// held (Lock.RemoveAndUnlock), so one in use is skipped, and a server
// about to lock one locks a new file instead. Best effort.
func (w *Worker) removeIdleLocks(ctx context.Context) {
	dir := filepath.Join(w.Dir, "locks")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // none yet
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return
		}
		if !strings.HasSuffix(e.Name(), ".lock") || e.IsDir() {
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, time.Millisecond)
		l, err := atomicfile.LockFile(lctx, filepath.Join(dir, e.Name()))
		cancel()
		if err != nil {
			continue // held: in use
		}
		if err := l.RemoveAndUnlock(); err != nil {
			w.Log.WarnContext(ctx, "turn worker: lock file not removed", "err", err)
		}
	}
}

// lockName names an instance's lock file by a hash of its key.
func lockName(k turn.InstanceKey) string {
	sum := sha256.Sum256([]byte(k.String()))
	return hex.EncodeToString(sum[:16]) + ".lock"
}
