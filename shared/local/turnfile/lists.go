package turnfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/local/listtree"
	"github.com/agentauth/agentauth/shared/turn"
)

// The operator list of instances (turn.InstanceQuerier): an index on
// disk, one tree of empty files per scope, under <dir>/list:
//
//	list/<scope>/<b1>/<b2>/<listKey>
//
// scope is "all" or "s-" and a hash of the swarm (no key part reaches a
// path); listKey is domain.ListKey of the instance's creation time and
// its directory's name, so name order is most recently created first; b1
// and b2 bucket it by its first 6 and next 4 digits (about 2.8 hours, then
// a second), so a page reads the buckets it passes and the instances it
// lists, never every instance. It is the file store's list index
// (local/filestore, lists.go) for one kind.
//
// The first commit of an instance writes its entries before its journal
// line, under the instance's lock; every commit adds an entry that is
// missing (a crash that lost one); a commit that moves the instance to
// another swarm or creation time (none does today) writes the new entries
// and then drops the old; Delete drops them after the directory. A list
// skips an entry whose instance is gone or says otherwise and removes it
// once it is older than staleEntryAge. New builds the index of a
// directory that has none (one written before it) from the instances.

const (
	listDirName = "list"
	scopeAll    = "all"
	// listExamineBound bounds the entries a page examines when it filters
	// on what the index does not key (agent, status).
	listExamineBound = 500
	// staleEntryAge is how old an entry whose instance is gone must be
	// before a list removes it: younger, it may be a first commit in
	// progress.
	staleEntryAge   = time.Hour
	mkdirRetries    = 3
	listBuildPrefix = ".list-build-"
)

type listEntry struct{ root, key string }

func (e listEntry) dir() string  { return filepath.Join(e.root, e.key[:6], e.key[6:10]) }
func (e listEntry) path() string { return filepath.Join(e.dir(), e.key) }

func swarmScope(swarm string) string {
	sum := sha256.Sum256([]byte(swarm))
	return "s-" + hex.EncodeToString(sum[:16])
}

func (s *Store) listRoot(scope string) string { return filepath.Join(s.listDir(), scope) }

func (s *Store) listDir() string { return filepath.Join(s.dir, listDirName) }

// instanceEntries are the entries of in, whose directory is named name
// (none for no instance).
func (s *Store) instanceEntries(name string, in turn.Instance) []listEntry {
	if in.Version == 0 {
		return nil
	}
	k := domain.ListKey(in.CreatedAt, name)
	return []listEntry{{s.listRoot(scopeAll), k}, {s.listRoot(swarmScope(in.Key.Swarm)), k}}
}

