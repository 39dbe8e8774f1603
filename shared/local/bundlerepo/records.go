package bundlerepo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// Records keeps changeset records as JSON files, one per changeset, under
// a directory of the home (<home>/changesets): never inside the bundle.
// A write takes the record's lock, so several servers on one home agree.
type Records struct {
	dir string
}

var _ changeset.Records = (*Records)(nil)

// NewRecords opens (creating with mode 0700) dir.
func NewRecords(dir string) (*Records, error) {
	if err := os.MkdirAll(filepath.Join(dir, "locks"), 0o700); err != nil {
		return nil, fmt.Errorf("changesets: %w", err)
	}
	return &Records{dir: dir}, nil
}

const recordExt = ".json"

// path is the record file of id; ids are ours (cs_ and base32), but one
// read from a tool call is checked before it names a file.
func (r *Records) path(id string) (string, error) {
	if !changeset.ValidID(id) {
		return "", changeset.ErrNotFound
	}
	return filepath.Join(r.dir, id+recordExt), nil
}

func (r *Records) lock(ctx context.Context, id string) (*atomicfile.Lock, error) {
	return atomicfile.LockFile(ctx, filepath.Join(r.dir, "locks", id))
}

// Create stores cs as version 1.
func (r *Records) Create(ctx context.Context, cs changeset.Changeset) error {
	p, err := r.path(cs.ID)
	if err != nil {
		return fmt.Errorf("changeset id %q: not one of ours", cs.ID)
	}
	cs.Version = 1
	data, err := json.Marshal(cs)
	if err != nil {
		return err
	}
	err = atomicfile.CreateExclusive(p, data, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return changeset.ErrExists
	}
	return err
}

// Get reads changeset id.
func (r *Records) Get(_ context.Context, id string) (changeset.Changeset, error) {
	p, err := r.path(id)
	if err != nil {
		return changeset.Changeset{}, err
	}
	data, err := atomicfile.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return changeset.Changeset{}, changeset.ErrNotFound
	}
	if err != nil {
		return changeset.Changeset{}, err
	}
	var cs changeset.Changeset
	if err := json.Unmarshal(data, &cs); err != nil {
		return changeset.Changeset{}, fmt.Errorf("changeset %s: undecodable record %s: %w", id, p, err)
	}
	return cs, nil
}

// Put replaces the record when it is at version expect.
func (r *Records) Put(ctx context.Context, cs changeset.Changeset, expect int64) error {
	p, err := r.path(cs.ID)
	if err != nil {
		return err
	}
	l, err := r.lock(ctx, cs.ID)
	if err != nil {
		return err
	}
	defer l.Unlock()
	cur, err := r.Get(ctx, cs.ID)
	if err != nil {
		return err
	}
	if cur.Version != expect {
		return changeset.ErrVersion
	}
	cs.Version = expect + 1
	data, err := json.Marshal(cs)
	if err != nil {
		return err
	}
	return atomicfile.Replace(p, data, 0o600)
}

// Delete removes changeset id and its lock file.
func (r *Records) Delete(ctx context.Context, id string) error {
	p, err := r.path(id)
	if err != nil {
		return nil
	}
	l, err := r.lock(ctx, id)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.Unlock()
		return err
	}
	return l.RemoveAndUnlock()
}

// Expired lists up to limit changesets whose Expires is before t. It
// reads every record: the directory holds the open changesets and those
// landed within the TTL, a few per agent.
func (r *Records) Expired(ctx context.Context, t time.Time, limit int) ([]string, error) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), recordExt)
		if !ok || !changeset.ValidID(id) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cs, err := r.Get(ctx, id)
		if errors.Is(err, changeset.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if cs.Expires.Before(t) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
