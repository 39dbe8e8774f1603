package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

// memTenants is a minimal in-memory reference domain.TenantStore, for
// checking that the suite asks only what the port says. Several
// memTenantStores may share one.
type memTenants struct {
	mu  sync.Mutex
	m   map[string]domain.TenantResource
	rev int64
}

type memTenantStore struct{ d *memTenants }

var _ domain.TenantStore = memTenantStore{}

func newMemTenants() *memTenants { return &memTenants{m: map[string]domain.TenantResource{}} }

func (s memTenantStore) PutTenantResource(_ context.Context, r domain.TenantResource) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("memtenants: put: %w", err)
	}
	r.Spec = slices.Clone(r.Spec)
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.m[tenantKey(r)] = r
	s.d.rev++
	return nil
}

func (s memTenantStore) DeleteTenantResource(_ context.Context, tenant, kind, name string) error {
	if err := domain.ValidateTenantKey(tenant, kind, name); err != nil {
		return fmt.Errorf("memtenants: delete: %w", err)
	}
	k := tenantKey(domain.TenantResource{Tenant: tenant, Kind: kind, Name: name})
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	if _, ok := s.d.m[k]; !ok {
		return fmt.Errorf("memtenants: delete %s: %w", k, domain.ErrNotFound)
	}
	delete(s.d.m, k)
	s.d.rev++
	return nil
}

func (s memTenantStore) ListTenantResources(context.Context) ([]domain.TenantResource, []error, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	var out []domain.TenantResource
	for _, r := range s.d.m {
		r.Spec = slices.Clone(r.Spec)
		out = append(out, r)
	}
	slices.SortFunc(out, compareTenantResources)
	return out, nil, nil
}

func (s memTenantStore) TenantRevision(context.Context) (int64, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	return s.d.rev, nil
}

func TestMemTenantStore(t *testing.T) {
	RunTenantStore(t, func(*testing.T) domain.TenantStore { return memTenantStore{newMemTenants()} })
}

func TestMemTenantStorePair(t *testing.T) {
	RunTenantStorePair(t, func(*testing.T) (domain.TenantStore, domain.TenantStore) {
		d := newMemTenants()
		return memTenantStore{d}, memTenantStore{d}
	})
}
