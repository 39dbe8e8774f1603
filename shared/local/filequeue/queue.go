// Package filequeue is the embedded domain.EventQueue: a durable queue of
// agent events as one file per event under <home>/queue, for running
// agentauth on a laptop. The same event ID is stored once, so a retried
// enqueue (the callback, then the sweep) resumes an agent once.
//
// Layout: a queued event is <dir>/<h>.json, h a hash of its ID. An
// acknowledged (deleted) event leaves a tombstone, <dir>/acked/<h>.json,
// for the dedup window (DedupWindow unless WithDedupWindow sets another),
// so that an Enqueue of its ID is still deduplicated;
// the tombstone's modification time is its ack time. A scan reads the
// queued events only: what it costs grows with what is pending, never
// with what was handled: it stats the tombstone of each queued event's
// ID, and never lists or reads the tombstones. Expired ones are removed
// by a sweep (hourly, or every quarter of a shorter window) that Lists
// take a bounded step of at a time. A queue
// written by a version that kept tombstones beside the events is
// converted as it is scanned.
//
// Events may carry user input and routing data but never a secret; this
// package must never log an event, and never leave a half-written event
// or tombstone file (writes are a temporary file, fsync and link or
// rename).
package filequeue

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// DedupWindow is the default of how long an acknowledged (deleted)
// event's ID keeps deduplicating: an Enqueue of that ID within the window
// is still a no-op. WithDedupWindow sets another.
const DedupWindow = 24 * time.Hour

const (
	ext = ".json"
	// ackedDir is the tombstones' directory inside the queue's.
	ackedDir = "acked"
	// ackLock, in ackedDir, orders writing a tombstone against the
	// sweep's removing it (see lockAcked).
	ackLock = ".lock"
)

const (
	// staleTempAge is how old a temporary file must be before scan takes
	// it for the leftover of a crash rather than a write in progress.
	staleTempAge = time.Hour
	// maxSweepEvery is how often, at most, a process starts a pass over
	// the tombstones to remove the expired ones: a pass stats every
	// tombstone, and an expired tombstone left a little longer changes
	// nothing (see settled). A window shorter than four of it is swept
	// every quarter of the window (sweepPeriod), so that the tombstones
	// level off at about the acks of 1.25 windows.
	maxSweepEvery = time.Hour
	// sweepStep bounds the tombstones one List looks at during a pass
	// (about 1-2 ms), so a pass over 50,000 takes some 200 Lists (40 s of
	// an idle worker's polls) and no List pays for all of them.
	sweepStep = 256
)

// Queue is a directory of event files. It is safe for concurrent use, also
// by several processes sharing the directory.
type Queue struct {
	dir   string
	acked string // dir/ackedDir
	// window is how long a tombstone deduplicates; sweepEvery how often a
	// pass of the sweep starts (sweepPeriod of the window).
	window, sweepEvery time.Duration

	mu      sync.Mutex
	lastSeq int64
	// lastSweep is when the last pass of the sweep started; sweepDir is
	// the tombstone directory open for the pass in progress, read by one
	// List at a time (sweeping).
	lastSweep time.Time
	sweepDir  *os.File
	sweeping  bool
	// ackMu is the in-process half of lockAcked: goroutines queue on it
	// instead of polling the file lock (and it is all there is where the
	// system has no file locks).
	ackMu sync.Mutex
	// wake holds at most one signal: enough to end the worker's idle
	// pause, and an Enqueue never blocks on it.
	wake chan struct{}
}

var _ domain.EventQueue = (*Queue)(nil)

// record is an event file, or a tombstone (Event nil, AckedAt set). Only
// people read a tombstone's content; the queue goes by its name and
// modification time.
type record struct {
	Seq     int64         `json:"seq"`
	ID      string        `json:"id"`
	Event   *domain.Event `json:"event,omitempty"`
	AckedAt *time.Time    `json:"ackedAt,omitempty"`
}

// Option sets a Queue's optional setting at New.
type Option func(*options)

type options struct {
	window time.Duration
}

