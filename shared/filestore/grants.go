package filestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentauth/agentauth/shared/domain"
)

func (s *Store) grantPath(id string) string {
	return s.grantsDir + string(filepath.Separator) + id + recordExt
}

// GetGrant returns the grant with id. A warm read costs one stat: the
// decoded record is cached and revalidated against the file's stamp.
func (s *Store) GetGrant(_ context.Context, id string) (domain.Grant, error) {
	if err := ValidGrantID(id); err != nil {
		return domain.Grant{}, fmt.Errorf("filestore: get grant: %w", err)
	}
	path := s.grantPath(id)
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			s.grants.drop(id)
			return domain.Grant{}, fmt.Errorf("filestore: get grant %s: %w", id, domain.ErrNotFound)
		}
		return domain.Grant{}, fmt.Errorf("filestore: get grant %s: %w", id, err)
	}
	if g, ok := s.grants.get(id, stampOf(fi)); ok {
		return copyGrant(g), nil
	}
	g, err := s.loadGrant(id)
	if err != nil {
		return domain.Grant{}, fmt.Errorf("filestore: get grant %s: %w", id, err)
	}
	return copyGrant(g), nil
}

// loadGrant reads and decodes the grant file, caching the result. It returns
// an error wrapping ErrNotFound or ErrCorrupt; the file is never touched.
func (s *Store) loadGrant(id string) (domain.Grant, error) {
	data, st, err := readFile(s.grantPath(id))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			s.grants.drop(id)
			return domain.Grant{}, domain.ErrNotFound
		}
		return domain.Grant{}, err
	}
	g, err := decodeRecord[domain.Grant](data, KindGrant, id)
	if err != nil {
		s.grants.drop(id)
		return domain.Grant{}, err
	}
	g.ID = id
	s.grants.put(id, st, g)
	return g, nil
}

// storedGrantVersion is the version on disk, 0 when absent. Call it with the
// grant's lock held.
func (s *Store) storedGrantVersion(id string) (int64, error) {
	g, err := s.loadGrant(id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return g.Version, nil
}

// PutGrant writes g when the stored version equals expectVersion (0: the
// grant must not exist) and returns it with version expectVersion+1.
func (s *Store) PutGrant(ctx context.Context, g domain.Grant, expectVersion int64) (domain.Grant, error) {
	if err := ValidGrantID(g.ID); err != nil {
		return domain.Grant{}, fmt.Errorf("filestore: put grant: %w", err)
	}
	l, err := s.lock(ctx, "grant-"+g.ID)
	if err != nil {
		return domain.Grant{}, fmt.Errorf("filestore: put grant %s: %w", g.ID, err)
	}
	defer l.release(false)
	stored, err := s.storedGrantVersion(g.ID)
	if err != nil {
		return domain.Grant{}, fmt.Errorf("filestore: put grant %s: %w", g.ID, err)
	}
	if stored != expectVersion {
		return domain.Grant{}, fmt.Errorf("filestore: put grant %s: stored version %d, expected %d: %w",
			g.ID, stored, expectVersion, domain.ErrConflict)
	}
	g.Version = expectVersion + 1
	written, err := s.writeGrant(g)
	if err != nil {
		return domain.Grant{}, fmt.Errorf("filestore: put grant %s: %w", g.ID, err)
	}
	return written, nil
}

// writeGrant writes g as is (lock held) and returns what a read will return.
func (s *Store) writeGrant(g domain.Grant) (domain.Grant, error) {
	data, err := encodeRecord(KindGrant, g.ID, g)
	if err != nil {
		return domain.Grant{}, err
	}
	// Decode what we write so the cache and the caller see exactly what a
	// later read from disk gives (JSON numbers, time zones and all).
	written, err := decodeRecord[domain.Grant](data, KindGrant, g.ID)
	if err != nil {
		return domain.Grant{}, err
	}
	written.ID = g.ID
	st, err := writeFileAtomic(s.grantPath(g.ID), data)
	if err != nil {
		s.grants.drop(g.ID)
		return domain.Grant{}, err
	}
	s.grants.put(g.ID, st, written)
	return copyGrant(written), nil
}

// ListGrants returns every readable grant in id order, plus one error per
// file that could not be read.
func (s *Store) ListGrants(ctx context.Context) ([]domain.Grant, []error, error) {
	ids, bad, err := recordIDs(s.grantsDir, ValidGrantID)
	if err != nil {
		return nil, nil, fmt.Errorf("filestore: list grants: %w", err)
	}
	out := make([]domain.Grant, 0, len(ids))
	for _, id := range ids {
		if err := checkCtx(ctx); err != nil {
			return nil, nil, fmt.Errorf("filestore: list grants: %w", err)
		}
		g, err := s.GetGrant(ctx, id)
		switch {
		case errors.Is(err, domain.ErrNotFound): // removed meanwhile
		case err != nil:
			bad = append(bad, err)
		default:
			out = append(out, g)
		}
	}
	return out, bad, nil
}
