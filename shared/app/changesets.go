package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// Changesets are the backends of a bundle that is a git repository: its
// history and the active ref, and the changeset records.
type Changesets struct {
	Repo    changeset.Repo
	Records changeset.Records
	// Describe says where they are, for the start line.
	Describe string
}

// activeBundle is the bundle the process runs on: a plain directory's,
// fixed; or a git bundle's active revision, read again where it must be
// current (a step's step.config) and any revision by its ref.
type activeBundle struct {
	revs *changeset.Bundles
	// first is the revision loaded at start: a plain directory's bundle
	// for good, a git bundle's fallback when the head cannot be read.
	first *bundle.Bundle
	log   *slog.Logger
}

// head is the active bundle now.
func (a *activeBundle) head(ctx context.Context) (*bundle.Bundle, error) {
	if a.revs == nil {
		return a.first, nil
	}
	return a.revs.Head(ctx)
}

// headOr is head, or the bundle loaded at start (logged) when the
// repository cannot be read: routing an event keeps working.
func (a *activeBundle) headOr(ctx context.Context) *bundle.Bundle {
	b, err := a.head(ctx)
	if err != nil {
		a.log.WarnContext(ctx, "active bundle revision unreadable; using the one loaded at start", "revision", a.first.Revision, "err", err)
		return a.first
	}
	return b
}

// at is revision rev's bundle ("" or a plain directory's: the one loaded
// at start).
func (a *activeBundle) at(ctx context.Context, rev string) (*bundle.Bundle, error) {
	if a.revs == nil || rev == "" {
		return a.headOr(ctx), nil
	}
	return a.revs.At(ctx, rev)
}

// loader parses bundle files with the process's options and refuses what
// the process could not run (device-code apps on Lambda) as a problem of
// the bundle, so a commit that would add one is rejected.
func loader(opts bundle.Options, lambda bool) func(files []bundle.File) (*bundle.Bundle, error) {
	return func(files []bundle.File) (*bundle.Bundle, error) {
		b, err := bundle.Parse(files, opts)
		if err != nil || !lambda {
			return b, err
		}
		var problems []bundle.Problem
		for _, app := range b.OAuthApps {
			if app.Flow == bundle.FlowDeviceCode {
				problems = append(problems, bundle.Problem{File: app.File, Line: app.Line, Resource: "OAuthApp/" + app.Name, Field: "spec.flow",
					Message: "flow deviceCode needs the background poller of the local server; the Lambda deployment does not run it"})
			}
		}
		if len(problems) > 0 {
			return nil, &bundle.ValidationError{Problems: problems}
		}
		return b, nil
	}
}

// revisionModels are the model adapters of each loaded revision: a
// revision that changes a Model gets its own.
type revisionModels struct {
	mu   sync.Mutex
	byRv map[string]map[string]model.Model
	keep []string
}

func (m *revisionModels) of(ctx context.Context, b *bundle.Bundle) (map[string]model.Model, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ms, ok := m.byRv[b.Revision]; ok {
		return ms, nil
	}
	ms, err := buildModels(ctx, b, nil)
	if err != nil {
		return nil, err
	}
	if m.byRv == nil {
		m.byRv = map[string]map[string]model.Model{}
	}
	m.byRv[b.Revision] = ms
	m.keep = append(m.keep, b.Revision)
	if len(m.keep) > 4 {
		delete(m.byRv, m.keep[0])
		m.keep = m.keep[1:]
	}
	return ms, nil
}

// revisionBlocks describes a revision change for the engine's
// swarmBundle.revisionChanged block, when the swarm wants it
// (policy.changesets.emitRevisionChangedEvent).
type revisionBlocks struct{ active *activeBundle }

func (r revisionBlocks) Changed(ctx context.Context, key turn.InstanceKey, from, to string) (json.RawMessage, bool, error) {
	b, err := r.active.at(ctx, to)
	if err != nil {
		return nil, false, err
	}
	sw := b.Swarms[key.Swarm]
	if sw == nil || !sw.Changesets.EmitRevisionChanged || r.active.revs == nil {
		return nil, false, nil
	}
	var data any = map[string]string{"previousRef": from, "newRef": to}
	if changeset.IsGitRef(from) {
		ch, err := r.active.revs.Between(ctx, from, to)
		if err != nil {
			return nil, false, err
		}
		data = ch
	}
	raw, err := json.Marshal(data)
	return raw, err == nil, err
}

// openBundle loads the bundle: a git bundle's active revision when there
// are changesets backends, else the directory.
func openBundle(ctx context.Context, dir string, cs *Changesets, secrets bundle.SecretResolver, load func([]bundle.File) (*bundle.Bundle, error), log *slog.Logger) (*activeBundle, error) {
	if cs == nil {
		b, err := bundle.LoadDir(dir, bundle.Options{Secrets: secrets})
		if err != nil {
			return nil, err
		}
		return &activeBundle{first: b, log: log}, nil
	}
	revs := changeset.NewBundles(cs.Repo, load)
	b, err := revs.Head(ctx)
	if errors.Is(err, changeset.ErrNoRevision) {
		return nil, fmt.Errorf("the bundle's git repository (%s) has no commit yet: commit the bundle's files first", cs.Describe)
	}
	if err != nil {
		return nil, err
	}
	return &activeBundle{revs: revs, first: b, log: log}, nil
}

