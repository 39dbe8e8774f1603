package bundlerepo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// SyncReport is what a working-tree sync did.
type SyncReport struct {
	// Updated are the files written or removed to match the active
	// revision (their index entries too).
	Updated []string
	// Dirty are files changed by hand (not as the index had them): left
	// as they are, and not active until committed; their index entries
	// follow the active revision.
	Dirty []string
	// Skipped says why nothing was synced ("" when it ran).
	Skipped string
}

// Sync brings the bundle directory's working tree and index to the active
// revision, the way `git reset --merge` would: a file that is as the index
// has it (clean) and differs from the active revision is rewritten (or
// removed), a file changed by hand is left alone and reported Dirty. It
// runs after every commit a changeset lands (SwapHead) and when serve
// opens the repository, so the directory a person looks at is the
// revision serve runs. The index is written under git's index.lock, so
// it never races a git command; when another holds it, Sync skips and
// says so (the next one catches up).
func (r *Repo) Sync() (SyncReport, error) {
	var rep SyncReport
	lockPath := filepath.Join(r.gitDir, "index.lock")
	lock, err := os.OpenFile(lockPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		// One a crash left (nobody holds the index this long) is taken
		// over, as the ref's is; a fresh one is a git command's.
		if fi, serr := os.Stat(lockPath); serr == nil && time.Since(fi.ModTime()) > staleLock {
			os.Remove(lockPath)
			lock, err = os.OpenFile(lockPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		}
	}
	if errors.Is(err, fs.ErrExist) {
		rep.Skipped = "index.lock is held (a git command is running)"
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	done := false
	defer func() {
		if !done {
			lock.Close()
			os.Remove(lockPath)
		}
	}()
	r.objs.mu.Lock()
	idx, err := r.st.Index()
	r.objs.mu.Unlock()
	if err != nil {
		return rep, fmt.Errorf("bundle %s: read the index: %w", r.dir, err)
	}
	head, err := r.Head(context.Background())
	if err != nil {
		return rep, err
	}
	target, err := changeset.CommitFiles(r.objs, head)
	if err != nil {
		return rep, err
	}
	entries := map[string]*index.Entry{}
	for _, e := range idx.Entries {
		if e.Stage == 0 {
			entries[e.Name] = e
		}
	}
	paths := map[string]bool{}
	for p := range target {
		paths[p] = true
	}
	for p := range entries {
		paths[p] = true
	}
	sorted := make([]string, 0, len(paths))
	for p := range paths {
		sorted = append(sorted, p)
	}
	sort.Strings(sorted)
	// A sync killed between writing a file's temporary copy and renaming
	// it left the copy: under index.lock no other sync writes, so every
	// such copy in the directories this one writes to is a crash's.
	dirs := map[string]bool{}
	for _, p := range sorted {
		dirs[filepath.Dir(filepath.Join(r.dir, filepath.FromSlash(p)))] = true
	}
	for d := range dirs {
		// Best effort: a copy that stays is a hidden file the bundle
		// loader skips; the next sync tries again.
		_ = atomicfile.RemoveStaleTemps(d, 0)
	}
	changed := false
	for _, p := range sorted {
		want, inTarget := target[p]
		e, inIndex := entries[p]
		if inIndex && inTarget && e.Hash == want {
			if h, ok := r.workHash(p); !ok || h != want {
				rep.Dirty = append(rep.Dirty, p)
			}
			continue
		}
		// The index differs from the active revision.
		h, exists := r.workHash(p)
		full := filepath.Join(r.dir, filepath.FromSlash(p))
		if inTarget && exists && h == want {
			// The file already is the active revision's: the index follows.
			fi, err := os.Stat(full)
			if err != nil {
				return rep, err
			}
			if !inIndex {
				e = &index.Entry{Name: p, Mode: filemode.Regular}
				entries[p] = e
			}
			e.Hash, e.Size, e.ModifiedAt, e.CreatedAt = want, uint32(fi.Size()), fi.ModTime(), fi.ModTime()
			changed = true
			continue
		}
		// The file follows when it is as the index has it (or absent from
		// both).
		clean := (!inIndex && !exists) || (inIndex && exists && h == e.Hash)
		if !clean {
			// Changed by hand: the file stays; the index follows the
			// active revision (as `git reset` would), so git shows the
			// hand change against what is active, not a staged undo.
			rep.Dirty = append(rep.Dirty, p)
			// The entry gets no stat data: git compares a file's stat with
			// its entry before hashing it, and a hand edit of the same size
			// within the filesystem's clock tick would look unchanged.
			switch {
			case !inTarget:
				delete(entries, p)
			case inIndex:
				*e = index.Entry{Name: p, Hash: want, Mode: e.Mode}
			default:
				entries[p] = &index.Entry{Name: p, Hash: want, Mode: filemode.Regular}
			}
			changed = true
			continue
		}
		if !inTarget {
			if exists {
				if err := os.Remove(full); err != nil {
					return rep, err
				}
			}
			delete(entries, p)
		} else {
			data, err := changeset.ReadBlob(r.objs, want, changeset.MaxReadBytes)
			if err != nil {
				return rep, err
			}
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				return rep, err
			}
			// Whole or not at all: a file cut short by a crash would look
			// like a hand edit to every later sync.
			if err := atomicfile.Replace(full, data, 0o644); err != nil {
				return rep, err
			}
			fi, err := os.Stat(full)
			if err != nil {
				return rep, err
			}
			if !inIndex {
				e = &index.Entry{Name: p}
				entries[p] = e
			}
			e.Hash, e.Mode, e.Size, e.ModifiedAt, e.CreatedAt = want, filemode.Regular, uint32(fi.Size()), fi.ModTime(), fi.ModTime()
		}
		rep.Updated = append(rep.Updated, p)
		changed = true
	}
	if !changed {
		return rep, nil
	}
	idx.Entries = idx.Entries[:0]
	for _, p := range sorted {
		if e, ok := entries[p]; ok {
			idx.Entries = append(idx.Entries, e)
		}
	}
	bw := bufio.NewWriter(lock)
	if err := index.NewEncoder(bw).Encode(idx); err != nil {
		return rep, err
	}
	if err := bw.Flush(); err != nil {
		return rep, err
	}
	if err := lock.Sync(); err != nil {
		return rep, err
	}
	if err := lock.Close(); err != nil {
		return rep, err
	}
	if err := os.Rename(lockPath, filepath.Join(r.gitDir, "index")); err != nil {
		return rep, err
	}
	done = true
	return rep, nil
}

// workHash is the blob hash of the working file p (false: absent).
func (r *Repo) workHash(p string) (plumbing.Hash, bool) {
	data, err := os.ReadFile(filepath.Join(r.dir, filepath.FromSlash(p)))
	if err != nil {
		return plumbing.ZeroHash, false
	}
	return plumbing.ComputeHash(plumbing.BlobObject, data), true
}
