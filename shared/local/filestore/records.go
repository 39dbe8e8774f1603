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

// records is one kind of record file (grants, sessions) and its read cache:
// what differs between kinds is configuration, so reading, writing, listing
// and their error texts are written once. Operations with rules of their
// own (PutGrant's version check, CompleteSession) stay with their kind.
type records[T any] struct {
	dir  string
	kind string // envelope kind, e.g. KindGrant
	// name is "grant" or "session": it names the record in error texts, in
	// lock files other processes take, and in seal bindings, so it must never
	// change.
	name  string
	valid func(id string) error
	// copy deep-copies a record so callers never share the cache's.
	copy func(T) T
	// withID sets the id, which the file name carries rather than the spec.
	// It takes and returns the record by value so it does not move to the
	// heap on every load.
	withID func(rec T, id string) T
	// sealed and version point into a record for Reseal; bind is the seal
	// binding of one of its fields.
	sealed  func(*T) []domain.SealedField
	version func(*T) *int64
	bind    func(rec T, field string) domain.Binding

	recordCache[T]
}

func (r *records[T]) path(id string) string {
	return r.dir + string(filepath.Separator) + id + recordExt
}

// lockName is the name of the lock on record id (see name).
func (r *records[T]) lockName(id string) string {
	return r.name + "-" + id
}

// get returns the record with id. A warm read costs one stat: the decoded
// record is cached and revalidated against the file's stamp.
func (r *records[T]) get(id string) (T, error) {
	var zero T
	if err := r.valid(id); err != nil {
		return zero, fmt.Errorf("filestore: get %s: %w", r.name, err)
	}
	return r.fetch(id, true)
}

// fetch returns record id from the cache when its file is unchanged, else
// decoded from the file — and cached when remember is set. The record is
// the caller's own.
func (r *records[T]) fetch(id string, remember bool) (T, error) {
	var zero T
	fi, err := os.Stat(r.path(id))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			r.drop(id)
			return zero, fmt.Errorf("filestore: get %s %s: %w", r.name, id, domain.ErrNotFound)
		}
		return zero, fmt.Errorf("filestore: get %s %s: %w", r.name, id, err)
	}
	if rec, ok := r.cached(id, stampOf(fi)); ok {
		return r.copy(rec), nil
	}
	if !remember {
		rec, _, err := r.read(id)
		if err != nil {
			return zero, fmt.Errorf("filestore: get %s %s: %w", r.name, id, err)
		}
		return rec, nil // decoded for this caller alone
	}
	rec, err := r.load(id)
	if err != nil {
		return zero, fmt.Errorf("filestore: get %s %s: %w", r.name, id, err)
	}
	return r.copy(rec), nil
}

// load reads and decodes the record file, caching the result. It returns an
// error wrapping ErrNotFound or ErrCorrupt; the file is never touched. The
// record returned is the cache's own: copy it before changing it.
func (r *records[T]) load(id string) (T, error) {
	rec, st, err := r.read(id)
	if err == nil {
		r.remember(id, st, rec)
	}
	return rec, err
}

// read reads and decodes the record file without caching it.
func (r *records[T]) read(id string) (T, fileStamp, error) {
	var zero T
	data, st, err := readFile(r.path(id))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			r.drop(id)
			return zero, st, domain.ErrNotFound
		}
		return zero, st, err
	}
	rec, err := decodeRecord[T](data, r.kind, id)
	if err != nil {
		r.drop(id)
		return zero, st, err
	}
	return r.withID(rec, id), st, nil
}

// encode returns the file content for rec and the record a later read of it
// will return.
func (r *records[T]) encode(id string, rec T) ([]byte, T, error) {
	var zero T
	data, err := encodeRecord(r.kind, id, rec)
	if err != nil {
		return nil, zero, err
	}
	// Decode what we write so the cache and the caller see exactly what a
	// later read from disk gives (JSON numbers, time zones and all).
	written, err := decodeRecord[T](data, r.kind, id)
	if err != nil {
		return nil, zero, err
	}
	return data, r.withID(written, id), nil
}

// write replaces the record file with rec as is (lock held) and returns
// what a read will return.
func (r *records[T]) write(id string, rec T) (T, error) {
	var zero T
	data, written, err := r.encode(id, rec)
	if err != nil {
		return zero, err
	}
	st, err := writeFileAtomic(r.path(id), data)
	if err != nil {
		r.drop(id)
		return zero, err
	}
	r.remember(id, st, written)
	return r.copy(written), nil
}

// list returns every readable record in id order, plus one error per file
// that could not be read.
func (r *records[T]) list(ctx context.Context) ([]T, []error, error) {
	ids, bad, err := recordIDs(r.dir, r.valid)
	if err != nil {
		return nil, nil, fmt.Errorf("filestore: list %ss: %w", r.name, err)
	}
	out := make([]T, 0, len(ids))
	for _, id := range ids {
		if err := checkCtx(ctx); err != nil {
			return nil, nil, fmt.Errorf("filestore: list %ss: %w", r.name, err)
		}
		// A listing caches nothing it reads from disk: a sweep lists every
		// session every minute, and caching what only it reads would keep
		// them all in memory (the idle soak saw the sweep refill what serve
		// had released).
		rec, err := r.fetch(id, false)
		switch {
		case errors.Is(err, domain.ErrNotFound): // removed meanwhile
		case err != nil:
			bad = append(bad, err)
		default:
			out = append(out, rec)
		}
	}
	return out, bad, nil
}
