package toolplane

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/agentauth/agentauth/shared/domain"
)

// MemoryTenants is a domain.TenantStore in memory: for tests and for a
// single process that does not need uploads to survive a restart.
type MemoryTenants struct {
	mu  sync.Mutex
	m   map[[3]string]domain.TenantResource
	rev int64
}

// NewMemoryTenants returns an empty store.
func NewMemoryTenants() *MemoryTenants {
	return &MemoryTenants{m: map[[3]string]domain.TenantResource{}}
}

// PutTenantResource implements domain.TenantStore.
func (s *MemoryTenants) PutTenantResource(_ context.Context, r domain.TenantResource) error {
	if err := r.Validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Spec = slices.Clone(r.Spec)
	s.m[[3]string{r.Tenant, r.Kind, r.Name}] = r
	s.rev++
	return nil
}

// DeleteTenantResource implements domain.TenantStore.
func (s *MemoryTenants) DeleteTenantResource(_ context.Context, tenant, kind, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [3]string{tenant, kind, name}
	if _, ok := s.m[k]; !ok {
		return domain.ErrNotFound
	}
	delete(s.m, k)
	s.rev++
	return nil
}

// ListTenantResources implements domain.TenantStore.
func (s *MemoryTenants) ListTenantResources(context.Context) ([]domain.TenantResource, []error, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]domain.TenantResource, 0, len(s.m))
	for _, r := range s.m {
		r.Spec = slices.Clone(r.Spec)
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b domain.TenantResource) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return out, nil, nil
}

// TenantRevision implements domain.TenantStore.
func (s *MemoryTenants) TenantRevision(context.Context) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev, nil
}