// WithDedupWindow sets how long an acknowledged event's ID keeps
// deduplicating (default DedupWindow); it must be positive. The
// tombstones level off at about the acks of 1.25 windows: a short window
// keeps the directory small, at the price that a redelivery later than
// the window is queued again.
func WithDedupWindow(d time.Duration) Option {
	return func(o *options) { o.window = d }
}

// sweepPeriod is how often the sweep of a window's tombstones starts: a
// quarter of the window, at most maxSweepEvery.
func sweepPeriod(window time.Duration) time.Duration {
	return min(maxSweepEvery, window/4)
}

// New opens (creating if needed, mode 0700) the queue in dir, normally
// <home>/queue. It moves the tombstones an older version left among the
// events to dir/acked, and removes the expired ones.
func New(dir string, opts ...Option) (*Queue, error) {
	if dir == "" {
		return nil, errors.New("filequeue: empty directory")
	}
	o := options{window: DedupWindow}
	for _, opt := range opts {
		opt(&o)
	}
	if o.window <= 0 {
		return nil, fmt.Errorf("filequeue: dedup window %s: want a positive duration", o.window)
	}
	acked := filepath.Join(dir, ackedDir)
	if err := os.MkdirAll(acked, 0o700); err != nil {
		return nil, fmt.Errorf("filequeue: %w", err)
	}
	q := &Queue{dir: dir, acked: acked, window: o.window, sweepEvery: sweepPeriod(o.window), wake: make(chan struct{}, 1)}
	ctx := context.Background()
	// Continue the sequence past what is queued, so order holds across
	// restarts even if the wall clock stepped back. (Order matters among
	// queued events only, so tombstones need no sequence.)
	recs, _, err := q.scan(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		q.lastSeq = max(q.lastSeq, r.Seq)
	}
	return q, nil
}

// DedupWindow is how long an acknowledged event's ID keeps deduplicating
// in this Queue.
func (q *Queue) DedupWindow() time.Duration { return q.window }

func fileName(id string) string {
	sum := sha256.Sum256([]byte("agentauth/event/v1|" + id))
	return hex.EncodeToString(sum[:]) + ext
}

func (q *Queue) path(id string) string { return filepath.Join(q.dir, fileName(id)) }

// tombPath is where the tombstone of the event file named name lives.
func (q *Queue) tombPath(name string) string { return filepath.Join(q.acked, name) }

// nextSeq is a nanosecond timestamp forced to increase within the process.
func (q *Queue) nextSeq() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lastSeq = max(time.Now().UnixNano(), q.lastSeq+1)
	return q.lastSeq
}

