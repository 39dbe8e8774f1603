package queueworker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// DeadLetterDir is the dead letters' directory inside the worker's Dir.
const DeadLetterDir = "deadletter"

const (
	letterExt = ".json"
	// redriveLock, in the dead letters' directory, orders redrives across
	// processes: a redrive reads, queues and removes a dead letter while
	// holding it, so a second redrive of the same one finds it gone.
	redriveLock = ".redrive.lock"
)

// letter is a dead letter's file. Attempts is absent (0) in the files of
// versions that did not record it.
type letter struct {
	Event    domain.Event `json:"event"`
	Error    string       `json:"error"`
	Attempts int          `json:"attempts,omitempty"`
	At       time.Time    `json:"at"`
}

// Requeuer queues a dead letter's event again even though the queue
// acknowledged its id when the worker gave up on it
// (filequeue.Queue.Requeue): a plain Enqueue would be deduplicated away
// for the queue's dedup window.
type Requeuer interface {
	Requeue(ctx context.Context, e domain.Event) error
}

// DeadLetters is domain.DeadLetters over a worker's dead letters
// (<Dir>/deadletter): a dead letter's id is its file name. It is safe for
// concurrent use, also by several processes sharing the directory.
type DeadLetters struct {
	dir   string
	queue Requeuer
}

var _ domain.DeadLetters = (*DeadLetters)(nil)

// NewDeadLetters returns the dead letters of the worker whose Dir is
// workerDir, redriven to queue. It touches no file.
func NewDeadLetters(workerDir string, queue Requeuer) (*DeadLetters, error) {
	if workerDir == "" {
		return nil, errors.New("queueworker: dead letters: empty directory")
	}
	if queue == nil {
		return nil, errors.New("queueworker: dead letters: nil queue")
	}
	return &DeadLetters{dir: filepath.Join(workerDir, DeadLetterDir), queue: queue}, nil
}

// letterName is a dead letter file's name: "<unix nanoseconds>-<hash>[-n].json".
type letterName struct {
	name string
	at   int64
}

// names lists the dead letters' file names, oldest first (by the time in
// the name, then by name). Links and anything else that is no dead letter
// are left out.
func (d *DeadLetters) names() ([]letterName, error) {
	entries, err := os.ReadDir(d.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // nothing dead-lettered yet
	}
	if err != nil {
		return nil, fmt.Errorf("queueworker: list dead letters: %w", err)
	}
	var out []letterName
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || atomicfile.IsTemp(name) ||
			!strings.HasSuffix(name, letterExt) || domain.ValidateDeadLetterID(name) != nil {
			continue
		}
		stamp, _, _ := strings.Cut(name, "-")
		at, _ := strconv.ParseInt(stamp, 10, 64)
		out = append(out, letterName{name: name, at: at})
	}
	slices.SortFunc(out, func(a, b letterName) int {
		return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.name, b.name))
	})
	return out, nil
}

// ListDeadLetters returns up to limit dead letters, oldest first, and how
// many there are. One whose file cannot be decoded is listed with the
// reason as its Error and no event, so an operator sees it.
func (d *DeadLetters) ListDeadLetters(ctx context.Context, limit int) ([]domain.DeadLetter, int, error) {
	names, err := d.names()
	if err != nil {
		return nil, 0, err
	}
	total := len(names)
	var out []domain.DeadLetter
	for _, n := range names {
		if len(out) >= limit {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, 0, err
		}
		l, err := d.read(n.name)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			total-- // redriven meanwhile
			continue
		case errors.Is(err, domain.ErrCorrupt):
			out = append(out, domain.DeadLetter{ID: n.name, Error: "unreadable dead letter file: " + err.Error(), At: time.Unix(0, n.at).UTC()})
			continue
		case err != nil:
			return nil, 0, err
		}
		out = append(out, domain.DeadLetter{ID: n.name, Event: l.Event, Error: l.Error, Attempts: l.Attempts, At: l.At})
	}
	return out, total, nil
}

// read reads the dead letter file name: ErrNotFound when it is gone,
// ErrCorrupt when it is no dead letter.
func (d *DeadLetters) read(name string) (letter, error) {
	var l letter
	data, err := atomicfile.ReadFile(filepath.Join(d.dir, name)) // a link is refused
	if errors.Is(err, fs.ErrNotExist) {
		return l, fmt.Errorf("queueworker: dead letter %s: %w", name, domain.ErrNotFound)
	}
	if err != nil {
		return l, fmt.Errorf("queueworker: read dead letter %s: %w", name, err)
	}
	if err := json.Unmarshal(data, &l); err != nil || l.Event.ID == "" {
		return l, fmt.Errorf("queueworker: dead letter %s: %w", name, domain.ErrCorrupt)
	}
	return l, nil
}

// RedriveDeadLetter queues the event of the dead letter id again and then
// removes its file, holding the redrive lock throughout: a concurrent
// redrive of the same dead letter waits and then finds it gone
// (ErrNotFound), so the event is queued once. A crash between the two
// steps leaves the dead letter, and redriving it again queues the event
// again under its own id (the queue holds it once; the engine skips an
// event it has processed). An id that is no file name of this directory
// is ErrInvalidID (a path separator, only dots) or ErrNotFound.
func (d *DeadLetters) RedriveDeadLetter(ctx context.Context, id string) error {
	if err := domain.ValidateDeadLetterID(id); err != nil {
		return fmt.Errorf("queueworker: redrive: %w", err)
	}
	if !strings.HasSuffix(id, letterExt) || strings.HasPrefix(id, ".") {
		return fmt.Errorf("queueworker: dead letter %s: %w", id, domain.ErrNotFound)
	}
	if _, err := os.Lstat(d.dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("queueworker: dead letter %s: %w", id, domain.ErrNotFound)
	}
	lock, err := atomicfile.LockFile(ctx, filepath.Join(d.dir, redriveLock))
	if err != nil {
		return fmt.Errorf("queueworker: redrive %s: %w", id, err)
	}
	defer lock.Unlock()
	l, err := d.read(id)
	if err != nil {
		return err
	}
	if err := d.queue.Requeue(ctx, l.Event); err != nil {
		return fmt.Errorf("queueworker: redrive %s: queue its event: %w", id, err)
	}
	// Queued: from here the dead letter is only a record. Should its
	// removal fail, a second redrive queues the same event id again.
	if err := os.Remove(filepath.Join(d.dir, id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("queueworker: redrive %s: event queued, dead letter not removed: %w", id, err)
	}
	return nil
}
