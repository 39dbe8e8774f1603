package changeset

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Entry is one revision of the history, as operators read it.
type Entry struct {
	Ref      string    `json:"ref"`
	Parent   string    `json:"parent,omitempty"`
	Author   string    `json:"author"`
	When     time.Time `json:"when"`
	Subject  string    `json:"subject"`
	Message  string    `json:"message"`
	Trailers Trailers  `json:"trailers"`
	Active   bool      `json:"active,omitempty"`
	// Summary is what the revision changed against its parent (Show).
	Summary *Summary `json:"summary,omitempty"`
}

// Trailers are what agentauth writes under a commit's message.
type Trailers struct {
	ChangesetID string `json:"changesetId,omitempty"`
	Swarm       string `json:"swarm,omitempty"`
	Instance    string `json:"instance,omitempty"`
	Agent       string `json:"agent,omitempty"`
	Turn        string `json:"turnId,omitempty"`
	TraceID     string `json:"traceId,omitempty"`
	Reverts     string `json:"reverts,omitempty"`
	Operator    string `json:"operator,omitempty"`
	ImportTree  string `json:"importTree,omitempty"`
}

func entryOf(cm *object.Commit, active bool) Entry {
	subject, _, _ := strings.Cut(cm.Message, "\n")
	e := Entry{Ref: Ref(cm.Hash), Author: cm.Author.Name + " <" + cm.Author.Email + ">", When: cm.Author.When.UTC(), Subject: subject,
		Message: cm.Message, Active: active, Trailers: Trailers{
			ChangesetID: trailer(cm.Message, "Changeset-Id"), Swarm: trailer(cm.Message, "Agentauth-Swarm"),
			Instance: trailer(cm.Message, "Agentauth-Instance"), Agent: trailer(cm.Message, "Agentauth-Agent"),
			Turn: trailer(cm.Message, "Agentauth-Turn"), TraceID: trailer(cm.Message, "Trace-Id"),
			Reverts: trailer(cm.Message, "Reverts"), Operator: trailer(cm.Message, "Agentauth-Operator"),
			ImportTree: trailer(cm.Message, importTrailer)}}
	if len(cm.ParentHashes) > 0 {
		e.Parent = Ref(cm.ParentHashes[0])
	}
	return e
}

// Log lists at most n revisions from the active one back (first parents).
func Log(ctx context.Context, repo Repo, n int) ([]Entry, error) {
	h, err := repo.Head(ctx)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for len(out) < n && !h.IsZero() {
		cm, err := object.GetCommit(repo.Objects(), h)
		if err != nil {
			return nil, err
		}
		out = append(out, entryOf(cm, len(out) == 0))
		h = plumbing.ZeroHash
		if len(cm.ParentHashes) > 0 {
			h = cm.ParentHashes[0]
		}
	}
	return out, nil
}

// Show is revision ref with what it changed against its parent.
func Show(ctx context.Context, repo Repo, ref string) (Entry, error) {
	h, err := ParseRef(ref)
	if err != nil {
		return Entry{}, err
	}
	head, err := repo.Head(ctx)
	if err != nil {
		return Entry{}, err
	}
	cm, err := object.GetCommit(repo.Objects(), h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return Entry{}, fmt.Errorf("revision %s: %w", ref, ErrUnknownRevision)
	}
	if err != nil {
		return Entry{}, err
	}
	e := entryOf(cm, h == head)
	after, err := readTree(repo.Objects(), h)
	if err != nil {
		return Entry{}, err
	}
	before := tree{}
	if len(cm.ParentHashes) > 0 {
		if before, err = readTree(repo.Objects(), cm.ParentHashes[0]); err != nil {
			return Entry{}, err
		}
	}
	e.Summary = summarize(before, after)
	return e, nil
}

// ErrUnknownRevision: no such commit in the repository.
var ErrUnknownRevision = errors.New("no such revision")

