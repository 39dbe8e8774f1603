package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// sessionRecords keeps auth sessions as sessions/<sessionId>.enc.json in dir.
func sessionRecords(dir string) *records[domain.Session] {
	return &records[domain.Session]{
		dir:     dir,
		kind:    KindSession,
		name:    "session",
		valid:   domain.ValidateSessionID,
		copy:    copySession,
		withID:  func(sess domain.Session, id string) domain.Session { sess.ID = id; return sess },
		sealed:  (*domain.Session).SealedFields,
		bind:    domain.SessionBinding,
		version: func(sess *domain.Session) *int64 { return &sess.Version },
	}
}

func (s *Store) sessionPath(id string) string { return s.sessions.path(id) }

// CreateSession writes a new session as given (Version included, normally
// 0); ErrConflict when the id exists, or when sess has a reuse key that a
// pending session still holds (see index.go).
func (s *Store) CreateSession(ctx context.Context, sess domain.Session) error {
	if err := domain.ValidateSessionID(sess.ID); err != nil {
		return fmt.Errorf("filestore: create session: %w", err)
	}
	if sess.ReuseKey != "" {
		if err := domain.ValidateReuseKey(sess.ReuseKey); err != nil {
			return fmt.Errorf("filestore: create session %s: %w", sess.ID, err)
		}
	}
	data, written, err := s.sessions.encode(sess.ID, sess)
	if err != nil {
		return fmt.Errorf("filestore: create session %s: %w", sess.ID, err)
	}
	// The list entries and the pending index's marker come first (see
	// lists.go, pending.go).
	entries := s.sessionEntries(sess)
	if err := addEntries(entries); err != nil {
		return fmt.Errorf("filestore: create session %s: %w", sess.ID, err)
	}
	key, indexed := indexedKey(sess)
	if indexed {
		if err := s.addPendingMarker(key, sess.ID); err != nil {
			return fmt.Errorf("filestore: create session %s: %w", sess.ID, err)
		}
	}
	var st fileStamp
	if sess.ReuseKey != "" {
		st, err = s.createReusable(ctx, sess, data)
	} else {
		// link(2) refuses an existing name, so no lock is needed to
		// create once.
		st, err = createFileExclusive(s.sessionPath(sess.ID), data)
	}
	if err != nil {
		// Refused or failed before the session was written: its marker
		// and entries go. A session with this id that is there (one that
		// existed already, or this one, written without its reuse
		// pointer) keeps them: one too many is ignored, one too few is
		// not.
		if _, serr := os.Lstat(s.sessionPath(sess.ID)); errors.Is(serr, fs.ErrNotExist) {
			if indexed {
				s.dropPendingMarker(key, sess.ID)
			}
			dropEntries(entries, nil)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("filestore: create session %s: already exists: %w", sess.ID, domain.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("filestore: create session %s: %w", sess.ID, err)
	}
	s.sessions.remember(sess.ID, st, written)
	return nil
}

// GetSession returns the session with id.
func (s *Store) GetSession(_ context.Context, id string) (domain.Session, error) {
	return s.sessions.get(id)
}

// UpdateSession writes sess when the stored version equals sess.Version and
// returns it with the version bumped; ErrNotFound when it does not exist.
func (s *Store) UpdateSession(ctx context.Context, sess domain.Session) (domain.Session, error) {
	if err := domain.ValidateSessionID(sess.ID); err != nil {
		return domain.Session{}, fmt.Errorf("filestore: update session: %w", err)
	}
	l, err := s.lock(ctx, s.sessions.lockName(sess.ID))
	if err != nil {
		return domain.Session{}, fmt.Errorf("filestore: update session %s: %w", sess.ID, err)
	}
	defer l.release(false)
	stored, err := s.sessions.load(sess.ID)
	if err != nil {
		return domain.Session{}, fmt.Errorf("filestore: update session %s: %w", sess.ID, err)
	}
	if stored.Version != sess.Version {
		return domain.Session{}, fmt.Errorf("filestore: update session %s: stored version %d, expected %d: %w",
			sess.ID, stored.Version, sess.Version, domain.ErrConflict)
	}
	if key, ok := indexedKey(sess); ok {
		if err := s.addPendingMarker(key, sess.ID); err != nil {
			return domain.Session{}, fmt.Errorf("filestore: update session %s: %w", sess.ID, err)
		}
	}
	entries := s.sessionEntries(sess)
	if err := addEntries(entries); err != nil {
		return domain.Session{}, fmt.Errorf("filestore: update session %s: %w", sess.ID, err)
	}
	sess.Version++
	written, err := s.sessions.write(sess.ID, sess)
	if err != nil {
		return domain.Session{}, fmt.Errorf("filestore: update session %s: %w", sess.ID, err)
	}
	s.unindexAfterWrite(stored, written)
	dropEntries(s.sessionEntries(stored), entries)
	return written, nil
}

// CompleteSession moves a pending session to completed and upserts g,
// holding both records' locks (session first, then grant, always in that
// order). The grant is written first: a crash between the two writes leaves
// the session pending, and a retry completes it.
func (s *Store) CompleteSession(ctx context.Context, sessionID string, at time.Time, g domain.Grant) (domain.Session, domain.Grant, error) {
	fail := func(err error) (domain.Session, domain.Grant, error) {
		return domain.Session{}, domain.Grant{}, fmt.Errorf("filestore: complete session %s: %w", sessionID, err)
	}
	if err := domain.ValidateSessionID(sessionID); err != nil {
		return fail(err)
	}
	if err := domain.ValidateGrantID(g.ID); err != nil {
		return fail(err)
	}
	sl, err := s.lock(ctx, s.sessions.lockName(sessionID))
	if err != nil {
		return fail(err)
	}
	defer sl.release(false)
	sess, err := s.pendingSession(sessionID)
	if err != nil {
		return fail(err)
	}
	gl, err := s.lock(ctx, s.grants.lockName(g.ID))
	if err != nil {
		return fail(err)
	}
	defer gl.release(false)
	grant, err := s.upsertGrantLocked(g)
	if err != nil {
		return fail(fmt.Errorf("grant %s: %w", g.ID, err))
	}
	if err := addEntries(s.sessionEntries(sess)); err != nil {
		return fail(err)
	}
	written, err := s.sessions.write(sess.ID, completedSession(sess, at))
	if err != nil {
		return fail(err)
	}
	s.unindexAfterWrite(sess, written)
	return written, grant, nil
}

// pendingSession loads the session with id, which must be pending; the
// caller holds its lock.
func (s *Store) pendingSession(id string) (domain.Session, error) {
	sess, err := s.sessions.load(id)
	if err != nil {
		return domain.Session{}, err
	}
	if !domain.Completable(sess.Status) {
		return domain.Session{}, fmt.Errorf("status is %s, not pending or exchanging: %w", sess.Status, domain.ErrConflict)
	}
	return sess, nil
}

// upsertGrantLocked writes g as the next version of the stored grant, or as
// version 1 when there is none; the caller holds the grant's lock. A new
// consent renews a grant, it does not create one, so a stored grant's
// CreatedAt is kept.
func (s *Store) upsertGrantLocked(g domain.Grant) (domain.Grant, error) {
	prev, err := s.grants.load(g.ID)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		prev = domain.Grant{}
		g.Version = 1
	case err != nil:
		return domain.Grant{}, err
	default:
		g.Version = prev.Version + 1
		g.CreatedAt = prev.CreatedAt
	}
	return s.writeGrantLocked(prev, g)
}

// completedSession is sess, pending, moved to completed at at: the next
// version.
func completedSession(sess domain.Session, at time.Time) domain.Session {
	sess.Status = domain.SessionCompleted
	sess.CompletedAt = &at
	sess.Version++
	return sess
}

// ListSessions returns every readable session in id order, plus one error
// per file that could not be read.
func (s *Store) ListSessions(ctx context.Context) ([]domain.Session, []error, error) {
	return s.sessions.list(ctx)
}

// DeleteSession removes the session file; ErrNotFound when absent. An
// unreadable session can be deleted too (that is how an operator clears it).
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := domain.ValidateSessionID(id); err != nil {
		return fmt.Errorf("filestore: delete session: %w", err)
	}
	l, err := s.lock(ctx, s.sessions.lockName(id))
	if err != nil {
		return fmt.Errorf("filestore: delete session %s: %w", id, err)
	}
	// Its reuse pointer goes too; an unreadable session keeps its pointer,
	// which lookups ignore once the session is gone.
	sess, loadErr := s.sessions.load(id)
	err = os.Remove(s.sessionPath(id))
	s.sessions.drop(id)
	if errors.Is(err, fs.ErrNotExist) {
		l.release(true)
		return fmt.Errorf("filestore: delete session %s: %w", id, domain.ErrNotFound)
	}
	if err != nil {
		l.release(false)
		return fmt.Errorf("filestore: delete session %s: %w", id, err)
	}
	atomicfile.SyncDir(s.sessionsDir)
	if loadErr == nil {
		s.unindexAfterWrite(sess, domain.Session{})
		dropEntries(s.sessionEntries(sess), nil)
	}
	l.release(true)
	if loadErr == nil && sess.ReuseKey != "" && domain.ValidateReuseKey(sess.ReuseKey) == nil {
		if err := s.dropReusePointer(ctx, sess.ReuseKey, id); err != nil {
			return fmt.Errorf("filestore: delete session %s: session deleted, its reuse pointer not: %w", id, err)
		}
	}
	return nil
}
