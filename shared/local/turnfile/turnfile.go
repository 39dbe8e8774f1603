// Package turnfile is the embedded turn.Store: each agent instance is a
// directory under <home>/turns holding a snapshot and a journal. A commit
// is one line appended to the journal and synced — so what a step writes
// grows with the step, not with the conversation — and a turn's end
// (a rebase) writes a new snapshot and starts an empty journal.
//
// Atomicity: a line is whole or it is not there (a torn last line, from a
// crash mid-write, is ignored on read and cut on the next commit); the
// instance's advisory lock and the version in every line fence concurrent
// writers, also across processes sharing the home. It must never put an
// instance key in a path (directories are named by a hash) or a stored
// value in an error.
package turnfile

import (
	"bufio"
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
	"sort"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/turn"
)

// Store keeps instances under one directory.
type Store struct {
	dir string
	// cache holds each instance's state as last read by this process, with
	// the file sizes it was read from: a read after this process's own
	// commit (or another's append) parses only the new journal lines.
	mu    sync.Mutex
	cache map[string]cached
}

type cached struct {
	snapSize int64
	snapTime time.Time
	valid    int64 // journal bytes folded into st
	st       turn.State
}

var _ turn.Store = (*Store)(nil)

// New opens (creating with mode 0700) dir.
func New(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("turnfile: %w", err)
	}
	return &Store{dir: dir, cache: map[string]cached{}}, nil
}

const (
	snapshotFile = "snapshot.json"
	journalFile  = "journal.jsonl"
	lockFile     = "instance.lock"
	keyFile      = "key.json"
)

// instanceDir names an instance's directory by a hash of its key.
func (s *Store) instanceDir(k turn.InstanceKey) string {
	sum := sha256.Sum256([]byte(k.String()))
	return filepath.Join(s.dir, hex.EncodeToString(sum[:16]))
}

// line is one journal entry: a commit and the version it produced.
type line struct {
	Version int64       `json:"v"`
	Commit  turn.Commit `json:"c"`
}

// Load implements turn.Store.
func (s *Store) Load(ctx context.Context, k turn.InstanceKey) (turn.State, error) {
	if err := k.Validate(); err != nil {
		return turn.State{}, err
	}
	st, err := s.readLocked(ctx, s.instanceDir(k))
	if err != nil {
		return turn.State{}, fmt.Errorf("turnfile: load %s: %w", k, err)
	}
	if st.Instance.Version == 0 {
		return turn.State{}, fmt.Errorf("turnfile: load %s: %w", k, domain.ErrNotFound)
	}
	return st, nil
}

// TurnEvents reads the instance's state (a file store holds it whole) and
// returns the turn's events after after.
func (s *Store) TurnEvents(ctx context.Context, k turn.InstanceKey, turnID string, after int64) (turn.Turn, []turn.TurnEvent, error) {
	st, err := s.Load(ctx, k)
	if err != nil {
		return turn.Turn{}, nil, err
	}
	return st.EventsAfter(turnID, after)
}

// readLocked reads dir's state under the instance's lock: a commit may
// otherwise rebase (new snapshot, emptied journal, new lines) between the
// reader's look at the snapshot and its read of the journal, and the
// reader would start mid-line in the new journal.
func (s *Store) readLocked(ctx context.Context, dir string) (turn.State, error) {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return turn.NewState(), nil
	}
	lock, err := atomicfile.LockFile(ctx, filepath.Join(dir, lockFile))
	if errors.Is(err, fs.ErrNotExist) {
		return turn.NewState(), nil // deleted meanwhile
	}
	if err != nil {
		return turn.State{}, fmt.Errorf("lock: %w", err)
	}
	defer lock.Unlock()
	st, _, err := s.read(dir)
	return st, err
}

// read returns the state of dir (NewState when there is none) and the
// journal's valid length, for cutting a torn tail. It starts from this
// process's cached state when the snapshot is the one it read, and folds
// only the journal lines after it.
func (s *Store) read(dir string) (turn.State, int64, error) {
	var snapSize int64
	var snapTime time.Time
	if fi, err := os.Stat(filepath.Join(dir, snapshotFile)); err == nil {
		snapSize, snapTime = fi.Size(), fi.ModTime()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return turn.State{}, 0, err
	}
	s.mu.Lock()
	c, ok := s.cache[dir]
	s.mu.Unlock()
	var st turn.State
	var offset int64
	if ok && c.snapSize == snapSize && c.snapTime.Equal(snapTime) {
		st, offset = c.st, c.valid
	} else {
		var err error
		if st, err = readSnapshot(dir); err != nil {
			return st, 0, err
		}
	}
	st, valid, err := readJournal(dir, st, offset)
	if errors.Is(err, errJournalShrank) && offset > 0 {
		// Emptied by another process's rebase: start over from disk.
		s.forget(dir)
		return s.read(dir)
	}
	if err != nil {
		return st, valid, err
	}
	s.mu.Lock()
	s.cache[dir] = cached{snapSize: snapSize, snapTime: snapTime, valid: valid, st: st}
	s.mu.Unlock()
	return st, valid, nil
}

func (s *Store) forget(dir string) {
	s.mu.Lock()
	delete(s.cache, dir)
	s.mu.Unlock()
}

