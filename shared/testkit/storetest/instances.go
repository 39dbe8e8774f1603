package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// RunStorePair runs the domain.Store suite across two store instances on
// one backing storage, as two processes or two Lambdas share it: open must
// return two stores on a fresh, empty storage for each call. Reads go to a,
// and each write to a or b by its arguments, so a write through one must
// be what the other reads, and the racers of the race tests are split
// across both: every guess a store makes from what it has seen itself can
// be stale, and the suite must hold anyway.
func RunStorePair(t *testing.T, open func(t *testing.T) (a, b domain.Store)) {
	RunStore(t, func(t *testing.T) domain.Store {
		a, b := open(t)
		return storePair{a: a, b: b}
	})
}

// RaceOneWinner runs f for racers 0 … n-1, all released at once, and
// checks, as the suite's race tests do, that exactly one won and every
// other lost with domain.ErrConflict; it returns the winner. It is for a
// backend's own tests that race several instances.
func RaceOneWinner(t *testing.T, what string, n int, f func(i int) error) int {
	t.Helper()
	return oneWinner(t, race(n, f), what)
}

// storePair sends reads to a and each write to a or b.
type storePair struct{ a, b domain.Store }

func (p storePair) GetGrant(ctx context.Context, id string) (domain.Grant, error) {
	return p.a.GetGrant(ctx, id)
}

// PutGrant creates through b and updates through a, alternately by version.
func (p storePair) PutGrant(ctx context.Context, g domain.Grant, expect int64) (domain.Grant, error) {
	if expect%2 == 0 {
		return p.b.PutGrant(ctx, g, expect)
	}
	return p.a.PutGrant(ctx, g, expect)
}

func (p storePair) ListGrants(ctx context.Context) ([]domain.Grant, []error, error) {
	return p.a.ListGrants(ctx)
}

// CreateSession picks by the session id's last digit, so racers on one
// reuse key (random ids) create through both.
func (p storePair) CreateSession(ctx context.Context, s domain.Session) error {
	if s.ID != "" && s.ID[len(s.ID)-1]%2 == 0 {
		return p.a.CreateSession(ctx, s)
	}
	return p.b.CreateSession(ctx, s)
}

func (p storePair) GetSession(ctx context.Context, id string) (domain.Session, error) {
	return p.a.GetSession(ctx, id)
}

func (p storePair) UpdateSession(ctx context.Context, s domain.Session) (domain.Session, error) {
	return p.b.UpdateSession(ctx, s)
}

// CompleteSession picks by the grant's subject: the race tests' racers
// ("racer-0" … "racer-19") have subjects of both lengths.
func (p storePair) CompleteSession(ctx context.Context, id string, at time.Time, g domain.Grant) (domain.Session, domain.Grant, error) {
	if len(g.Subject)%2 == 0 {
		return p.a.CompleteSession(ctx, id, at, g)
	}
	return p.b.CompleteSession(ctx, id, at, g)
}

func (p storePair) ListSessions(ctx context.Context) ([]domain.Session, []error, error) {
	return p.a.ListSessions(ctx)
}

func (p storePair) FindPendingSession(ctx context.Context, key string, at time.Time) (domain.Session, error) {
	return p.a.FindPendingSession(ctx, key, at)
}

func (p storePair) ListPendingSessions(ctx context.Context, target domain.ResumeTarget, at time.Time) ([]domain.Session, []error, error) {
	return p.a.ListPendingSessions(ctx, target, at)
}

func (p storePair) ListSweepSessions(ctx context.Context, set domain.SweepSet, expiredBy time.Time) ([]domain.Session, []error, error) {
	return p.a.ListSweepSessions(ctx, set, expiredBy)
}

func (p storePair) DeleteSession(ctx context.Context, id string) error {
	return p.b.DeleteSession(ctx, id)
}

// AcquireLease picks by the owner, so owners "owner-0" … "owner-19" race
// through both.
func (p storePair) AcquireLease(ctx context.Context, key, owner string, ttl time.Duration) error {
	if len(owner)%2 == 0 {
		return p.a.AcquireLease(ctx, key, owner, ttl)
	}
	return p.b.AcquireLease(ctx, key, owner, ttl)
}

func (p storePair) ReleaseLease(ctx context.Context, key, owner string) error {
	return p.b.ReleaseLease(ctx, key, owner)
}