func addEntries(es []listEntry) error {
	for _, e := range es {
		if _, err := os.Lstat(e.path()); err == nil {
			continue
		}
		for attempt := 1; ; attempt++ {
			err := os.MkdirAll(e.dir(), 0o700)
			if err == nil {
				var f *os.File
				if f, err = os.OpenFile(e.path(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
					f.Close()
					break
				}
				if errors.Is(err, fs.ErrExist) {
					break
				}
			}
			// ErrNotExist: a bucket went with another instance's last
			// entry after MkdirAll made it.
			if !errors.Is(err, fs.ErrNotExist) || attempt == mkdirRetries {
				return fmt.Errorf("list index: %w", err)
			}
		}
	}
	return nil
}

// dropEntries removes the entries of old not in keep, and their buckets
// left empty; best effort.
func dropEntries(old, keep []listEntry) {
	for _, e := range old {
		if slices.Contains(keep, e) {
			continue
		}
		if os.Remove(e.path()) == nil && os.Remove(e.dir()) == nil {
			_ = os.Remove(filepath.Dir(e.dir()))
		}
	}
}

func pruneEntry(e listEntry) {
	if fi, err := os.Lstat(e.path()); err == nil && time.Since(fi.ModTime()) > staleEntryAge {
		dropEntries([]listEntry{e}, nil)
	}
}

// QueryInstances reads one page of instances from the index, most
// recently created first (then by directory name), and the state of each
// instance it lists (through the cache, without filling it). Agent and
// Status are checked on the instances read.
func (s *Store) QueryInstances(ctx context.Context, q turn.InstanceQuery) (turn.InstancePage, error) {
	limit, err := domain.PageLimit(q.Limit)
	if err == nil && q.After != "" {
		_, _, err = domain.ParseListKey(q.After)
	}
	if err != nil {
		return turn.InstancePage{}, fmt.Errorf("turnfile: query instances: %w", err)
	}
	scope := scopeAll
	if q.Swarm != "" {
		scope = swarmScope(q.Swarm)
	}
	root := s.listRoot(scope)
	filtered := q.Agent != "" || q.Status != ""
	var page turn.InstancePage
	got, examined, cursor := 0, 0, ""
	for k, err := range listtree.Walk(root, q.After, "", isInstanceDir) {
		if err != nil {
			return turn.InstancePage{}, fmt.Errorf("turnfile: query instances: %w", err)
		}
		if got == limit || filtered && examined >= listExamineBound {
			page.Next = cursor
			return page, nil
		}
		examined++
		cursor = k
		e := listEntry{root, k}
		_, name, _ := domain.ParseListKey(k)
		dir := filepath.Join(s.dir, name)
		st, err := s.readLocked(ctx, dir, false)
		if ctx.Err() != nil {
			return turn.InstancePage{}, fmt.Errorf("turnfile: query instances: %w", ctx.Err())
		}
		switch {
		case err != nil:
			page.Unreadable = append(page.Unreadable, turn.Unreadable{Key: readKey(dir), ID: name, Reason: reason(err),
				Err: fmt.Errorf("turnfile: query instances: instance %s: %w", name, err)})
			continue
		case !slices.Contains(s.instanceEntries(name, st.Instance), e):
			pruneEntry(e) // gone, or moved by a write that crashed before its clean-up
			continue
		}
		in := st.Instance
		if (q.Swarm == "" || in.Key.Swarm == q.Swarm) && (q.Agent == "" || in.Key.Agent == q.Agent) &&
			(q.Status == "" || in.Status == q.Status) {
			page.Instances = append(page.Instances, in)
			got++
		}
	}
	return page, nil
}

// buildListIndex gives a directory without the list index its list/,
// from the instances, built aside and renamed into place: of processes
// building at once the first rename wins.
func (s *Store) buildListIndex() error {
	if _, err := os.Stat(s.listDir()); err == nil {
		return nil
	}
	if entries, err := os.ReadDir(s.dir); err == nil {
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && e.IsDir() && strings.HasPrefix(e.Name(), listBuildPrefix) && time.Since(fi.ModTime()) > staleEntryAge {
				_ = os.RemoveAll(filepath.Join(s.dir, e.Name()))
			}
		}
	}
	build, err := os.MkdirTemp(s.dir, listBuildPrefix)
	if err != nil {
		return fmt.Errorf("build the list index: %w", err)
	}
	defer os.RemoveAll(build)
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("build the list index: %w", err)
	}
	aside := &Store{dir: filepath.Dir(build)}
	for _, e := range entries {
		if !e.IsDir() || !isInstanceDir(e.Name()) {
			continue
		}
		st, err := s.readLocked(context.Background(), filepath.Join(s.dir, e.Name()), false)
		if err != nil || st.Instance.Version == 0 {
			continue // unreadable: no list could show it either
		}
		es := aside.instanceEntries(e.Name(), st.Instance)
		for i := range es {
			es[i].root = filepath.Join(build, filepath.Base(es[i].root))
		}
		if err := addEntries(es); err != nil {
			return fmt.Errorf("build the list index: %w", err)
		}
	}
	if err := os.Rename(build, s.listDir()); err != nil {
		if _, serr := os.Stat(s.listDir()); serr == nil {
			return nil
		}
		return fmt.Errorf("build the list index: %w", err)
	}
	return atomicfile.SyncDir(s.dir)
}

var _ turn.InstanceQuerier = (*Store)(nil)
