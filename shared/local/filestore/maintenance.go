package filestore

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentauth/agentauth/shared/domain"
)

// Reseal opens every sealed value of every grant and session and seals it
// again with sealer (so under its current key), one record at a time under
// that record's lock, bumping the record's version. It returns how many
// values were resealed. It stops at the first error, naming the record and
// field; records done before it are complete and consistent, the failing
// record is unchanged. The plaintexts live only in memory, briefly.
func (s *Store) Reseal(ctx context.Context, sealer domain.Sealer) (int, error) {
	n, err := resealAll(ctx, s, s.grants, sealer)
	if err != nil {
		return n, err
	}
	m, err := resealAll(ctx, s, s.sessions, sealer)
	return n + m, err
}

// resealAll reseals every record of one kind, in id order.
func resealAll[T any](ctx context.Context, s *Store, r *records[T], sealer domain.Sealer) (int, error) {
	ids, _, err := recordIDs(r.dir, r.valid)
	if err != nil {
		return 0, fmt.Errorf("filestore: reseal: %w", err)
	}
	n := 0
	for _, id := range ids {
		c, err := resealRecord(ctx, s, r, id, sealer)
		n += c
		if err != nil {
			return n, fmt.Errorf("filestore: reseal %s %s: %w", r.name, id, err)
		}
	}
	return n, nil
}

func resealRecord[T any](ctx context.Context, s *Store, r *records[T], id string, sealer domain.Sealer) (int, error) {
	l, err := s.lock(ctx, r.lockName(id))
	if err != nil {
		return 0, err
	}
	defer l.release(false)
	rec, err := r.load(id)
	if errors.Is(err, domain.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	rec = r.copy(rec)
	fields := r.sealed(&rec)
	if err := domain.Reseal(ctx, sealer, fields, func(field string) domain.Binding { return r.bind(rec, field) }); err != nil {
		return 0, err
	}
	if len(fields) == 0 {
		return 0, nil
	}
	*r.version(&rec)++
	if _, err := r.write(id, rec); err != nil {
		return 0, err
	}
	return len(fields), nil
}

// KeyIDs maps each key id found on a sealed value to the ids of the records
// using it (see domain.KeyIDs).
func (s *Store) KeyIDs(ctx context.Context) (map[string][]string, error) {
	return domain.KeyIDs(ctx, s)
}