// ImportPackaged brings the bundle directory (cfg.BundleDir: a deployed
// function's packaged bundle) into be's git bundle at a cold start, the
// way `agentauth bundle import` does: what the package changed since its
// last import is merged with what agents committed since, checked with the
// loader the process runs (lambda: device-code apps refused), and lands by
// compare-and-swap; an empty repository gets it as its first commit. Many
// functions starting at once are safe: one import lands, the others find
// it and answer unchanged. Nothing to do without a git bundle.
//
// A failed import (a conflict with agents' commits, a result that would
// not load, a store error) is logged and the process runs the active
// revision: a deploy never crash-loops on what agents committed. Only a
// repository with no revision at all makes it an error.
func ImportPackaged(ctx context.Context, cfg config.Config, be *Backends, lambda bool, log *slog.Logger) error {
	cs := be.Changesets
	if cs == nil {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := time.Now()
	load := loader(bundle.Options{Secrets: be.Secrets}, lambda)
	// Staged: the package's objects reach the store only when its import
	// lands, so a cold start that finds it imported writes nothing.
	m := &changeset.Manager{Repo: newStagedRepo(cs.Repo), Log: log, Load: load}
	source := filepath.ToSlash(filepath.Clean(cfg.BundleDir))
	files, err := changeset.ReadDir(cfg.BundleDir)
	var res changeset.ImportResult
	if err == nil {
		res, err = m.Import(ctx, files, source)
	}
	if err == nil && res.Status == changeset.ImportConflict {
		err = fmt.Errorf("the revisions agents committed since the last import changed the same lines as the package: %s", strings.Join(res.ConflictingFiles, ", "))
	}
	if err == nil {
		attrs := []any{"bundle", cs.Describe, "source", source, "status", res.Status, "revision", res.NewRef, "ms", time.Since(start).Milliseconds()}
		if res.PreviousRef != "" {
			attrs = append(attrs, "previous", res.PreviousRef)
		}
		if res.Summary != nil {
			attrs = append(attrs, "added", len(res.Summary.FilesAdded), "changed", len(res.Summary.FilesChanged), "deleted", len(res.Summary.FilesDeleted))
		}
		log.InfoContext(ctx, "packaged bundle imported", attrs...)
		return nil
	}
	head, herr := cs.Repo.Head(ctx)
	if herr != nil {
		return fmt.Errorf("import the packaged bundle %s into %s: %w", source, cs.Describe, err)
	}
	log.ErrorContext(ctx, "packaged bundle not imported; running the active revision", "bundle", cs.Describe, "source", source,
		"revision", changeset.Ref(head), "err", err)
	return nil
}

// stagedRepo holds the objects written through it in memory until the
// ref moves, then writes them all and moves the ref (objects first, as a
// commit needs). An import that finds the package unchanged, conflicts or
// would not load writes nothing — on S3, no PutObject per package file at
// every cold start, and no unreferenced objects.
type stagedRepo struct {
	changeset.Repo
	objs *stagedObjects
}

func newStagedRepo(r changeset.Repo) *stagedRepo {
	return &stagedRepo{Repo: r, objs: &stagedObjects{EncodedObjectStorer: r.Objects(), staged: map[plumbing.Hash]plumbing.EncodedObject{}}}
}

func (r *stagedRepo) Objects() storer.EncodedObjectStorer { return r.objs }

// SwapHead writes the staged objects, then moves the ref.
func (r *stagedRepo) SwapHead(ctx context.Context, old, new plumbing.Hash) error {
	if err := r.objs.flush(); err != nil {
		return err
	}
	return r.Repo.SwapHead(ctx, old, new)
}

// stagedObjects reads through to the repository's object database and
// keeps what is written in memory until flush.
type stagedObjects struct {
	storer.EncodedObjectStorer
	mu     sync.Mutex
	staged map[plumbing.Hash]plumbing.EncodedObject
	order  []plumbing.Hash
}

func (s *stagedObjects) SetEncodedObject(o plumbing.EncodedObject) (plumbing.Hash, error) {
	h := o.Hash()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.staged[h]; !ok {
		s.staged[h] = o
		s.order = append(s.order, h)
	}
	return h, nil
}

func (s *stagedObjects) get(h plumbing.Hash) (plumbing.EncodedObject, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.staged[h]
	return o, ok
}

func (s *stagedObjects) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if o, ok := s.get(h); ok {
		if t != plumbing.AnyObject && o.Type() != t {
			return nil, plumbing.ErrObjectNotFound
		}
		return o, nil
	}
	return s.EncodedObjectStorer.EncodedObject(t, h)
}

func (s *stagedObjects) HasEncodedObject(h plumbing.Hash) error {
	if _, ok := s.get(h); ok {
		return nil
	}
	return s.EncodedObjectStorer.HasEncodedObject(h)
}

func (s *stagedObjects) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	if o, ok := s.get(h); ok {
		return o.Size(), nil
	}
	return s.EncodedObjectStorer.EncodedObjectSize(h)
}

// flush writes the staged objects, in the order they were staged, and
// forgets them.
func (s *stagedObjects) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, h := range s.order {
		if _, err := s.EncodedObjectStorer.SetEncodedObject(s.staged[h]); err != nil {
			// What was written stays written (objects are immutable); the
			// rest stays staged for the next attempt.
			for _, done := range s.order[:i] {
				delete(s.staged, done)
			}
			s.order = s.order[i:]
			return err
		}
	}
	clear(s.staged)
	s.order = s.order[:0]
	return nil
}
