// Package filequeue is the embedded domain.EventQueue: a durable queue of
// agent events as one file per event under <home>/queue, for running
// agentauth on a laptop. The same event ID is stored once, so a retried
// enqueue (the callback, then the sweep) resumes an agent once.
//
// Events may carry user input and routing data but never a secret; this
// package must never log an event, and never leave a half-written event
// file (writes are a temporary file, fsync and link or rename).
package filequeue

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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

// DedupWindow is how long an acknowledged (deleted) event's ID keeps
// deduplicating: an Enqueue of that ID within the window is still a no-op.
const DedupWindow = 24 * time.Hour

const ext = ".json"

// staleTempAge is how old a temporary file must be before scan takes it
// for the leftover of a crash rather than a write in progress.
const staleTempAge = time.Hour

// Queue is a directory of event files. It is safe for concurrent use, also
// by several processes sharing the directory.
type Queue struct {
	dir string

	mu      sync.Mutex
	lastSeq int64
	// wake holds at most one signal: enough to end the worker's idle
	// pause, and an Enqueue never blocks on it.
	wake chan struct{}
}

var _ domain.EventQueue = (*Queue)(nil)

// record is an event file. An acknowledged event becomes a tombstone
// (Event nil, AckedAt set) so its ID keeps deduplicating for DedupWindow.
type record struct {
	Seq     int64         `json:"seq"`
	ID      string        `json:"id"`
	Event   *domain.Event `json:"event,omitempty"`
	AckedAt *time.Time    `json:"ackedAt,omitempty"`
}

// New opens (creating if needed, mode 0700) the queue in dir, normally
// <home>/queue.
func New(dir string) (*Queue, error) {
	if dir == "" {
		return nil, errors.New("filequeue: empty directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("filequeue: %w", err)
	}
	q := &Queue{dir: dir, wake: make(chan struct{}, 1)}
	// Continue the sequence past what is stored, so order holds across
	// restarts even if the wall clock stepped back.
	recs, _, err := q.scan()
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		q.lastSeq = max(q.lastSeq, r.Seq)
	}
	return q, nil
}

func fileName(id string) string {
	sum := sha256.Sum256([]byte("agentauth/event/v1|" + id))
	return hex.EncodeToString(sum[:]) + ext
}

func (q *Queue) path(id string) string { return filepath.Join(q.dir, fileName(id)) }

// nextSeq is a nanosecond timestamp forced to increase within the process.
func (q *Queue) nextSeq() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.lastSeq = max(time.Now().UnixNano(), q.lastSeq+1)
	return q.lastSeq
}

// Enqueue stores e durably. An ID that is queued, or was acknowledged
// within DedupWindow, is not stored again and Enqueue returns nil.
// EnqueuedAt is set to now when zero.
func (q *Queue) Enqueue(_ context.Context, e domain.Event) error {
	if e.ID == "" {
		return errors.New("filequeue: enqueue: event without an id")
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
	err = atomicfile.CreateExclusive(q.path(e.ID), data, 0o600)
	switch {
	case err == nil:
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
// file never stalls the queue. Tombstones past DedupWindow are removed.
func (q *Queue) List(ctx context.Context) ([]domain.Event, error) {
	recs, bad, err := q.scan()
	if err != nil {
		return nil, err
	}
	events := make([]domain.Event, 0, len(recs))
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if r.Event != nil {
			events = append(events, *r.Event)
			continue
		}
		if r.AckedAt != nil && time.Since(*r.AckedAt) > DedupWindow {
			os.Remove(q.path(r.ID))
		}
	}
	return events, errors.Join(bad...)
}

// scan reads every event file, sorted by sequence.
func (q *Queue) scan() ([]record, []error, error) {
	entries, err := os.ReadDir(q.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("filequeue: %w", err)
	}
	var recs []record
	var bad []error
	sawTemp := false
	for _, e := range entries {
		name := e.Name()
		if atomicfile.IsTemp(name) {
			sawTemp = true
			continue
		}
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ext) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(q.dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue // acknowledged and pruned meanwhile
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
		recs = append(recs, r)
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

// Delete acknowledges the event with id: it leaves the queue, and its ID
// keeps deduplicating for DedupWindow. ErrNotFound when no such event is
// queued; acknowledging twice is fine.
func (q *Queue) Delete(_ context.Context, id string) error {
	path := q.path(id)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("filequeue: delete event: %w", domain.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("filequeue: delete event: %w", err)
	}
	var r record
	if err := json.Unmarshal(data, &r); err == nil && r.AckedAt != nil {
		return nil
	}
	// A corrupt file under this id's name is acknowledged too: it can only
	// be this event, and the consumer has given up on it.
	now := time.Now().UTC()
	tomb, err := json.Marshal(record{Seq: r.Seq, ID: id, AckedAt: &now})
	if err != nil {
		return fmt.Errorf("filequeue: delete event: %w", err)
	}
	if err := atomicfile.Replace(path, tomb, 0o600); err != nil {
		return fmt.Errorf("filequeue: delete event: %w", err)
	}
	return nil
}
