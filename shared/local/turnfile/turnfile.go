// Package turnfile is the embedded turn.Store: each agent instance is a
// directory under <home>/turns holding a snapshot and a journal. A commit
// is one line appended to the journal and synced — so what a step writes
// grows with the step, not with the conversation — and a turn's end
// (a rebase) writes a new snapshot and only then empties the journal, so
// a snapshot write that fails loses no commit.
//
// Atomicity: a line is whole or it is not there (a torn last line, from a
// crash mid-write, is ignored on read and cut on the next commit); the
// instance's advisory lock and the version in every line fence concurrent
// writers, also across processes sharing the home. A directory lives as
// long as its instance: Delete removes it, lock file included, and whoever
// holds the lock of a directory with no instance in it (a refused first
// commit, a read that raced a delete, a crash before the first commit)
// removes it too (on Windows the lock file, and so the directory, stay:
// atomicfile.Lock.RemoveAndUnlock).
//
// Memory: a Store keeps the states it has read, least recently used out
// first, up to CacheBytes of the files they were read from (default
// DefaultCacheBytes), so a step's read parses only the journal lines
// since. What bounds one state is turn.Apply: the latest KeepProcessed
// queue event ids, the latest KeepTurns ended turns with their events,
// the tool calls of turns not ended. Nothing bounds the conversation: the
// base holds every message since the instance began (nothing truncates it
// unless a message event asks, and the engine writes none) and the
// backlog every event still waiting. So a long conversation's snapshot,
// its rewrite at every turn's end, a read that misses the cache and every
// model request grow with it; a state larger than the cache is parsed
// again at every read, and a conversation that outgrows the model's
// context window fails its turns until the instance is deleted.
//
// List reads every instance and names those it cannot read
// (turn.Unreadable) beside the others; QueryInstances (the console) reads
// one page through an index under <dir>/list (lists.go). The package must never put an
// instance key in a path (directories are named by a hash) or a stored
// value in an error or a reason.
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
	// mu guards cache: the states this process read last, by directory.
	mu    sync.Mutex
	cache *lru
	// replace writes a file whole (atomicfile.Replace): the snapshot at a
	// rebase. Tests make it fail.
	replace func(path string, data []byte, perm fs.FileMode) error
}

var _ turn.Store = (*Store)(nil)

// Option configures a Store.
type Option func(*Store)

// CacheBytes bounds the states a Store keeps in memory by the size of the
// files they were read from (DefaultCacheBytes without it; 0 keeps none).
// The heap they hold is about 1.3 times that.
func CacheBytes(n int64) Option { return func(s *Store) { s.cache = newLRU(n) } }

// New opens (creating with mode 0700) dir.
func New(dir string, opts ...Option) (*Store, error) {
	s := &Store{dir: dir, cache: newLRU(DefaultCacheBytes), replace: atomicfile.Replace}
	for _, o := range opts {
		o(s)
	}
	if s.cache.max < 0 {
		return nil, fmt.Errorf("turnfile: cache of %d bytes", s.cache.max)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("turnfile: %w", err)
	}
	if err := s.buildListIndex(); err != nil {
		return nil, fmt.Errorf("turnfile: %w", err)
	}
	return s, nil
}

// ReleaseCache drops every state this Store holds in memory; the next
// read of each instance parses its files again. serve calls it when it has
// been idle (cmd/agentauth idle.go), so a server that handled a burst
// returns to its idle footprint instead of holding the burst's states.
func (s *Store) ReleaseCache() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cache.clear()
}

const (
	snapshotFile = "snapshot.json"
	journalFile  = "journal.jsonl"
	lockFile     = "instance.lock"
	keyFile      = "key.json"
)

// instanceDir names an instance's directory by a hash of its key.
func (s *Store) instanceDir(k turn.InstanceKey) string {
	return filepath.Join(s.dir, s.instanceDirName(k))
}

func (s *Store) instanceDirName(k turn.InstanceKey) string {
	sum := sha256.Sum256([]byte(k.String()))
	return hex.EncodeToString(sum[:16])
}

