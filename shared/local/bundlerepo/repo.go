// Package bundlerepo is the local changeset backend: the bundle directory
// as a git repository (go-git), its checked-out branch as the active ref,
// and changeset records as files under the home.
package bundlerepo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/agentauth/agentauth/shared/changeset"
)

// Repo is a bundle directory that is a git repository.
type Repo struct {
	dir    string
	gitDir string
	st     *filesystem.Storage
	objs   *lockedObjects
	// branch is the ref HEAD names: the active revision.
	branch plumbing.ReferenceName
	// Log, when set, gets what a working-tree sync could not do.
	Log *slog.Logger
}

var _ changeset.Repo = (*Repo)(nil)

// ErrNotRepository: the directory has no .git of its own.
var ErrNotRepository = errors.New("not a git repository")

// gitDirName is the repository's directory inside the bundle.
const gitDirName = ".git"

// IsRepository reports whether dir has a git repository of its own (a
// .git directory at its root; a parent's repository does not count).
func IsRepository(dir string) bool {
	fi, err := os.Stat(filepath.Join(dir, gitDirName))
	return err == nil && fi.IsDir()
}

// storage opens the object and reference storage of dir's .git. go-git's
// storage packages, not its repository package: that one links every
// transport (ssh, http) into the Lambda functions' binaries, and nothing
// here fetches or pushes.
func storage(dir string) *filesystem.Storage {
	return filesystem.NewStorage(osfs.New(filepath.Join(dir, gitDirName)), cache.NewObjectLRUDefault())
}

// Open opens the repository at dir. Its HEAD must name a branch: that
// branch is the active revision.
func Open(dir string) (*Repo, error) {
	if !IsRepository(dir) {
		return nil, fmt.Errorf("bundle %s: %w (run `agentauth bundle init --bundle %s`, or git init and commit it)", dir, ErrNotRepository, dir)
	}
	st := storage(dir)
	head, err := st.Reference(plumbing.HEAD)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: read HEAD: %w", dir, err)
	}
	if head.Type() != plumbing.SymbolicReference || !head.Target().IsBranch() {
		return nil, fmt.Errorf("bundle %s: HEAD is detached at %s; check out a branch (git -C %s switch main): its commits are the active revision", dir, head.Hash(), dir)
	}
	return &Repo{dir: dir, gitDir: filepath.Join(dir, gitDirName), st: st, objs: &lockedObjects{s: st}, branch: head.Target()}, nil
}

// Branch is the active branch's name (refs/heads/…).
func (r *Repo) Branch() plumbing.ReferenceName { return r.branch }

// Objects is the repository's object database.
func (r *Repo) Objects() storer.EncodedObjectStorer { return r.objs }

// Head is the branch's commit.
func (r *Repo) Head(context.Context) (plumbing.Hash, error) {
	r.objs.mu.Lock() // go-git's reference reads share its storage's state
	ref, err := r.st.Reference(r.branch)
	r.objs.mu.Unlock()
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, changeset.ErrNoRevision
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("bundle %s: read %s: %w", r.dir, r.branch, err)
	}
	return ref.Hash(), nil
}

// staleLock is how old a ref's lock file must be before a writer takes it
// as left by a crash: a ref update holds it for milliseconds.
const staleLock = time.Minute

// lockWait bounds how long SwapHead waits for another writer's lock.
const lockWait = 10 * time.Second

// SwapHead moves the branch from old to new with git's own lock-file
// protocol (<ref>.lock created exclusively, written, fsynced, renamed over
// the ref), so it excludes other agentauth processes and the git command
// line alike, and a crash leaves the old ref or the new one, never a torn
// one. go-git's own CheckAndSetReference truncates the ref file in place
// under flock: a crash between the truncate and the write leaves an empty
// ref, and git's lock file does not see it.
func (r *Repo) SwapHead(ctx context.Context, old, new plumbing.Hash) error {
	refPath := filepath.Join(r.gitDir, filepath.FromSlash(r.branch.String()))
	if err := os.MkdirAll(filepath.Dir(refPath), 0o755); err != nil {
		return err
	}
	lock, err := r.lock(ctx, refPath+".lock")
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			lock.Close()
			os.Remove(lock.Name())
		}
	}()
	cur, err := r.Head(ctx)
	if errors.Is(err, changeset.ErrNoRevision) {
		cur = plumbing.ZeroHash
	} else if err != nil {
		return err
	}
	if cur != old {
		return changeset.ErrHeadMoved
	}
	if _, err := lock.WriteString(new.String() + "\n"); err != nil {
		return err
	}
	if err := lock.Sync(); err != nil {
		return err
	}
	if err := lock.Close(); err != nil {
		return err
	}
	if err := os.Rename(lock.Name(), refPath); err != nil {
		return err
	}
	done = true
	if err := syncDir(filepath.Dir(refPath)); err != nil {
		return err
	}
	// The ref moved: the working tree follows (best effort — the ref is
	// the record; a file changed by hand stays as it is).
	rep, err := r.Sync()
	r.ReportSync(ctx, rep, err)
	return nil
}

