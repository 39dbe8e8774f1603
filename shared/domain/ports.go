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