func readSnapshot(dir string) (turn.State, error) {
	st := turn.NewState()
	raw, err := os.ReadFile(filepath.Join(dir, snapshotFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return st, nil
	case err != nil:
		return st, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("%w: snapshot: %s", domain.ErrCorrupt, domain.JSONErrorWithoutContent(err))
	}
	if st.Turns == nil {
		st.Turns = map[string]turn.Turn{}
	}
	if st.Calls == nil {
		st.Calls = map[string]turn.Call{}
	}
	if st.TurnEvents == nil {
		st.TurnEvents = map[string][]turn.TurnEvent{}
	}
	return st, nil
}

var errJournalShrank = errors.New("journal shorter than read before")

// readJournal folds the journal's whole lines from offset into st.
func readJournal(dir string, st turn.State, offset int64) (turn.State, int64, error) {
	f, err := os.Open(filepath.Join(dir, journalFile))
	if errors.Is(err, fs.ErrNotExist) {
		if offset > 0 {
			return st, 0, errJournalShrank
		}
		return st, 0, nil
	}
	if err != nil {
		return st, offset, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return st, offset, err
	} else if fi.Size() < offset {
		return st, offset, errJournalShrank
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return st, offset, err
	}
	r := bufio.NewReaderSize(f, 64<<10)
	valid := offset
	for {
		b, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			// A last line without its newline was cut by a crash: its
			// commit never happened.
			return st, valid, nil
		}
		if err != nil {
			return st, valid, err
		}
		var l line
		if err := json.Unmarshal(b, &l); err != nil {
			return st, valid, fmt.Errorf("%w: journal at byte %d: %s", domain.ErrCorrupt, valid, domain.JSONErrorWithoutContent(err))
		}
		valid += int64(len(b))
		if l.Version <= st.Instance.Version {
			continue // folded into the snapshot already
		}
		if st, err = turn.Apply(st, l.Commit); err != nil {
			return st, valid, fmt.Errorf("%w: journal at byte %d: %v", domain.ErrCorrupt, valid, err)
		}
	}
}

// Commit implements turn.Store.
func (s *Store) Commit(ctx context.Context, c turn.Commit) error {
	if err := c.Validate(); err != nil {
		return err
	}
	dir := s.instanceDir(c.Instance.Key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("turnfile: commit: %w", err)
	}
	lock, err := atomicfile.LockFile(ctx, filepath.Join(dir, lockFile))
	if err != nil {
		return fmt.Errorf("turnfile: commit: lock: %w", err)
	}
	defer lock.Unlock()
	st, valid, err := s.read(dir)
	if err != nil {
		return fmt.Errorf("turnfile: commit %s: %w", c.Instance.Key, err)
	}
	next, err := turn.Apply(st, c)
	if errors.Is(err, turn.ErrStale) {
		return err
	}
	if err != nil {
		return fmt.Errorf("turnfile: commit %s: %w", c.Instance.Key, err)
	}
	if c.Expect == 0 {
		kb, _ := json.Marshal(c.Instance.Key)
		if err := atomicfile.Replace(filepath.Join(dir, keyFile), kb, 0o600); err != nil {
			return fmt.Errorf("turnfile: commit: key: %w", err)
		}
	}
	if c.Rebase {
		err = s.rebase(dir, next)
	} else {
		err = s.appendLine(dir, valid, line{Version: c.Instance.Version, Commit: c})
	}
	if err != nil {
		s.forget(dir)
	}
	return err
}

// appendLine cuts a torn tail at valid, appends l and syncs.
func (s *Store) appendLine(dir string, valid int64, l line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("turnfile: commit: %w", err)
	}
	b = append(b, '\n')
	path := filepath.Join(dir, journalFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("turnfile: commit: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(valid); err != nil {
		return fmt.Errorf("turnfile: commit: %w", err)
	}
	if _, err := f.WriteAt(b, valid); err != nil {
		// A partial line stays torn and is cut by the next commit.
		return fmt.Errorf("turnfile: commit: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("turnfile: commit: %w", err)
	}
	return nil
}

// rebase writes st as the new snapshot, then empties the journal. A crash
// between the two is harmless: lines at or below the snapshot's version
// are skipped on read.
func (s *Store) rebase(dir string, st turn.State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("turnfile: snapshot: %w", err)
	}
	if err := atomicfile.Replace(filepath.Join(dir, snapshotFile), b, 0o600); err != nil {
		return fmt.Errorf("turnfile: snapshot: %w", err)
	}
	if err := os.Truncate(filepath.Join(dir, journalFile), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("turnfile: snapshot: %w", err)
	}
	return nil
}

// List implements turn.Store.
func (s *Store) List(ctx context.Context) ([]turn.Instance, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("turnfile: list: %w", err)
	}
	var out []turn.Instance
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		st, err := s.readLocked(ctx, filepath.Join(s.dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("turnfile: list: %s: %w", e.Name(), err)
		}
		if st.Instance.Version > 0 {
			out = append(out, st.Instance)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out, nil
}

// Delete implements turn.Store: under the instance's lock, so no commit
// lands in a half-removed directory.
func (s *Store) Delete(ctx context.Context, k turn.InstanceKey) error {
	if err := k.Validate(); err != nil {
		return err
	}
	dir := s.instanceDir(k)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("turnfile: delete %s: %w", k, domain.ErrNotFound)
	}
	lock, err := atomicfile.LockFile(ctx, filepath.Join(dir, lockFile))
	if err != nil {
		return fmt.Errorf("turnfile: delete: lock: %w", err)
	}
	for _, name := range []string{journalFile, snapshotFile, keyFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			lock.Unlock()
			return fmt.Errorf("turnfile: delete %s: %w", k, err)
		}
	}
	s.forget(dir)
	if err := lock.RemoveAndUnlock(); err != nil {
		return fmt.Errorf("turnfile: delete %s: %w", k, err)
	}
	_ = os.Remove(dir) // empty now unless a writer raced in; it then re-creates what it needs
	return nil
}

// JournalBytes is the journal's size (benchmarks: bytes written per step).
func (s *Store) JournalBytes(k turn.InstanceKey) int64 {
	fi, err := os.Stat(filepath.Join(s.instanceDir(k), journalFile))
	if err != nil {
		return 0
	}
	return fi.Size()
}