// ReportSync logs what a sync could not do (with Log set).
func (r *Repo) ReportSync(ctx context.Context, rep SyncReport, err error) {
	log := r.Log
	if log == nil {
		return
	}
	switch {
	case err != nil:
		log.WarnContext(ctx, "bundle working tree not updated to the active revision", "bundle", r.dir, "err", err)
	case rep.Skipped != "":
		log.WarnContext(ctx, "bundle working tree not updated to the active revision", "bundle", r.dir, "why", rep.Skipped)
	case len(rep.Dirty) > 0:
		log.WarnContext(ctx, "bundle files changed by hand are not active until committed", "bundle", r.dir, "files", rep.Dirty,
			"hint", "git -C "+r.dir+" commit -am '…' (or git checkout -- FILE to drop the change)")
	}
}

// lock creates the lock file, waiting while another writer holds it and
// taking over one a crash left behind.
func (r *Repo) lock(ctx context.Context, path string) (*os.File, error) {
	deadline := time.Now().Add(lockWait)
	wait := time.Millisecond
	for {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if fi, serr := os.Stat(path); serr == nil && time.Since(fi.ModTime()) > staleLock {
			os.Remove(path) // left by a crash: nobody holds a ref lock this long
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("bundle %s: %s is held by another writer for over %s (remove it if no git command is running)", r.dir, path, lockWait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// Init makes dir a git repository on branch main whose first commit is
// every file under it but hidden ones (the bundle as it is), with the
// working tree's index written, and returns that commit. It refuses a
// directory that already is one.
func Init(dir string, when time.Time) (plumbing.Hash, error) {
	if err := InitEmpty(dir); err != nil {
		return plumbing.ZeroHash, err
	}
	files, err := changeset.ReadDir(dir)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	r, err := Open(dir)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := changeset.CommitTree(context.Background(), r, files, "the bundle as agentauth found it\n", when)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("bundle %s: first commit: %w", dir, err)
	}
	return h, nil
}

// InitEmpty makes dir (created when missing) a git repository on branch
// main with no commit yet: an import makes its first.
func InitEmpty(dir string) error {
	if IsRepository(dir) {
		return fmt.Errorf("bundle %s is already a git repository", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	st := storage(dir)
	if err := st.Init(); err != nil {
		return fmt.Errorf("bundle %s: git init: %w", dir, err)
	}
	cfg := gitconfig.NewConfig()
	cfg.Core.IsBare = false
	if err := st.SetConfig(cfg); err != nil {
		return fmt.Errorf("bundle %s: git init: %w", dir, err)
	}
	if err := st.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.NewBranchReferenceName("main"))); err != nil {
		return fmt.Errorf("bundle %s: git init: %w", dir, err)
	}
	return nil
}

// OpenLocal opens what serve runs changesets on when the bundle directory
// is a git repository: the repository, its working tree brought to the
// active revision (a commit may have landed while no server ran; files
// changed by hand are logged as not active), and the changeset records
// under the home, never inside the bundle. nil, nil: a plain directory.
func OpenLocal(ctx context.Context, bundleDir, home string, log *slog.Logger) (*Repo, *Records, error) {
	if !IsRepository(bundleDir) {
		return nil, nil, nil
	}
	repo, err := Open(bundleDir)
	if err != nil {
		return nil, nil, err
	}
	repo.Log = log
	rep, err := repo.Sync()
	repo.ReportSync(ctx, rep, err)
	recs, err := NewRecords(filepath.Join(home, "changesets"))
	if err != nil {
		return nil, nil, err
	}
	return repo, recs, nil
}
