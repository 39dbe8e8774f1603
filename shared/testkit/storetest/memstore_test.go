package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// memStore is a minimal in-memory reference backend: it checks that the
// suite asks only what the domain contract says, with no file assumption.
type memStore struct {
	mu       sync.Mutex
	grants   map[string][]byte
	sessions map[string][]byte
	leases   map[string]memLease
	reuse    map[string]string // reuse key → id of the session that took it
}

type memLease struct {
	owner   string
	expires time.Time
}

var (
	grantRE   = regexp.MustCompile(`^grant-[0-9a-f]{16}$`)
	sessionRE = regexp.MustCompile(`^as-[0-9a-f]{32}$`)
)

func checkID(re *regexp.Regexp, id string) error {
	if !re.MatchString(id) {
		return fmt.Errorf("memstore: id %q: %w", id, domain.ErrInvalidID)
	}
	return nil
}

func enc[T any](v T) []byte { b, _ := json.Marshal(v); return b }

func dec[T any](b []byte) T {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		panic(err)
	}
	return v
}

func (m *memStore) GetGrant(_ context.Context, id string) (domain.Grant, error) {
	if err := checkID(grantRE, id); err != nil {
		return domain.Grant{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.grants[id]
	if !ok {
		return domain.Grant{}, domain.ErrNotFound
	}
	g := dec[domain.Grant](b)
	g.ID = id
	return g, nil
}

func (m *memStore) PutGrant(_ context.Context, g domain.Grant, expect int64) (domain.Grant, error) {
	if err := checkID(grantRE, g.ID); err != nil {
		return domain.Grant{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var stored int64
	if b, ok := m.grants[g.ID]; ok {
		stored = dec[domain.Grant](b).Version
	}
	if stored != expect {
		return domain.Grant{}, domain.ErrConflict
	}
	g.Version = expect + 1
	m.grants[g.ID] = enc(g)
	out := dec[domain.Grant](m.grants[g.ID])
	out.ID = g.ID
	return out, nil
}

func (m *memStore) ListGrants(ctx context.Context) ([]domain.Grant, []error, error) {
	return listAll(ctx, m, m.grants, m.GetGrant), nil, nil
}

// listAll reads every record of table through get, in id order.
func listAll[T any](ctx context.Context, m *memStore, table map[string][]byte, get func(context.Context, string) (T, error)) []T {
	m.mu.Lock()
	ids := make([]string, 0, len(table))
	for id := range table {
		ids = append(ids, id)
	}
	m.mu.Unlock()
	sort.Strings(ids)
	var out []T
	for _, id := range ids {
		v, _ := get(ctx, id)
		out = append(out, v)
	}
	return out
}

func (m *memStore) CreateSession(_ context.Context, s domain.Session) error {
	if err := checkID(sessionRE, s.ID); err != nil {
		return err
	}
	if s.ReuseKey != "" {
		if err := domain.ValidateReuseKey(s.ReuseKey); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[s.ID]; ok {
		return domain.ErrConflict
	}
	if s.ReuseKey != "" {
		if holder, ok := m.reuseHolder(s.ReuseKey, s.CreatedAt); ok && holder.ID != s.ID {
			return domain.ErrConflict
		}
		m.reuse[s.ReuseKey] = s.ID
	}
	m.sessions[s.ID] = enc(s)
	return nil
}

// reuseHolder is the session that took key and is reusable at at; the
// caller holds m.mu.
func (m *memStore) reuseHolder(key string, at time.Time) (domain.Session, bool) {
	b, ok := m.sessions[m.reuse[key]]
	if !ok {
		return domain.Session{}, false
	}
	s := dec[domain.Session](b)
	s.ID = m.reuse[key]
	return s, s.ReuseKey == key && s.ReusableAt(at)
}

func (m *memStore) FindPendingSession(_ context.Context, key string, at time.Time) (domain.Session, error) {
	if err := domain.ValidateReuseKey(key); err != nil {
		return domain.Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.reuseHolder(key, at); ok {
		return s, nil
	}
	return domain.Session{}, domain.ErrNotFound
}

// all returns every session, in id order.
func (m *memStore) all(ctx context.Context) []domain.Session {
	list, _, _ := m.ListSessions(ctx)
	return list
}

func (m *memStore) ListPendingSessions(ctx context.Context, target domain.ResumeTarget, at time.Time) ([]domain.Session, []error, error) {
	if err := target.Validate(); err != nil {
		return nil, nil, err
	}
	var out []domain.Session
	for _, s := range m.all(ctx) {
		if s.Status == domain.SessionPending && s.ExpiresAt.After(at) && s.Resume.Target() == target {
			out = append(out, s)
		}
	}
	return out, nil, nil
}

func (m *memStore) ListSweepSessions(ctx context.Context, set domain.SweepSet, expiredBy time.Time) ([]domain.Session, []error, error) {
	var out []domain.Session
	for _, s := range m.all(ctx) {
		if domain.SweepSetOf(s) == set && (expiredBy.IsZero() || !s.ExpiresAt.After(expiredBy)) {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ExpiresAt.Before(out[j].ExpiresAt) })
	return out, nil, nil
}

func (m *memStore) GetSession(_ context.Context, id string) (domain.Session, error) {
	if err := checkID(sessionRE, id); err != nil {
		return domain.Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.sessions[id]
	if !ok {
		return domain.Session{}, domain.ErrNotFound
	}
	s := dec[domain.Session](b)
	s.ID = id
	return s, nil
}

func (m *memStore) UpdateSession(_ context.Context, s domain.Session) (domain.Session, error) {
	if err := checkID(sessionRE, s.ID); err != nil {
		return domain.Session{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.sessions[s.ID]
	if !ok || dec[domain.Session](b).Version != s.Version {
		return domain.Session{}, domain.ErrConflict
	}
	s.Version++
	m.sessions[s.ID] = enc(s)
	return s, nil
}

func (m *memStore) CompleteSession(_ context.Context, id string, at time.Time, g domain.Grant) (domain.Session, domain.Grant, error) {
	if err := checkID(sessionRE, id); err != nil {
		return domain.Session{}, domain.Grant{}, err
	}
	if err := checkID(grantRE, g.ID); err != nil {
		return domain.Session{}, domain.Grant{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.sessions[id]
	if !ok {
		return domain.Session{}, domain.Grant{}, domain.ErrNotFound
	}
	s := dec[domain.Session](b)
	if !domain.Completable(s.Status) {
		return domain.Session{}, domain.Grant{}, domain.ErrConflict
	}
	g.Version = 1
	if gb, ok := m.grants[g.ID]; ok {
		prev := dec[domain.Grant](gb)
		g.Version, g.CreatedAt = prev.Version+1, prev.CreatedAt
	}
	m.grants[g.ID] = enc(g)
	s.ID, s.Status, s.CompletedAt = id, domain.SessionCompleted, &at
	s.Version++
	m.sessions[id] = enc(s)
	return s, g, nil
}

func (m *memStore) ListSessions(ctx context.Context) ([]domain.Session, []error, error) {
	return listAll(ctx, m, m.sessions, m.GetSession), nil, nil
}

func (m *memStore) DeleteSession(_ context.Context, id string) error {
	if err := checkID(sessionRE, id); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.sessions[id]; !ok {
		return domain.ErrNotFound
	}
	delete(m.sessions, id)
	return nil
}

func (m *memStore) AcquireLease(_ context.Context, key, owner string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := time.Now()
	if l, ok := m.leases[key]; ok && l.owner != owner && now.Before(l.expires) {
		return domain.ErrConflict
	}
	m.leases[key] = memLease{owner, now.Add(ttl)}
	return nil
}

func (m *memStore) ReleaseLease(_ context.Context, key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.leases[key]; ok && l.owner == owner {
		delete(m.leases, key)
	}
	return nil
}

type memQueue struct {
	mu     sync.Mutex
	seen   map[string]bool
	events []domain.Event
}

func (q *memQueue) Enqueue(_ context.Context, e domain.Event) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.seen[e.ID] {
		return nil
	}
	q.seen[e.ID] = true
	if e.EnqueuedAt.IsZero() {
		e.EnqueuedAt = time.Now()
	}
	q.events = append(q.events, e)
	return nil
}

func (q *memQueue) List(context.Context) ([]domain.Event, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]domain.Event(nil), q.events...), nil
}

func newMemStore() *memStore {
	return &memStore{grants: map[string][]byte{}, sessions: map[string][]byte{}, leases: map[string]memLease{}, reuse: map[string]string{}}
}

// The suites pass against the reference backends.
func TestReferenceStore(t *testing.T) {
	RunStore(t, func(*testing.T) domain.Store { return newMemStore() })
}

func TestReferenceStorePair(t *testing.T) {
	RunStorePair(t, func(*testing.T) (domain.Store, domain.Store) {
		m := newMemStore()
		return m, m
	})
}

func TestReferenceQueue(t *testing.T) {
	RunQueue(t, func(*testing.T) Queue { return &memQueue{seen: map[string]bool{}} })
}
