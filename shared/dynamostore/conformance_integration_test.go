//go:build integration

package dynamostore

import (
	"context"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/storetest"
)

// The conformance suite runs on tables without TimeToLive. Its fixtures are
// dated January 2026, so their sessions' ttl is long past, and a table that
// expires items may delete them mid-test: MiniStack's reaper does so within
// 60 seconds, DynamoDB at any time after expiry. TTL itself is tested on
// its own (TestTTLAttribute), with records that expire in the future.
func TestConformance(t *testing.T) {
	emulator(t)
	storetest.RunStore(t, func(t *testing.T) domain.Store {
		s, _ := newEmulatorStore(t, tableOpts{noTTL: true})
		return s
	})
}

// Two Stores on one table behave like two Lambdas: neither knows what the
// other wrote, so every guess CompleteSession makes from what it has seen
// can be stale, and the suite must hold anyway.
func TestConformanceTwoStores(t *testing.T) {
	emulator(t)
	storetest.RunStore(t, func(t *testing.T) domain.Store {
		a, api := newEmulatorStore(t, tableOpts{noTTL: true})
		b, err := New(api, a.Table())
		if err != nil {
			t.Fatal(err)
		}
		return splitStore{a, b}
	})
}

func TestTenantConformance(t *testing.T) {
	emulator(t)
	storetest.RunTenantStore(t, func(t *testing.T) domain.TenantStore {
		s, _ := newEmulatorStore(t, tableOpts{noTTL: true})
		return s
	})
}

// Two Stores on one table, as two Lambdas: a put through one is listed by
// the other and moves the revision it reads.
func TestTenantConformanceTwoStores(t *testing.T) {
	emulator(t)
	storetest.RunTenantStorePair(t, func(t *testing.T) (domain.TenantStore, domain.TenantStore) {
		a, api := newEmulatorStore(t, tableOpts{noTTL: true})
		a.scanLimit = 4 // listing pages through the table
		b, err := New(api, a.Table())
		if err != nil {
			t.Fatal(err)
		}
		return a, b
	})
}

// splitStore sends reads to one Store and writes to both, as filestore's
// test does with two processes.
type splitStore struct{ a, b *Store }

func (s splitStore) GetGrant(ctx context.Context, id string) (domain.Grant, error) {
	return s.a.GetGrant(ctx, id)
}
func (s splitStore) PutGrant(ctx context.Context, g domain.Grant, v int64) (domain.Grant, error) {
	if v%2 == 0 {
		return s.b.PutGrant(ctx, g, v)
	}
	return s.a.PutGrant(ctx, g, v)
}
func (s splitStore) ListGrants(ctx context.Context) ([]domain.Grant, []error, error) {
	return s.a.ListGrants(ctx)
}
func (s splitStore) CreateSession(ctx context.Context, x domain.Session) error {
	return s.b.CreateSession(ctx, x)
}
func (s splitStore) GetSession(ctx context.Context, id string) (domain.Session, error) {
	return s.a.GetSession(ctx, id)
}
func (s splitStore) UpdateSession(ctx context.Context, x domain.Session) (domain.Session, error) {
	return s.b.UpdateSession(ctx, x)
}
func (s splitStore) CompleteSession(ctx context.Context, id string, at time.Time, g domain.Grant) (domain.Session, domain.Grant, error) {
	if len(g.Subject)%2 == 0 {
		return s.a.CompleteSession(ctx, id, at, g)
	}
	return s.b.CompleteSession(ctx, id, at, g)
}
func (s splitStore) ListSessions(ctx context.Context) ([]domain.Session, []error, error) {
	return s.a.ListSessions(ctx)
}
func (s splitStore) DeleteSession(ctx context.Context, id string) error {
	return s.b.DeleteSession(ctx, id)
}
func (s splitStore) AcquireLease(ctx context.Context, k, o string, ttl time.Duration) error {
	if len(o)%2 == 0 {
		return s.a.AcquireLease(ctx, k, o, ttl)
	}
	return s.b.AcquireLease(ctx, k, o, ttl)
}
func (s splitStore) ReleaseLease(ctx context.Context, k, o string) error {
	return s.b.ReleaseLease(ctx, k, o)
}
