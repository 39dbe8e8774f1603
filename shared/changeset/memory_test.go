package changeset_test

import (
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

// memRepo is a repository in memory (go-git's memory storage behind a
// lock, the head behind another): the suite runs here on the package's
// own tests, besides the local and AWS backends.
type memRepo struct {
	objs *memObjects
	mu   sync.Mutex
	head plumbing.Hash
}

type memObjects struct {
	mu sync.Mutex
	s  *memory.Storage
}

func (m *memObjects) NewEncodedObject() plumbing.EncodedObject { return &plumbing.MemoryObject{} }
func (m *memObjects) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s.SetEncodedObject(o)
}
func (m *memObjects) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, err := m.s.EncodedObject(t, h)
	if err != nil {
		return nil, err
	}
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	c := &plumbing.MemoryObject{}
	c.SetType(o.Type())
	_, err = io.Copy(c, r)
	return c, err
}
func (m *memObjects) HasEncodedObject(h plumbing.Hash) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s.HasEncodedObject(h)
}
func (m *memObjects) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.s.EncodedObjectSize(h)
}
func (m *memObjects) IterEncodedObjects(plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	return nil, io.ErrUnexpectedEOF
}
func (m *memObjects) AddAlternate(string) error { return io.ErrUnexpectedEOF }

func (r *memRepo) Objects() storer.EncodedObjectStorer { return r.objs }
func (r *memRepo) Head(context.Context) (plumbing.Hash, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.head.IsZero() {
		return plumbing.ZeroHash, changeset.ErrNoRevision
	}
	return r.head, nil
}
func (r *memRepo) SwapHead(_ context.Context, old, new plumbing.Hash) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.head != old {
		return changeset.ErrHeadMoved
	}
	r.head = new
	return nil
}

// memRecords keeps records in a map.
type memRecords struct {
	mu sync.Mutex
	m  map[string]changeset.Changeset
}

func (r *memRecords) Create(_ context.Context, cs changeset.Changeset) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.m[cs.ID]; ok {
		return changeset.ErrExists
	}
	cs.Version = 1
	r.m[cs.ID] = cs
	return nil
}
func (r *memRecords) Get(_ context.Context, id string) (changeset.Changeset, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs, ok := r.m[id]
	if !ok {
		return changeset.Changeset{}, changeset.ErrNotFound
	}
	return copyRecord(cs), nil
}
func (r *memRecords) Put(_ context.Context, cs changeset.Changeset, expect int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.m[cs.ID]
	if !ok {
		return changeset.ErrNotFound
	}
	if cur.Version != expect {
		return changeset.ErrVersion
	}
	cs.Version = expect + 1
	r.m[cs.ID] = copyRecord(cs)
	return nil
}
func (r *memRecords) Delete(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
	return nil
}
func (r *memRecords) Expired(_ context.Context, t time.Time, limit int) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for id, cs := range r.m {
		if cs.Expires.Before(t) && len(out) < limit {
			out = append(out, id)
		}
	}
	return out, nil
}

// copyRecord copies the maps and slices a caller could change.
func copyRecord(cs changeset.Changeset) changeset.Changeset {
	edits := make(map[string]changeset.Edit, len(cs.Edits))
	for k, v := range cs.Edits {
		edits[k] = v
	}
	cs.Edits = edits
	cs.Conflicts = append([]string(nil), cs.Conflicts...)
	return cs
}

func memBackends(*testing.T) (changeset.Repo, changeset.Records) {
	return &memRepo{objs: &memObjects{s: memory.NewStorage()}},
		&memRecords{m: map[string]changeset.Changeset{}}
}

func TestConformanceInMemory(t *testing.T) { changesettest.Run(t, memBackends) }
