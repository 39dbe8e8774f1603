package filestore

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
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// The session index (domain.SessionIndex). What sits on the request path
// has files keyed by what it looks up: the reuse lookup here, a file per
// key, reuse/<reuseKey>.json naming the session that took the key; the
// pending sessions of a resume target (every turn step asks) in
// pending.go. The sweep's sets, read once a minute, read the sessions
// directory and filter. That file is
// only ever a pointer: a lookup reads the session it names and returns it
// only when that session holds the key and is reusable now, so a pointer
// left behind by a session that completed, failed, expired or was deleted
// never yields it. CreateSession replaces such a pointer; DeleteSession
// removes the pointer of the session it deletes.

// reusePointer is a reuse/<key>.json file.
type reusePointer struct {
	SessionID string `json:"sessionId"`
}

func (s *Store) reusePath(key string) string {
	return filepath.Join(s.reuseDir, key+".json")
}

func reuseLockName(key string) string { return "reuse-" + key }

// readReusePointer returns the id the key's pointer names; ok is false
// when there is none, or it does not decode (a pointer is rebuilt by the
// next CreateSession with the key, so an unreadable one must not block it).
func (s *Store) readReusePointer(key string) (string, bool, error) {
	data, _, err := readFile(s.reusePath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	var p reusePointer
	if json.Unmarshal(data, &p) != nil || domain.ValidateSessionID(p.SessionID) != nil {
		return "", false, nil
	}
	return p.SessionID, true, nil
}

// reuseHolder returns the session key's pointer names when it holds key
// and is reusable at at; ok is false otherwise. An unreadable session is
// an error.
func (s *Store) reuseHolder(key string, at time.Time) (domain.Session, bool, error) {
	id, ok, err := s.readReusePointer(key)
	if err != nil || !ok {
		return domain.Session{}, false, err
	}
	sess, err := s.sessions.get(id)
	if errors.Is(err, domain.ErrNotFound) {
		return domain.Session{}, false, nil
	}
	if err != nil {
		return domain.Session{}, false, err
	}
	return sess, sess.ReuseKey == key && sess.ReusableAt(at), nil
}

// FindPendingSession returns the session that holds reuseKey and is
// reusable at at: one read of the key's pointer, one of the session.
func (s *Store) FindPendingSession(_ context.Context, reuseKey string, at time.Time) (domain.Session, error) {
	if err := domain.ValidateReuseKey(reuseKey); err != nil {
		return domain.Session{}, fmt.Errorf("filestore: find pending session: %w", err)
	}
	sess, ok, err := s.reuseHolder(reuseKey, at)
	if err != nil {
		return domain.Session{}, fmt.Errorf("filestore: find pending session %s: %w", reuseKey, err)
	}
	if !ok {
		return domain.Session{}, fmt.Errorf("filestore: find pending session %s: %w", reuseKey, domain.ErrNotFound)
	}
	return sess, nil
}

// createReusable creates sess and points its reuse key at it, holding the
// key's lock, unless a session that holds the key is still reusable.
// The session is written first: a crash between the two writes leaves a
// session no lookup finds, never a pointer to a session that is not there
// (which a lookup would ignore anyway).
func (s *Store) createReusable(ctx context.Context, sess domain.Session, data []byte) (fileStamp, error) {
	l, err := s.lock(ctx, reuseLockName(sess.ReuseKey))
	if err != nil {
		return fileStamp{}, err
	}
	defer l.release(false)
	holder, taken, err := s.reuseHolder(sess.ReuseKey, sess.CreatedAt)
	if err != nil && !errors.Is(err, domain.ErrCorrupt) {
		return fileStamp{}, fmt.Errorf("reuse key %s: %w", sess.ReuseKey, err)
	}
	if taken {
		return fileStamp{}, fmt.Errorf("reuse key %s is held by pending session %s: %w", sess.ReuseKey, holder.ID, domain.ErrConflict)
	}
	st, err := createFileExclusive(s.sessionPath(sess.ID), data)
	if err != nil {
		return fileStamp{}, err
	}
	pointer, err := json.Marshal(reusePointer{SessionID: sess.ID})
	if err != nil {
		return fileStamp{}, err
	}
	if _, err := writeFileAtomic(s.reusePath(sess.ReuseKey), append(pointer, '\n')); err != nil {
		// The session stands without a pointer: it works, it is just not
		// found for reuse.
		return st, fmt.Errorf("session %s written, its reuse pointer not: %w", sess.ID, err)
	}
	return st, nil
}

// dropReusePointer removes key's pointer if it still names id.
func (s *Store) dropReusePointer(ctx context.Context, key, id string) error {
	l, err := s.lock(ctx, reuseLockName(key))
	if err != nil {
		return err
	}
	cur, ok, err := s.readReusePointer(key)
	if err != nil || !ok || cur != id {
		l.release(false)
		return err
	}
	if err := os.Remove(s.reusePath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.release(false)
		return err
	}
	l.release(true)
	return nil
}

// ListSweepSessions reads the sessions directory and keeps set's sessions
// that expired by expiredBy, by ExpiresAt (then id).
func (s *Store) ListSweepSessions(ctx context.Context, set domain.SweepSet, expiredBy time.Time) ([]domain.Session, []error, error) {
	all, bad, err := s.sessions.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	out := slices.DeleteFunc(all, func(sess domain.Session) bool {
		return domain.SweepSetOf(sess) != set || !expiredBy.IsZero() && sess.ExpiresAt.After(expiredBy)
	})
	slices.SortStableFunc(out, func(a, b domain.Session) int {
		return cmp.Or(a.ExpiresAt.Compare(b.ExpiresAt), strings.Compare(a.ID, b.ID))
	})
	return out, bad, nil
}