// Diff is the unified diff of the files from revision from to revision to.
func Diff(ctx context.Context, repo Repo, from, to string) (string, error) {
	var trees [2]*object.Tree
	for i, ref := range []string{from, to} {
		h, err := ParseRef(ref)
		if err != nil {
			return "", err
		}
		cm, err := object.GetCommit(repo.Objects(), h)
		if errors.Is(err, plumbing.ErrObjectNotFound) {
			return "", fmt.Errorf("revision %s: %w", ref, ErrUnknownRevision)
		}
		if err != nil {
			return "", err
		}
		if trees[i], err = cm.Tree(); err != nil {
			return "", err
		}
	}
	p, err := trees[0].PatchContext(ctx, trees[1])
	if err != nil {
		return "", err
	}
	return p.String(), nil
}

// ResolveRef reads a revision as an operator may write it: "git:<sha>",
// a bare 40-hex sha, "active" (the head) or "active~N" (N first parents
// back).
func ResolveRef(ctx context.Context, repo Repo, ref string) (string, error) {
	if plumbing.IsHash(ref) && len(ref) == 40 {
		ref = RefPrefix + ref
	}
	base, back, hasBack := strings.Cut(ref, "~")
	if base != "active" {
		if hasBack {
			return "", fmt.Errorf("revision %q: ~N goes back from active only (active~1)", ref)
		}
		if _, err := ParseRef(ref); err != nil {
			return "", fmt.Errorf("revision %q: want git:<40 hex digits>, a bare sha, active or active~N", ref)
		}
		return ref, nil
	}
	n := 0
	if hasBack {
		if _, err := fmt.Sscanf(back, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != back {
			return "", fmt.Errorf("revision %q: want active~N with N a number", ref)
		}
	}
	h, err := repo.Head(ctx)
	if err != nil {
		return "", err
	}
	for range n {
		cm, err := object.GetCommit(repo.Objects(), h)
		if err != nil {
			return "", err
		}
		if len(cm.ParentHashes) == 0 {
			return "", fmt.Errorf("revision %q: the history has fewer revisions", ref)
		}
		h = cm.ParentHashes[0]
	}
	return Ref(h), nil
}

// Revert lands a revision that undoes ref's changes on top of the active
// one — itself a commit, merged, checked and swapped like a changeset's —
// by operator (recorded in the commit).
func (m *Manager) Revert(ctx context.Context, ref, operator string) (Result, error) {
	h, err := ParseRef(ref)
	if err != nil {
		return Result{}, err
	}
	objs := m.Repo.Objects()
	cm, err := object.GetCommit(objs, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return Result{}, fmt.Errorf("revision %s: %w", ref, ErrUnknownRevision)
	}
	if err != nil {
		return Result{}, err
	}
	if len(cm.ParentHashes) == 0 {
		return Result{}, fmt.Errorf("revision %s is the first: there is nothing before it to go back to", ref)
	}
	// Reverting is merging base=ref → ours=ref's parent into the head.
	reverted, err := readTree(objs, h)
	if err != nil {
		return Result{}, err
	}
	parent, err := readTree(objs, cm.ParentHashes[0])
	if err != nil {
		return Result{}, err
	}
	subject, _, _ := strings.Cut(cm.Message, "\n")
	msg := fmt.Sprintf("revert %s: %s\n\nReverts: %s\nAgentauth-Operator: %s\n", Ref(h)[:16], oneLine(subject), Ref(h), oneLine(operator))
	res := Result{BaseRef: ref}
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	for attempt := range swapAttempts {
		if err := backoff(ctx, attempt); err != nil {
			return Result{}, err
		}
		head, err := m.Repo.Head(ctx)
		if err != nil {
			return Result{}, err
		}
		theirs, err := readTree(objs, head)
		if err != nil {
			return Result{}, err
		}
		merged, conflicts, err := m.merge(reverted, parent, theirs)
		if err != nil {
			return Result{}, err
		}
		if len(conflicts) > 0 {
			return res.refused(StatusConflict, &ResultError{Code: "E_REVERT_CONFLICT",
				Message:          "later revisions changed the same lines: " + strings.Join(conflicts, ", "),
				ConflictingFiles: conflicts, Hint: "revert the later revisions first, or change the files with a changeset"}), nil
		}
		files, err := merged.bundleFiles(objs)
		if err != nil {
			return Result{}, err
		}
		if _, err := m.load(files); err != nil {
			return res.refused(StatusRejected, &ResultError{Code: "E_BUNDLE_INVALID",
				Message: clip("the bundle would not load after the revert; nothing changed:\n"+err.Error(), 4000)}), nil
		}
		root, err := writeTree(objs, merged)
		if err != nil {
			return Result{}, err
		}
		sig := signature("agentauth", "agentauth@agentauth.invalid", m.now())
		c, err := writeCommit(objs, root, head, signature(oneLine(operator), "operator@agentauth.invalid", m.now()), sig, msg+m.inheritImport(head))
		if err != nil {
			return Result{}, err
		}
		if err := m.Repo.SwapHead(ctx, head, c); errors.Is(err, ErrHeadMoved) {
			continue
		} else if err != nil {
			return Result{}, err
		}
		res.Status, res.NewRef, res.PreviousRef, res.Summary = StatusOK, Ref(c), Ref(head), summarize(theirs, merged)
		return res, nil
	}
	return res.refused(StatusFailed, &ResultError{Code: "E_CHANGESET_BUSY", Message: "other commits kept landing", Hint: "revert again"}), nil
}

// Export copies the active revision's history — every commit from the
// head back, with its trees and blobs — from one repository into another
// (an S3 bundle into a local directory, for git log and git diff) and
// moves the destination's ref to the same head. Objects the destination
// has are skipped, so exporting again copies only what is new. It returns
// the head and how many objects it copied.
func Export(ctx context.Context, from, to Repo) (plumbing.Hash, int, error) {
	head, err := from.Head(ctx)
	if err != nil {
		return plumbing.ZeroHash, 0, err
	}
	src, dst := from.Objects(), to.Objects()
	copied := 0
	copyObj := func(t plumbing.ObjectType, h plumbing.Hash) (bool, error) {
		if dst.HasEncodedObject(h) == nil {
			return false, nil
		}
		o, err := src.EncodedObject(t, h)
		if err != nil {
			return false, fmt.Errorf("object %s: %w", h, err)
		}
		if _, err := dst.SetEncodedObject(o); err != nil {
			return false, err
		}
		copied++
		return true, nil
	}
	// Children before parents, so an object the destination has is
	// complete (its trees and blobs, its history): an export cut short is
	// finished by the next one.
	var copyTree func(h plumbing.Hash) error
	copyTree = func(h plumbing.Hash) error {
		if dst.HasEncodedObject(h) == nil {
			return nil
		}
		t, err := object.GetTree(src, h)
		if err != nil {
			return err
		}
		for _, e := range t.Entries {
			if err := ctx.Err(); err != nil {
				return err
			}
			if e.Mode.IsFile() {
				if _, err := copyObj(plumbing.BlobObject, e.Hash); err != nil {
					return err
				}
			} else if err := copyTree(e.Hash); err != nil {
				return err
			}
		}
		_, err = copyObj(plumbing.TreeObject, h)
		return err
	}
	var chain []plumbing.Hash // the commits to copy, newest first
	for h := head; !h.IsZero() && dst.HasEncodedObject(h) != nil; {
		chain = append(chain, h)
		cm, err := object.GetCommit(src, h)
		if err != nil {
			return plumbing.ZeroHash, copied, err
		}
		h = plumbing.ZeroHash
		if len(cm.ParentHashes) > 0 {
			h = cm.ParentHashes[0]
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		cm, err := object.GetCommit(src, chain[i])
		if err != nil {
			return plumbing.ZeroHash, copied, err
		}
		if err := copyTree(cm.TreeHash); err != nil {
			return plumbing.ZeroHash, copied, err
		}
		if _, err := copyObj(plumbing.CommitObject, chain[i]); err != nil {
			return plumbing.ZeroHash, copied, err
		}
	}
	cur, err := to.Head(ctx)
	if errors.Is(err, ErrNoRevision) {
		cur = plumbing.ZeroHash
	} else if err != nil {
		return plumbing.ZeroHash, copied, err
	}
	if cur != head {
		if err := to.SwapHead(ctx, cur, head); err != nil {
			return plumbing.ZeroHash, copied, err
		}
	}
	return head, copied, nil
}
