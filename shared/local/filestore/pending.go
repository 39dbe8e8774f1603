package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// The index of pending sessions by resume target, which
// ListPendingSessions reads on every turn step: pending/<targetKey>/ holds
// an empty marker file named by the id of each session that is pending for
// that target (targetKey is domain.ResumeTargetKey of the session's
// swarm, instance key and agent; a session without a complete target has
// no marker). A lookup lists its target's directory and reads each session
// it names (a stat when cached), keeping those that are pending, unexpired
// and resume exactly that target: a marker is a hint, the session decides.
// So a lookup costs what its target has, never what the store holds.
//
// Crash safety: a marker is written and synced before the session write
// that makes the session pending for its target (CreateSession,
// UpdateSession), and removed after the write that takes it out (another
// status, another target, completion, deletion). A crash in between leaves
// a marker too many, which lookups ignore, never one too few. A marker too
// many goes with the next write or deletion of its session, or, when its
// session was never written (a CreateSession that crashed or was refused
// between the two writes), with a lookup that finds it older than
// staleMarkerAge. A target's directory goes with its last marker.
//
// Homes written before the index get it built once, by New, from
// sessions/ (buildPendingIndex).

const (
	pendingDirName = "pending"
	// staleMarkerAge is how old a marker whose session does not exist
	// must be before a lookup removes it: the gap it covers, between a
	// CreateSession's marker and its session file, lasts milliseconds.
	staleMarkerAge = time.Hour
	// mkdirRetries bounds how often addPendingMarker makes its target's
	// directory again after a concurrent removal of the last marker took
	// it away.
	mkdirRetries = 3
)

// pendingKey is the index key of sess: its target's key, when that target
// is complete. ok is false for a session no target lists.
func pendingKey(sess domain.Session) (key string, ok bool) {
	t := sess.Resume.Target()
	if t.Validate() != nil {
		return "", false
	}
	return domain.ResumeTargetKey(t), true
}

// indexedKey is pendingKey of a session that is pending: the marker sess
// must have.
func indexedKey(sess domain.Session) (string, bool) {
	if sess.Status != domain.SessionPending {
		return "", false
	}
	return pendingKey(sess)
}

func (s *Store) targetDir(key string) string { return filepath.Join(s.pendingDir, key) }

// addPendingMarker writes (and syncs) the marker of session id under key;
// one already there is kept.
func (s *Store) addPendingMarker(key, id string) error {
	if err := addMarker(s.pendingDir, key, id); err != nil {
		return fmt.Errorf("pending index %s: %w", key, err)
	}
	return nil
}

// addMarker writes the marker of session id under key in the index
// directory root.
func addMarker(root, key, id string) error {
	dir := filepath.Join(root, key)
	if _, err := os.Lstat(filepath.Join(dir, id)); err == nil {
		return nil // an update of a session that stays pending
	}
	for attempt := 1; ; attempt++ {
		err := os.Mkdir(dir, 0o700)
		switch {
		case err == nil:
			err = atomicfile.SyncDir(root)
		case errors.Is(err, fs.ErrExist):
			err = nil
		}
		if err == nil {
			err = atomicfile.CreateExclusive(filepath.Join(dir, id), nil, 0o600)
			if err == nil || errors.Is(err, fs.ErrExist) {
				return nil
			}
		}
		// ErrNotExist: the directory went with another session's last
		// marker after Mkdir found it; make it again.
		if !errors.Is(err, fs.ErrNotExist) || attempt == mkdirRetries {
			return err
		}
	}
}

// dropPendingMarker removes the marker of session id under key, and the
// target's directory when that was its last marker. It is best effort: a
// marker left behind is one lookups ignore and a later write removes.
func (s *Store) dropPendingMarker(key, id string) {
	dir := s.targetDir(key)
	if err := os.Remove(filepath.Join(dir, id)); err != nil {
		return
	}
	// Fails while the directory holds anything, a concurrent writer's
	// temporary file included.
	_ = os.Remove(dir)
}