// tombstone stats the tombstone of the event file named name: nil, nil
// when there is none.
func (q *Queue) tombstone(name string) (fs.FileInfo, error) {
	fi, err := os.Lstat(q.tombPath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return fi, err
}

// fresh reports whether a tombstone is within the dedup window of now.
func (q *Queue) fresh(tomb fs.FileInfo, now time.Time) bool {
	return now.Sub(tomb.ModTime()) <= q.window
}

// ackedLately reports whether the event file named name has a tombstone
// within the dedup window.
func (q *Queue) ackedLately(name string) (bool, error) {
	tomb, err := q.tombstone(name)
	if err != nil || tomb == nil {
		return false, err
	}
	return q.fresh(tomb, time.Now()), nil
}

// Enqueue stores e durably. An ID that is queued, or was acknowledged
// within the dedup window, is not stored again and Enqueue returns nil.
// EnqueuedAt is set to now when zero.
func (q *Queue) Enqueue(_ context.Context, e domain.Event) error {
	if e.ID == "" {
		return errors.New("filequeue: enqueue: event without an id")
	}
	name := fileName(e.ID)
	if acked, err := q.ackedLately(name); err != nil {
		return fmt.Errorf("filequeue: enqueue: %w", err)
	} else if acked {
		return nil
	}
	if e.EnqueuedAt.IsZero() {
		e.EnqueuedAt = time.Now().UTC()
	}
	data, err := json.Marshal(record{Seq: q.nextSeq(), ID: e.ID, Event: &e})
	if err != nil {
		return fmt.Errorf("filequeue: enqueue: %w", err)
	}
	// The first writer of an ID wins and the file appears complete or not
	// at all.
	path := filepath.Join(q.dir, name)
	err = atomicfile.CreateExclusive(path, data, 0o600)
	switch {
	case err == nil:
		// A Delete may have written this ID's tombstone after the check
		// above and removed its event file before the create: a redelivery
		// that raced the ack. The tombstone wins (scan would skip the file
		// too); taking the file back keeps it from waking the worker.
		if acked, _ := q.ackedLately(name); acked {
			os.Remove(path)
			return nil
		}
		select {
		case q.wake <- struct{}{}:
		default: // a signal is pending already
		}
	case !errors.Is(err, fs.ErrExist):
		return fmt.Errorf("filequeue: enqueue: %w", err)
	}
	return nil
}

// Wake is signalled when an Enqueue of this Queue stores a new event (not
// for a duplicate): the process's turn worker (its one receiver) scans at
// once instead of at its next poll, so a consent's auth.granted, queued by
// the callback in the same process, resumes the turn without waiting out
// the poll interval. Events other processes queue in the directory are
// still found by polling.
func (q *Queue) Wake() <-chan struct{} { return q.wake }

// List returns the queued events in enqueue order. A file that cannot be
// decoded is skipped and reported in the error (wrapping domain.ErrCorrupt);
// the events returned alongside such an error are still valid, so one bad
// file never stalls the queue. It reads the queued events only, and takes
// a bounded step of the sweep of tombstones past the dedup window.
func (q *Queue) List(ctx context.Context) ([]domain.Event, error) {
	recs, bad, err := q.scan(ctx)
	if err != nil {
		return nil, err
	}
	if err := q.maybeSweep(ctx); err != nil {
		bad = append(bad, err)
	}
	events := make([]domain.Event, 0, len(recs))
	for _, r := range recs {
		events = append(events, *r.Event)
	}
	return events, errors.Join(bad...)
}

// scan reads every queued event file, sorted by sequence. It never opens
// a tombstone: per event file it stats the one tombstone of that ID.
func (q *Queue) scan(ctx context.Context) ([]record, []error, error) {
	entries, err := os.ReadDir(q.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("filequeue: %w", err)
	}
	var recs []record
	var bad []error
	var oldTombs []string
	sawTemp := false
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		name := e.Name()
		if atomicfile.IsTemp(name) {
			sawTemp = true
			continue
		}
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ext) || e.IsDir() {
			continue
		}
		path := filepath.Join(q.dir, name)
		data, err := atomicfile.ReadFile(path) // a link dropped in is refused, never run
		if errors.Is(err, fs.ErrNotExist) {
			continue // acknowledged meanwhile
		}
		if err != nil {
			bad = append(bad, fmt.Errorf("filequeue: read %s: %w", name, err))
			continue
		}
		var r record
		if err := json.Unmarshal(data, &r); err != nil || fileName(r.ID) != name || (r.Event == nil) == (r.AckedAt == nil) {
			bad = append(bad, fmt.Errorf("filequeue: event file %s: %w", name, domain.ErrCorrupt))
			continue
		}
		if r.Event == nil {
			oldTombs = append(oldTombs, name)
			continue
		}
		done, err := q.settled(name, e)
		if err != nil {
			bad = append(bad, fmt.Errorf("filequeue: tombstone of %s: %w", name, err))
			continue
		}
		if done {
			// The ack got as far as its tombstone (a crash, or a Delete
			// running now): finish it.
			os.Remove(path)
			continue
		}
		recs = append(recs, r)
	}
	for batch := range slices.Chunk(oldTombs, sweepStep) {
		if err := q.moveOldTombstones(ctx, batch); err != nil {
			bad = append(bad, err)
		}
	}
	if sawTemp {
		// Best effort: a leftover temporary file costs only space, and the
		// next scan tries again.
		atomicfile.RemoveStaleTemps(q.dir, staleTempAge)
	}
	slices.SortFunc(recs, func(a, b record) int {
		if a.Seq != b.Seq {
			return cmp.Compare(a.Seq, b.Seq)
		}
		return strings.Compare(a.ID, b.ID)
	})
	return recs, bad, nil
}

