package filestore

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// APIVersion is the apiVersion of every record envelope.
const APIVersion = "agents.example.io/v1alpha1"

// Record kinds as written in envelopes.
const (
	KindGrant   = "OAuthGrantRecord"
	KindSession = "AuthSessionRecord"
)

const recordExt = ".enc.json"

// Store is the filesystem OAuthStore. It is safe for concurrent use by many
// goroutines and by many processes sharing one home.
type Store struct {
	root        string
	grantsDir   string
	sessionsDir string
	leasesDir   string
	locksDir    string
	reuseDir    string
	// pendingDir is the index of pending sessions by resume target
	// (pending.go).
	pendingDir string
	// listDir is the index of the operator lists (lists.go).
	listDir string
	// tenantsDir is <home>/tenants (tenants.go), made on the first upload.
	tenantsDir string

	procLocks keyedMutex
	grants    *records[domain.Grant]
	sessions  *records[domain.Session]
}

var _ domain.Store = (*Store)(nil)

// ReleaseCaches drops the decoded grants and sessions the store keeps in
// memory; the next read of each decodes its file again. serve calls it when
// it has been idle (cmd/agentauth idle.go).
func (s *Store) ReleaseCaches() {
	s.grants.purge()
	s.sessions.purge()
}

// New opens (creating if needed) the store under <home>/oauth, with tenant
// uploads under <home>/tenants.
func New(home string) (*Store, error) {
	if home == "" {
		return nil, errors.New("filestore: empty home directory")
	}
	root := filepath.Join(home, "oauth")
	s := &Store{
		root:        root,
		grantsDir:   filepath.Join(root, "grants"),
		sessionsDir: filepath.Join(root, "sessions"),
		leasesDir:   filepath.Join(root, "leases"),
		locksDir:    filepath.Join(root, "locks"),
		reuseDir:    filepath.Join(root, "reuse"),
		pendingDir:  filepath.Join(root, pendingDirName),
		listDir:     filepath.Join(root, listDirName),
		tenantsDir:  filepath.Join(home, "tenants"),
	}
	s.grants = grantRecords(s.grantsDir)
	s.sessions = sessionRecords(s.sessionsDir)
	for _, dir := range []string{root, s.grantsDir, s.sessionsDir, s.leasesDir, s.locksDir, s.reuseDir} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("filestore: %w", err)
		}
	}
	for _, dir := range []string{s.grantsDir, s.sessionsDir, s.leasesDir, s.reuseDir} {
		// Best effort: a leftover temporary file costs only space.
		atomicfile.RemoveStaleTemps(dir, time.Hour)
	}
	if err := s.buildPendingIndex(); err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	if err := s.buildListIndex(); err != nil {
		return nil, fmt.Errorf("filestore: %w", err)
	}
	return s, nil
}

// Root is <home>/oauth.
func (s *Store) Root() string { return s.root }

// envelope is the on-disk record: the seed's resource shape with the domain
// record as spec and its id as metadata.name.
type envelope[T any] struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   envelopeMetadata `json:"metadata"`
	Spec       T                `json:"spec"`
}

type envelopeMetadata struct {
	Name string `json:"name"`
}

