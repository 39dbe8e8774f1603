package changeset

import (
	"container/list"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentauth/agentauth/shared/bundle"
)

// Bundles loads a repository's revisions as bundles: the active one (the
// head, read again on every call: the turn engine's step.config, the
// Safe Point at which a commit takes effect) and any other by its ref
// (a commit is immutable, so a turn's tools come from exactly the revision
// its step loaded). Loaded bundles are kept, the most recently used few.
// Safe for concurrent use.
type Bundles struct {
	repo Repo
	load func(files []bundle.File) (*bundle.Bundle, error)

	mu    sync.Mutex
	order *list.List // of *loaded, most recent first
	byRef map[string]*list.Element
}

type loaded struct {
	ref string
	b   *bundle.Bundle
}

// keepBundles is how many loaded revisions Bundles keeps: the active one
// and those turns still run on while a commit takes effect.
const keepBundles = 4

// NewBundles loads repo's revisions with load (bundle.Parse with the
// process's options); each bundle's Revision is its ref ("git:<sha>").
func NewBundles(repo Repo, load func(files []bundle.File) (*bundle.Bundle, error)) *Bundles {
	return &Bundles{repo: repo, load: load, order: list.New(), byRef: map[string]*list.Element{}}
}

// Head is the active revision's bundle.
func (s *Bundles) Head(ctx context.Context) (*bundle.Bundle, error) {
	h, err := s.repo.Head(ctx)
	if err != nil {
		return nil, err
	}
	return s.At(ctx, Ref(h))
}

// At is revision ref's bundle.
func (s *Bundles) At(_ context.Context, ref string) (*bundle.Bundle, error) {
	s.mu.Lock()
	if e, ok := s.byRef[ref]; ok {
		s.order.MoveToFront(e)
		b := e.Value.(*loaded).b
		s.mu.Unlock()
		return b, nil
	}
	s.mu.Unlock()
	h, err := ParseRef(ref)
	if err != nil {
		return nil, err
	}
	files, err := BundleFiles(s.repo, h)
	if err != nil {
		return nil, err
	}
	b, err := s.load(files)
	if err != nil {
		return nil, fmt.Errorf("bundle revision %s:\n%w", ref, err)
	}
	b.Revision = ref
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.byRef[ref]; ok { // loaded by another caller meanwhile
		return e.Value.(*loaded).b, nil
	}
	s.byRef[ref] = s.order.PushFront(&loaded{ref: ref, b: b})
	for s.order.Len() > keepBundles {
		old := s.order.Remove(s.order.Back()).(*loaded)
		delete(s.byRef, old.ref)
	}
	return b, nil
}

// Change is what moved between two revisions, for the
// swarmBundle.revisionChanged block: the changesets that landed (newest
// first) and the files that differ.
type Change struct {
	PreviousRef string   `json:"previousRef"`
	NewRef      string   `json:"newRef"`
	ChangesetID string   `json:"changesetId,omitempty"` // the newest changeset's
	Changesets  []string `json:"changesets,omitempty"`  // every changeset between, newest first
	Summary     Summary  `json:"summary"`
}

// Between describes the change from revision from to revision to, when to
// descends from from (first parents, within maxWalk commits); otherwise
// only the files that differ.
func (s *Bundles) Between(_ context.Context, from, to string) (Change, error) {
	fh, err := ParseRef(from)
	if err != nil {
		return Change{}, err
	}
	th, err := ParseRef(to)
	if err != nil {
		return Change{}, err
	}
	objs := s.repo.Objects()
	ch := Change{PreviousRef: from, NewRef: to}
	h := th
	for range maxWalk {
		if h == fh || h.IsZero() {
			break
		}
		cm, err := object.GetCommit(objs, h)
		if err != nil {
			return Change{}, err
		}
		if id := trailer(cm.Message, "Changeset-Id"); id != "" {
			ch.Changesets = append(ch.Changesets, id)
		}
		if len(cm.ParentHashes) == 0 {
			break
		}
		h = cm.ParentHashes[0]
	}
	if len(ch.Changesets) > 0 {
		ch.ChangesetID = ch.Changesets[0]
	}
	a, err := readTree(objs, fh)
	if err != nil {
		return Change{}, err
	}
	b, err := readTree(objs, th)
	if err != nil {
		return Change{}, err
	}
	ch.Summary = *summarize(a, b)
	return ch, nil
}

// trailer is the value of a "Key: value" line of a commit message.
func trailer(msg, key string) string {
	for _, line := range strings.Split(msg, "\n") {
		if v, ok := strings.CutPrefix(line, key+": "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// IsGitRef reports whether rev names a git revision (not a plain
// directory's content hash).
func IsGitRef(rev string) bool {
	_, err := ParseRef(rev)
	return err == nil
}