// settled reports whether the queued event file named name (entry e) has
// been acknowledged: its tombstone exists and is within the dedup window,
// or is no older than the file (a crash between a Delete's two steps, seen
// more than a window later). A tombstone older than the file is that of an
// earlier event of the ID, queued again past the window.
func (q *Queue) settled(name string, e fs.DirEntry) (bool, error) {
	tomb, err := q.tombstone(name)
	if err != nil || tomb == nil {
		return false, err
	}
	if q.fresh(tomb, time.Now()) {
		return true, nil
	}
	fi, err := e.Info()
	if err != nil {
		return errors.Is(err, fs.ErrNotExist), nil
	}
	return !tomb.ModTime().Before(fi.ModTime()), nil
}

// moveOldTombstones moves the tombstones that an older version left in
// the queue directory, files named names, to dir/acked, each with its ack
// time as modification time, or removes the expired ones. It re-reads
// each under the ack lock: another process may have moved it, and an
// Enqueue then queued the ID again.
func (q *Queue) moveOldTombstones(ctx context.Context, names []string) error {
	unlock, err := q.lockAcked(ctx)
	if err != nil {
		return fmt.Errorf("filequeue: move old tombstones: %w", err)
	}
	defer unlock()
	var errs []error
	for _, name := range names {
		if err := q.moveOldTombstone(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("filequeue: move tombstone %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (q *Queue) moveOldTombstone(name string) error {
	path := filepath.Join(q.dir, name)
	data, err := atomicfile.ReadFile(path)
	if err != nil {
		return err
	}
	var r record
	if json.Unmarshal(data, &r) != nil || r.AckedAt == nil || fileName(r.ID) != name {
		return nil // not the tombstone any more; the next scan sees what it is
	}
	at := *r.AckedAt
	tomb, err := q.tombstone(name)
	if err != nil {
		return err
	}
	if time.Since(at) > q.window || (tomb != nil && !tomb.ModTime().Before(at)) {
		return os.Remove(path) // expired, or a later ack's tombstone is there
	}
	if err := os.Chtimes(path, at, at); err != nil {
		return err
	}
	return os.Rename(path, q.tombPath(name))
}

// lockAcked takes the ack lock, which every writer and remover of
// tombstones holds, across processes: so the sweep, having seen a
// tombstone expired, never removes one a Delete has just written under
// the same name. It returns the unlock.
func (q *Queue) lockAcked(ctx context.Context) (func(), error) {
	q.ackMu.Lock()
	l, err := atomicfile.LockFile(ctx, filepath.Join(q.acked, ackLock))
	if err != nil {
		q.ackMu.Unlock()
		return nil, err
	}
	return func() {
		l.Unlock()
		q.ackMu.Unlock()
	}, nil
}

// maybeSweep does one step of the sweep of expired tombstones: at most
// sweepStep tombstones, so no scan pays for a whole directory of them. A
// pass starts when this process has not started one for q.sweepEvery, and
// goes on over the following calls until it has seen every tombstone.
func (q *Queue) maybeSweep(ctx context.Context) error {
	q.mu.Lock()
	if q.sweeping || (q.sweepDir == nil && time.Since(q.lastSweep) < q.sweepEvery) {
		q.mu.Unlock()
		return nil
	}
	if q.sweepDir == nil {
		d, err := os.Open(q.acked)
		if err != nil {
			q.mu.Unlock()
			return fmt.Errorf("filequeue: sweep tombstones: %w", err)
		}
		q.sweepDir, q.lastSweep = d, time.Now()
	}
	q.sweeping = true
	d := q.sweepDir
	q.mu.Unlock()

	done, err := q.sweepSome(ctx, d)
	q.mu.Lock()
	q.sweeping = false
	if done {
		d.Close()
		q.sweepDir = nil
	}
	q.mu.Unlock()
	return err
}

// sweep runs a whole pass (tests, benchmarks).
func (q *Queue) sweep(ctx context.Context) error {
	d, err := os.Open(q.acked)
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		done, err := q.sweepSome(ctx, d)
		if done || err != nil {
			return err
		}
	}
}

// sweepSome removes the expired tombstones among the next sweepStep
// entries of d, the open tombstone directory; done when d has no more.
// Each is checked again under the ack lock before it goes, and one whose
// event file is back is kept for scan to settle first.
func (q *Queue) sweepSome(ctx context.Context, d *os.File) (done bool, err error) {
	entries, err := d.ReadDir(sweepStep)
	done = len(entries) < sweepStep || err != nil
	if err != nil && !errors.Is(err, io.EOF) {
		return done, fmt.Errorf("filequeue: sweep tombstones: %w", err)
	}
	now := time.Now()
	var expired []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if atomicfile.IsTemp(name) {
			if fi, err := e.Info(); err == nil && now.Sub(fi.ModTime()) > staleTempAge {
				os.Remove(filepath.Join(q.acked, name)) // a crash's leftover
			}
			continue
		}
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ext) {
			continue
		}
		if fi, err := e.Info(); err == nil && !q.fresh(fi, now) {
			expired = append(expired, name)
		}
	}
	if len(expired) == 0 {
		return done, nil
	}
	unlock, err := q.lockAcked(ctx)
	if err != nil {
		return done, fmt.Errorf("filequeue: sweep tombstones: %w", err)
	}
	defer unlock()
	for _, name := range expired {
		tomb, err := q.tombstone(name)
		if err != nil || tomb == nil || q.fresh(tomb, time.Now()) {
			continue // acknowledged again meanwhile
		}
		if _, err := os.Lstat(filepath.Join(q.dir, name)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err := os.Remove(q.tombPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("filequeue: sweep tombstone %s: %w", name, err))
		}
	}
	return done, errors.Join(errs...)
}

