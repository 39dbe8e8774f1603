package filestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentauth/agentauth/shared/domain"
)

// grantRecords keeps grants as grants/<grantId>.enc.json in dir.
func grantRecords(dir string) *records[domain.Grant] {
	return &records[domain.Grant]{
		dir:     dir,
		kind:    KindGrant,
		name:    "grant",
		valid:   domain.ValidateGrantID,
		copy:    copyGrant,
		withID:  func(g domain.Grant, id string) domain.Grant { g.ID = id; return g },
		sealed:  (*domain.Grant).SealedFields,
		bind:    domain.GrantBinding,
		version: func(g *domain.Grant) *int64 { return &g.Version },
	}
}

func (s *Store) grantPath(id string) string { return s.grants.path(id) }

// GetGrant returns the grant with id. A warm read costs one stat: the
// decoded record is cached and revalidated against the file's stamp.
func (s *Store) GetGrant(_ context.Context, id string) (domain.Grant, error) {
	return s.grants.get(id)
}

// writeGrantLocked writes g over stored (the zero grant: none) with its
// list entries: the new ones before, the old ones out after (lists.go).
// The caller holds the grant's lock.
func (s *Store) writeGrantLocked(stored, g domain.Grant) (domain.Grant, error) {
	entries := s.grantEntries(g)
	if err := addEntries(entries); err != nil {
		return domain.Grant{}, err
	}
	written, err := s.grants.write(g.ID, g)
	if err != nil {
		return domain.Grant{}, err
	}
	dropEntries(s.grantEntries(stored), entries)
	return written, nil
}

// PutGrant writes g when the stored version equals expectVersion (0: the
// grant must not exist) and returns it with version expectVersion+1.
func (s *Store) PutGrant(ctx context.Context, g domain.Grant, expectVersion int64) (domain.Grant, error) {
	if err := domain.ValidateGrantID(g.ID); err != nil {
		return domain.Grant{}, fmt.Errorf("filestore: put grant: %w", err)
	}
	l, err := s.lock(ctx, s.grants.lockName(g.ID))
	if err != nil {
		return domain.Grant{}, fmt.Errorf("filestore: put grant %s: %w", g.ID, err)
	}
	defer l.release(false)
	stored, err := s.grants.load(g.ID)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		stored = domain.Grant{}
	case err != nil:
		return domain.Grant{}, fmt.Errorf("filestore: put grant %s: %w", g.ID, err)
	}
	if stored.Version != expectVersion {
		return domain.Grant{}, fmt.Errorf("filestore: put grant %s: stored version %d, expected %d: %w",
			g.ID, stored.Version, expectVersion, domain.ErrConflict)
	}
	g.Version = expectVersion + 1
	written, err := s.writeGrantLocked(stored, g)
	if err != nil {
		return domain.Grant{}, fmt.Errorf("filestore: put grant %s: %w", g.ID, err)
	}
	return written, nil
}

// ListGrants returns every readable grant in id order, plus one error per
// file that could not be read.
func (s *Store) ListGrants(ctx context.Context) ([]domain.Grant, []error, error) {
	return s.grants.list(ctx)
}
