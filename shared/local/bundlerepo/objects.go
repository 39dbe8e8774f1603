package bundlerepo

import (
	"errors"
	"io"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// lockedObjects makes go-git's filesystem object storage safe for the
// goroutines of one server: go-git's storage is not (its object cache and
// the list of loose objects race, go test -race shows it). Every call
// takes the lock, and an object read is copied whole into memory while it
// is held, so nothing reads the storage after the lock is released.
// Bundle files are small, so the copy costs little.
type lockedObjects struct {
	mu sync.Mutex
	s  storer.EncodedObjectStorer
}

var _ storer.EncodedObjectStorer = (*lockedObjects)(nil)

var errUnsupported = errors.New("bundlerepo: not supported on the bundle's object storage")

func (l *lockedObjects) NewEncodedObject() plumbing.EncodedObject { return &plumbing.MemoryObject{} }

func (l *lockedObjects) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.SetEncodedObject(o)
}

func (l *lockedObjects) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, err := l.s.EncodedObject(t, h)
	if err != nil {
		return nil, err
	}
	r, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	m := &plumbing.MemoryObject{}
	m.SetType(o.Type())
	if _, err := io.Copy(m, r); err != nil {
		return nil, err
	}
	return m, nil
}

func (l *lockedObjects) HasEncodedObject(h plumbing.Hash) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.HasEncodedObject(h)
}

func (l *lockedObjects) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.s.EncodedObjectSize(h)
}

func (l *lockedObjects) IterEncodedObjects(plumbing.ObjectType) (storer.EncodedObjectIter, error) {
	return nil, errUnsupported
}

func (l *lockedObjects) AddAlternate(string) error { return errUnsupported }