// Delete acknowledges the event with id: it leaves the queue, and its ID
// keeps deduplicating for the dedup window. ErrNotFound when no such event is
// queued; acknowledging twice is fine.
//
// The tombstone is written first and is what acknowledges; removing the
// event file is second, and a crash between the two leaves both, which
// scan settles.
func (q *Queue) Delete(ctx context.Context, id string) error {
	name := fileName(id)
	path := filepath.Join(q.dir, name)
	data, err := atomicfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if tomb, terr := q.tombstone(name); terr == nil && tomb != nil {
			return nil
		}
		return fmt.Errorf("filequeue: delete event: %w", domain.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("filequeue: delete event: %w", err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err == nil && r.AckedAt != nil {
		return nil // an older version's tombstone, which scan moves
	}
	// A corrupt file under this id's name is acknowledged too: it can only
	// be this event, and the consumer has given up on it.
	now := time.Now().UTC()
	tomb, err := json.Marshal(record{Seq: r.Seq, ID: id, AckedAt: &now})
	if err != nil {
		return fmt.Errorf("filequeue: delete event: %w", err)
	}
	// The slow part (write and fsync) happens outside the lock; the lock
	// covers publishing the name only.
	tmp, err := atomicfile.WriteTemp(q.tombPath(name), tomb, 0o600)
	if err != nil {
		return fmt.Errorf("filequeue: delete event: %w", err)
	}
	unlock, err := q.lockAcked(ctx)
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("filequeue: delete event: %w", err)
	}
	err = atomicfile.CommitReplace(tmp, q.tombPath(name))
	unlock()
	if err != nil {
		return fmt.Errorf("filequeue: delete event: %w", err)
	}
	// Acknowledged. Should this removal fail, the event file stays until
	// a scan, seeing the tombstone, removes it; it is never listed again.
	os.Remove(path)
	return nil
}

// Requeue stores e again even when its ID was acknowledged within the
// dedup window: an operator's redrive of a dead letter, whose event the
// turn worker acknowledged when it gave up on it. It removes the ID's
// tombstone (under the ack lock) and then Enqueues; an ID queued now is
// still stored once. Only a redrive may call it: for any other producer
// the tombstone is what keeps a redelivery from running twice.
func (q *Queue) Requeue(ctx context.Context, e domain.Event) error {
	if e.ID == "" {
		return errors.New("filequeue: requeue: event without an id")
	}
	name := fileName(e.ID)
	unlock, err := q.lockAcked(ctx)
	if err != nil {
		return fmt.Errorf("filequeue: requeue: %w", err)
	}
	err = os.Remove(q.tombPath(name))
	unlock()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filequeue: requeue: %w", err)
	}
	return q.Enqueue(ctx, e)
}
