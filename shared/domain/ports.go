package domain

import (
	"context"
	"time"
)

// GrantStore persists sealed grants.
type GrantStore interface {
	// GetGrant returns ErrNotFound when absent, ErrCorrupt when unreadable.
	GetGrant(ctx context.Context, id string) (Grant, error)
	// PutGrant writes g if the stored version equals expectVersion (0: the
	// grant must not exist) and returns g with its new version; otherwise
	// ErrConflict.
	PutGrant(ctx context.Context, g Grant, expectVersion int64) (Grant, error)
	// ListGrants returns every readable grant; unreadable ones are skipped
	// and reported in the error list so one bad file never hides the rest.
	ListGrants(ctx context.Context) ([]Grant, []error, error)
}

// SessionStore persists sealed auth sessions.
type SessionStore interface {
	// CreateSession writes a new session; ErrConflict if the id exists.
	// A session with a ReuseKey also takes the key, in the same atomic
	// step: ErrConflict when another session holding it is still reusable
	// at s.CreatedAt (Session.ReusableAt; FindPendingSession returns that
	// one), so of concurrent creators with one key exactly one wins.
	CreateSession(ctx context.Context, s Session) error
	// GetSession returns ErrNotFound when absent, ErrCorrupt when unreadable.
	GetSession(ctx context.Context, id string) (Session, error)
	// UpdateSession writes s if the stored version equals s.Version and
	// returns it with its new version; otherwise ErrConflict.
	UpdateSession(ctx context.Context, s Session) (Session, error)
	// CompleteSession atomically moves a pending or exchanging session to
	// completed and writes the grant (upsert, version bumped past whatever
	// is stored, CreatedAt kept from a stored grant).
	// ErrConflict when the session is neither: a session completes at most
	// once.
	CompleteSession(ctx context.Context, sessionID string, at time.Time, g Grant) (Session, Grant, error)
	// ListSessions returns every readable session, as ListGrants.
	ListSessions(ctx context.Context) ([]Session, []error, error)
	// DeleteSession removes a session; ErrNotFound when absent.
	DeleteSession(ctx context.Context, id string) error
}

// SessionIndex answers the session queries of the request path and the
// sweep by key, so that what they cost follows what they return, never
// how many records the store holds. Every write a store makes
// (CreateSession, UpdateSession, CompleteSession, DeleteSession) keeps it
// right: FindPendingSession and ListSweepSessions never return a session
// that has left pending or its set; ListPendingSessions only for as long
// as the store's index lags (see there).
type SessionIndex interface {
	// FindPendingSession returns the session that holds reuseKey
	// (Session.ReuseKey) and is reusable at at (Session.ReusableAt), as
	// stored now; ErrNotFound when there is none, ErrInvalidID when the
	// key is not a SessionReuseKey.
	FindPendingSession(ctx context.Context, reuseKey string, at time.Time) (Session, error)
	// ListPendingSessions returns the sessions that are pending, expire
	// after at and resume exactly target (ResumeInfo.Target: swarm,
	// instance key and agent name all equal), plus one error per record
	// that could not be read; ErrInvalidID when target is incomplete
	// (ResumeTarget.Validate). It reads the index of target's pending
	// sessions, so its cost follows how many that target has, never how
	// many sessions the store holds. A store whose index follows its
	// records with a lag (DynamoDB's global secondary indexes, typically
	// under a second) may list a session that left pending a moment ago
	// or miss one created a moment ago; never one of another target.
	ListPendingSessions(ctx context.Context, target ResumeTarget, at time.Time) ([]Session, []error, error)
	// ListSweepSessions returns the sessions of set (SweepSetOf) whose
	// ExpiresAt is not after expiredBy (zero: the whole set), by
	// ExpiresAt, plus one error per record that could not be read. Each is
	// read as stored now, so one that has left set is never returned;
	// where the index lags, one that entered set a moment ago may be
	// missing until the next call.
	ListSweepSessions(ctx context.Context, set SweepSet, expiredBy time.Time) ([]Session, []error, error)
}

// LeaseStore hands out short exclusive leases (one refresher per grant
// across every process).
type LeaseStore interface {
	// AcquireLease takes key for owner until now+ttl; ErrConflict while
	// another owner holds an unexpired lease.
	AcquireLease(ctx context.Context, key, owner string, ttl time.Duration) error
	// ReleaseLease drops the lease if owner still holds it.
	ReleaseLease(ctx context.Context, key, owner string) error
}

// Store is everything the OAuth manager needs from storage.
type Store interface {
	GrantStore
	SessionStore
	SessionIndex
	LeaseStore
}

// Sealer encrypts secrets bound to their place of storage.
type Sealer interface {
	Seal(ctx context.Context, plaintext []byte, b Binding) (EncryptedValue, error)
	Open(ctx context.Context, v EncryptedValue, b Binding) ([]byte, error)
}

// EventQueue delivers events to agent instances. Enqueue with an ID that
// was already enqueued is a no-op (exactly-once delivery per ID).
type EventQueue interface {
	Enqueue(ctx context.Context, e Event) error
}

// DeadLetters lists and redrives dead letters.
type DeadLetters interface {
	// ListDeadLetters returns up to limit dead letters, oldest first, plus how many there are in all (an estimate where the queue only estimates: SQS ApproximateNumberOfMessages).
	ListDeadLetters(ctx context.Context, limit int) ([]DeadLetter, int, error)
	// RedriveDeadLetter queues the dead letter's event again and then removes the dead letter; ErrNotFound when there is no such dead letter (another operator redrove it). The event keeps its id, so the engine's duplicate check (State.Processed) makes a redrive of an event that did land harmless.
	RedriveDeadLetter(ctx context.Context, id string) error
}

// OperatorQueries answer the console's lists with index reads: what one page costs follows the page (and, with filters an index does not key, the records examined to fill it, bounded per page), never how many records the store holds.
type OperatorQueries interface {
	QueryGrants(ctx context.Context, q GrantQuery) (GrantPage, error)
	QuerySessions(ctx context.Context, q SessionQuery) (SessionPage, error)
	// CountGrants counts grants by revoked/active for the query's tenant scope, up to limit each (then it says "at least limit"): the overview's figures.
	CountGrants(ctx context.Context, tenant string, anyTenant bool, limit int) (active, revoked int, capped bool, err error)
	// CountFailingGrants counts, in the same scope and up to limit, the
	// grants not revoked whose last refreshes failed (RefreshFailures >
	// 0): the overview's "failing refresh". They are among CountGrants'
	// active ones.
	CountFailingGrants(ctx context.Context, tenant string, anyTenant bool, limit int) (failing int, capped bool, err error)
}