func encodeRecord[T any](kind, id string, spec T) ([]byte, error) {
	b, err := json.MarshalIndent(envelope[T]{APIVersion: APIVersion, Kind: kind, Metadata: envelopeMetadata{Name: id}, Spec: spec}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// decodeRecord decodes an envelope and checks that it is the record the file
// name says it is. Errors wrap domain.ErrCorrupt.
func decodeRecord[T any](data []byte, kind, id string) (T, error) {
	var env envelope[T]
	var zero T
	if err := json.Unmarshal(data, &env); err != nil {
		return zero, fmt.Errorf("%w: %v", domain.ErrCorrupt, domain.JSONErrorWithoutContent(err))
	}
	switch {
	case env.APIVersion != APIVersion:
		return zero, fmt.Errorf("%w: apiVersion %q, want %q", domain.ErrCorrupt, env.APIVersion, APIVersion)
	case env.Kind != kind:
		return zero, fmt.Errorf("%w: kind %q, want %q", domain.ErrCorrupt, env.Kind, kind)
	case env.Metadata.Name != id:
		return zero, fmt.Errorf("%w: metadata.name %q does not match the file name", domain.ErrCorrupt, env.Metadata.Name)
	}
	return env.Spec, nil
}

// readFile reads path and returns its content with the stamp of the inode
// that was read.
func readFile(path string) ([]byte, fileStamp, error) {
	f, err := atomicfile.Open(path)
	if err != nil {
		return nil, fileStamp{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fileStamp{}, err
	}
	return data, stampOf(fi), nil
}

// writeFileAtomic replaces path with data (0600), as atomicfile.Replace
// does, and returns the stamp of the new file.
func writeFileAtomic(path string, data []byte) (fileStamp, error) {
	tmp, st, err := writeStampedTemp(path, data)
	if err != nil {
		return fileStamp{}, err
	}
	return st, atomicfile.CommitReplace(tmp, path)
}

// createFileExclusive creates path with data (0600), as
// atomicfile.CreateExclusive does (an error wrapping fs.ErrExist when
// something is there already), and returns the stamp of the new file.
func createFileExclusive(path string, data []byte) (fileStamp, error) {
	tmp, st, err := writeStampedTemp(path, data)
	if err != nil {
		return fileStamp{}, err
	}
	return st, atomicfile.CommitExclusive(tmp, path)
}

// writeStampedTemp writes the temporary file for path and returns it with
// the stamp it will keep once renamed or linked into place.
func writeStampedTemp(path string, data []byte) (string, fileStamp, error) {
	tmp, err := atomicfile.WriteTemp(path, data, 0o600)
	if err != nil {
		return "", fileStamp{}, err
	}
	// The kernel stamps writes with a coarse clock; a nanosecond mtime of
	// our own makes two versions of one record tell apart by stat alone,
	// which the read cache relies on. It is set before the file is
	// published, so no reader ever sees the coarse one.
	now := time.Now()
	if err := os.Chtimes(tmp, now, now); err != nil {
		os.Remove(tmp)
		return "", fileStamp{}, err
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		os.Remove(tmp)
		return "", fileStamp{}, err
	}
	return tmp, stampOf(fi), nil
}

// recordIDs lists the ids of the record files in dir, in name order, plus
// an error for each file whose name is not a valid id.
func recordIDs(dir string, valid func(string) error) ([]string, []error, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	var ids []string
	var bad []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, recordExt) {
			continue
		}
		id := strings.TrimSuffix(name, recordExt)
		if err := valid(id); err != nil {
			bad = append(bad, fmt.Errorf("filestore: stray file %s: %w", filepath.Join(dir, name), domain.ErrInvalidID))
			continue
		}
		ids = append(ids, id)
	}
	return ids, bad, nil
}

// HasRecords reports whether any grant or session file exists, readable or
// not (callers use it to refuse making a new key over existing records).
func (s *Store) HasRecords() (bool, error) {
	for _, dir := range []string{s.grantsDir, s.sessionsDir} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false, fmt.Errorf("filestore: %w", err)
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), recordExt) {
				return true, nil
			}
		}
	}
	return false, nil
}

// fileStamp identifies one version of a file: rename makes a new inode and
// every write sets a nanosecond mtime, so an unchanged stamp means an
// unchanged file.
type fileStamp struct {
	size  int64
	mtime int64
	ino   uint64
}

func stampOf(fi fs.FileInfo) fileStamp {
	return fileStamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), ino: inodeOf(fi)}
}

// maxCachedRecords bounds each record cache (grants, sessions, uploads):
// sessions are kept for their retention (24 h by default), and a cache of
// every one of them grew with the consent rate for a day (the soak). The
// least recently used goes first; a miss costs one decode.
const maxCachedRecords = 4096

// recordCache holds decoded records by id with the stamp of the file they
// were decoded from, at most max (default maxCachedRecords) of them, least
// recently used out first. Entries are never handed out: callers get deep
// copies. The zero value is ready to use.
type recordCache[T any] struct {
	mu  sync.Mutex
	max int
	m   map[string]*list.Element // of *cacheEntry[T]
	lru list.List                // front: most recently used
}

type cacheEntry[T any] struct {
	id    string
	stamp fileStamp
	rec   T
}

func (c *recordCache[T]) cached(id string, st fileStamp) (T, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[id]
	if !ok || el.Value.(*cacheEntry[T]).stamp != st {
		var zero T
		return zero, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cacheEntry[T]).rec, true
}

func (c *recordCache[T]) remember(id string, st fileStamp, rec T) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*list.Element{}
	}
	if el, ok := c.m[id]; ok {
		e := el.Value.(*cacheEntry[T])
		e.stamp, e.rec = st, rec
		c.lru.MoveToFront(el)
		return
	}
	c.m[id] = c.lru.PushFront(&cacheEntry[T]{id: id, stamp: st, rec: rec})
	max := c.max
	if max <= 0 {
		max = maxCachedRecords
	}
	for c.lru.Len() > max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.m, old.Value.(*cacheEntry[T]).id)
	}
}

func (c *recordCache[T]) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[id]; ok {
		c.lru.Remove(el)
		delete(c.m, id)
	}
}

// purge drops every record.
func (c *recordCache[T]) purge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lru.Init()
	c.m = nil
}

// size is how many records the cache holds.
func (c *recordCache[T]) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// checkCtx lets long loops stop when the caller has gone.
func checkCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return nil
}