// isInstanceDir reports whether name is one instanceDir makes: List
// leaves anything else in the directory alone.
func isInstanceDir(name string) bool {
	if len(name) != 32 {
		return false
	}
	for _, r := range name {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}

// lock takes the lock of the instance in dir. A commit (create) makes the
// directory first, and again when a clean-up removed it between the two;
// otherwise a missing directory is fs.ErrNotExist: there is no instance.
func lock(ctx context.Context, dir string, create bool) (*atomicfile.Lock, error) {
	for attempt := 0; ; attempt++ {
		if create {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, err
			}
		}
		l, err := atomicfile.LockFile(ctx, filepath.Join(dir, lockFile))
		if !create || !errors.Is(err, fs.ErrNotExist) || attempt == 100 {
			return l, err
		}
	}
}

// removeDir removes the instance in dir, whose lock l the caller holds,
// and releases l: the files, then the lock file (a waiter then finds its
// file gone and starts over: atomicfile.LockFile), then the directory,
// which stays only if a writer has meanwhile put a new lock file in it.
func (s *Store) removeDir(l *atomicfile.Lock, dir string) error {
	s.forget(dir)
	for _, name := range []string{journalFile, snapshotFile, keyFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.Unlock()
			return err
		}
	}
	_ = atomicfile.RemoveStaleTemps(dir, 0) // a crashed snapshot write's: only a holder of the lock writes one
	if err := l.RemoveAndUnlock(); err != nil {
		return err
	}
	_ = os.Remove(dir)
	return nil
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
	st, err := s.readLocked(ctx, s.instanceDir(k), true)
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
// reader would start mid-line in the new journal. A directory that holds
// no instance is removed (the lock taken may have made its lock file).
func (s *Store) readLocked(ctx context.Context, dir string, fill bool) (turn.State, error) {
	l, err := lock(ctx, dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return turn.NewState(), nil // none, or deleted meanwhile
	}
	if err != nil {
		return turn.State{}, fmt.Errorf("lock: %w", err)
	}
	st, _, err := s.read(dir, fill)
	if err == nil && st.Instance.Version == 0 {
		_ = s.removeDir(l, dir) // best effort: the next holder tries again
		return st, nil
	}
	l.Unlock()
	return st, err
}

// read returns the state of dir (NewState when there is none) and the
// journal's valid length, for cutting a torn tail. It starts from this
// process's cached state when the snapshot is the one it read, and folds
// only the journal lines after it. The state read is cached when fill is
// set or dir was cached already.
func (s *Store) read(dir string, fill bool) (turn.State, int64, error) {
	var snapSize int64
	var snapTime time.Time
	if fi, err := os.Stat(filepath.Join(dir, snapshotFile)); err == nil {
		snapSize, snapTime = fi.Size(), fi.ModTime()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return turn.State{}, 0, err
	}
	s.mu.Lock()
	c, ok := s.cache.get(dir)
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
		return s.read(dir, fill)
	}
	if err != nil {
		return st, valid, err
	}
	if fill || ok {
		s.mu.Lock()
		s.cache.put(dir, cached{snapSize: snapSize, snapTime: snapTime, valid: valid, st: st})
		s.mu.Unlock()
	}
	return st, valid, nil
}

func (s *Store) forget(dir string) {
	s.mu.Lock()
	s.cache.remove(dir)
	s.mu.Unlock()
}

func readSnapshot(dir string) (turn.State, error) {
	st := turn.NewState()
	raw, err := atomicfile.ReadFile(filepath.Join(dir, snapshotFile))
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
	f, err := atomicfile.Open(filepath.Join(dir, journalFile))
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
			return st, valid, fmt.Errorf("%w: journal line at byte %d: %s", domain.ErrCorrupt, valid, domain.JSONErrorWithoutContent(err))
		}
		at := valid
		valid += int64(len(b))
		if l.Version <= st.Instance.Version {
			continue // folded into the snapshot already
		}
		if st, err = turn.Apply(st, l.Commit); err != nil {
			return st, valid, fmt.Errorf("%w: journal line at byte %d: %v", domain.ErrCorrupt, at, err)
		}
	}
}