// unindexAfterWrite drops the marker of stored, the session as it was
// before a write that left sess, unless sess still needs it: called after
// the write, under the session's lock. It runs whatever stored's status
// was, so that a marker a crash left behind goes too.
func (s *Store) unindexAfterWrite(stored, sess domain.Session) {
	old, ok := pendingKey(stored)
	if !ok {
		return
	}
	if now, still := indexedKey(sess); still && now == old {
		return
	}
	s.dropPendingMarker(old, stored.ID)
}

// ListPendingSessions reads target's directory of the pending index and
// the sessions it names: what it costs follows the target's pending
// sessions (and markers a crash left), not the store's size. Sessions are
// in id order.
func (s *Store) ListPendingSessions(_ context.Context, target domain.ResumeTarget, at time.Time) ([]domain.Session, []error, error) {
	if err := target.Validate(); err != nil {
		return nil, nil, fmt.Errorf("filestore: list pending sessions: %w", err)
	}
	key := domain.ResumeTargetKey(target)
	dir := s.targetDir(key)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("filestore: list pending sessions %s: %w", key, err)
	}
	var out []domain.Session
	var bad []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || domain.ValidateSessionID(name) != nil {
			s.pruneStale(dir, name, atomicfile.IsTemp(name))
			continue
		}
		sess, err := s.sessions.get(name)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			s.pruneStale(dir, name, true)
		case err != nil:
			bad = append(bad, err)
		case sess.Status == domain.SessionPending && sess.ExpiresAt.After(at) && sess.Resume.Target() == target:
			out = append(out, sess)
		}
	}
	return out, bad, nil
}

// pruneStale removes dir's entry name when remove says it may go and it is
// older than staleMarkerAge: a marker whose session does not exist, or a
// temporary file a crash left.
func (s *Store) pruneStale(dir, name string, remove bool) {
	if !remove {
		return
	}
	path := filepath.Join(dir, name)
	fi, err := os.Lstat(path)
	if err != nil || time.Since(fi.ModTime()) <= staleMarkerAge {
		return
	}
	if os.Remove(path) == nil {
		_ = os.Remove(dir)
	}
}

// buildPendingIndex gives a home without the index (one written before
// it, or a new one) its pending/ directory: the marker of every pending
// session, written into a directory of its own and renamed into place, so
// pending/ exists only complete. Of processes building at once the first
// rename wins; the others find pending/ there and drop their build. Every
// process that has opened the store writes markers, so pending/ stays
// complete from then on (a process of an older version writing to the
// same home does not).
func (s *Store) buildPendingIndex() error {
	if _, err := os.Stat(s.pendingDir); err == nil {
		return nil
	}
	removeStaleBuilds(s.root, buildPrefix)
	build, err := os.MkdirTemp(s.root, buildPrefix)
	if err != nil {
		return fmt.Errorf("build the pending index: %w", err)
	}
	defer os.RemoveAll(build) // a build that was not renamed
	// Unreadable sessions are left out: the sweep reports them, and a
	// lookup could not list them either.
	all, _, err := s.sessions.list(context.Background())
	if err != nil {
		return fmt.Errorf("build the pending index: %w", err)
	}
	for _, sess := range all {
		if key, ok := indexedKey(sess); ok {
			if err := addMarker(build, key, sess.ID); err != nil {
				return fmt.Errorf("build the pending index: session %s: %w", sess.ID, err)
			}
		}
	}
	if err := os.Rename(build, s.pendingDir); err != nil {
		if _, serr := os.Stat(s.pendingDir); serr == nil {
			return nil // another process's build won
		}
		return fmt.Errorf("build the pending index: %w", err)
	}
	if err := atomicfile.SyncDir(s.root); err != nil {
		return fmt.Errorf("build the pending index: %w", err)
	}
	return nil
}

// buildPrefix names buildPendingIndex's directories under <home>/oauth.
const buildPrefix = ".pending-build-"

// removeStaleBuilds removes the build directories (named prefix…) a
// crashed build left in root; a live build's is young.
func removeStaleBuilds(root, buildPrefix string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), buildPrefix) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleMarkerAge {
			_ = os.RemoveAll(filepath.Join(root, e.Name()))
		}
	}
}