// Commit implements turn.Store.
func (s *Store) Commit(ctx context.Context, c turn.Commit) error {
	if err := c.Validate(); err != nil {
		return err
	}
	dir := s.instanceDir(c.Instance.Key)
	l, err := lock(ctx, dir, true)
	if err != nil {
		return fmt.Errorf("turnfile: commit: lock: %w", err)
	}
	st, valid, err := s.read(dir, true)
	if err != nil {
		l.Unlock()
		return fmt.Errorf("turnfile: commit %s: %w", c.Instance.Key, err)
	}
	next, err := turn.Apply(st, c)
	if err != nil {
		if st.Instance.Version == 0 {
			// Refused over no instance (one deleted since the writer read
			// it): the directory made for it goes again.
			_ = s.removeDir(l, dir)
		} else {
			l.Unlock()
		}
		if errors.Is(err, turn.ErrStale) {
			return err
		}
		return fmt.Errorf("turnfile: commit %s: %w", c.Instance.Key, err)
	}
	defer l.Unlock()
	// The list entries first (lists.go): a crash leaves one too many.
	name := filepath.Base(dir)
	entries := s.instanceEntries(name, next.Instance)
	if err := addEntries(entries); err != nil {
		if st.Instance.Version == 0 {
			dropEntries(entries, nil)
		}
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
		return err
	}
	dropEntries(s.instanceEntries(name, st.Instance), entries)
	return nil
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

// rebase writes st as the new snapshot and only then empties the journal:
// a snapshot write that fails leaves the old snapshot and every line of
// the journal (TestFailedSnapshotLosesNoCommit). A crash between the two
// is harmless: lines at or below the snapshot's version are skipped on
// read.
func (s *Store) rebase(dir string, st turn.State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("turnfile: snapshot: %w", err)
	}
	if err := s.replace(filepath.Join(dir, snapshotFile), b, 0o600); err != nil {
		return fmt.Errorf("turnfile: snapshot: %w", err)
	}
	if err := os.Truncate(filepath.Join(dir, journalFile), 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("turnfile: snapshot: %w", err)
	}
	return nil
}

// List implements turn.Store. An instance it finds unreadable is named by
// its directory and, when its key file reads, its key; the others are
// listed all the same. It reads through the cache but does not fill it:
// a listing must not push out the states turns are running on.
func (s *Store) List(ctx context.Context) ([]turn.Instance, []turn.Unreadable, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("turnfile: list: %w", err)
	}
	var out []turn.Instance
	var bad []turn.Unreadable
	for _, e := range entries {
		if !e.IsDir() || !isInstanceDir(e.Name()) {
			continue
		}
		dir := filepath.Join(s.dir, e.Name())
		st, err := s.readLocked(ctx, dir, false)
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("turnfile: list: %w", ctx.Err())
		}
		switch {
		case err != nil:
			bad = append(bad, turn.Unreadable{Key: readKey(dir), ID: e.Name(), Reason: reason(err),
				Err: fmt.Errorf("turnfile: list: instance %s: %w", e.Name(), err)})
		case st.Instance.Version > 0:
			out = append(out, st.Instance)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key.String() < out[j].Key.String() })
	return out, bad, nil
}

// readKey is the key of the instance in dir from its key file (written
// once, whole, by the first commit); zero when it does not read.
func readKey(dir string) turn.InstanceKey {
	var k turn.InstanceKey
	b, err := atomicfile.ReadFile(filepath.Join(dir, keyFile))
	if err != nil || json.Unmarshal(b, &k) != nil || k.Validate() != nil {
		return turn.InstanceKey{}
	}
	return k
}

// reason describes a read's error for turn.Unreadable: a corrupt record
// in the store's own words (where, and the decode error without content:
// domain.JSONErrorWithoutContent), an I/O error by operation and file
// name — never a path.
func reason(err error) string {
	var pe *fs.PathError
	switch {
	case errors.Is(err, domain.ErrCorrupt):
		return err.Error()
	case errors.As(err, &pe):
		return pe.Op + " " + filepath.Base(pe.Path) + ": " + pe.Err.Error()
	}
	return "cannot read the instance"
}

// Delete implements turn.Store: under the instance's lock, so no commit
// lands in a half-removed directory. An instance that does not read (a
// corrupt journal) is deleted all the same: that is how it goes away.
func (s *Store) Delete(ctx context.Context, k turn.InstanceKey) error {
	if err := k.Validate(); err != nil {
		return err
	}
	dir := s.instanceDir(k)
	l, err := lock(ctx, dir, false)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("turnfile: delete %s: %w", k, domain.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("turnfile: delete: lock: %w", err)
	}
	st, _, rerr := s.read(dir, false)
	if err := s.removeDir(l, dir); err != nil {
		return fmt.Errorf("turnfile: delete %s: %w", k, err)
	}
	dropEntries(s.instanceEntries(filepath.Base(dir), st.Instance), nil)
	if rerr == nil && st.Instance.Version == 0 {
		return fmt.Errorf("turnfile: delete %s: %w", k, domain.ErrNotFound)
	}
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
