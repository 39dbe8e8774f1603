package changeset

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/agentauth/agentauth/shared/bundle"
)

// Commit lands changeset id: it merges the active head into the
// changeset, checks the policy and the bundle loader on the result, writes
// the commit and moves the active ref by compare-and-swap — again from the
// new head whenever another commit landed in between, so none is lost.
// Every outcome the agent can act on is a Result (rejected, conflict); an
// error is a failure of the stores.
func (m *Manager) Commit(ctx context.Context, c Caller, id, message string) (Result, error) {
	cs, err := m.get(ctx, c, id)
	if err != nil {
		return Result{}, err
	}
	if cs.Status == StatusCommitted && cs.Result != nil {
		return *cs.Result, nil // a repeated commit: what the first answered
	}
	res := Result{ChangesetID: cs.ID, BaseRef: Ref(plumbing.NewHash(cs.Base))}
	if !c.Policy.Enabled {
		return res.refused(StatusRejected, &ResultError{Code: "E_CHANGESETS_DISABLED",
			Message: fmt.Sprintf("changesets are not enabled for agent %s of swarm %s", c.Owner.Agent, c.Owner.Swarm)}), nil
	}
	if len(cs.Conflicts) > 0 {
		return res.refused(StatusConflict, &ResultError{Code: "E_CHANGESET_CONFLICT",
			Message:          "these files still hold the conflict markers of the last commit: " + strings.Join(cs.Conflicts, ", "),
			ConflictingFiles: cs.Conflicts, Hint: conflictHint}), nil
	}
	objs := m.Repo.Objects()
	base := plumbing.NewHash(cs.Base)
	baseTree, err := readTree(objs, base)
	if err != nil {
		return Result{}, err
	}
	ours := withEdits(maps.Clone(baseTree), cs)
	changed := changedPaths(baseTree, ours)
	if refused := c.Policy.Refused(changed); len(refused) > 0 {
		return res.refused(StatusRejected, &ResultError{Code: "E_PATH_NOT_ALLOWED",
			Message:       "the changeset changes files this agent may not change: " + strings.Join(refused, ", "),
			ViolatedFiles: refused, Hint: "restore them (write their old content back, or delete the new ones) and commit again"}), nil
	}
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
		if landed, ok, err := m.landed(head, base, cs.ID); err != nil {
			return Result{}, err
		} else if ok {
			// A commit of this changeset already moved the ref (a crash
			// after the swap, or a duplicate call): answer as it would have.
			return m.finish(ctx, cs, landed, head, baseTree, ours)
		}
		merged := ours
		if head != base {
			theirs, err := readTree(objs, head)
			if err != nil {
				return Result{}, err
			}
			var conflicts []string
			if merged, conflicts, err = m.merge(baseTree, ours, theirs); err != nil {
				return Result{}, err
			}
			if len(conflicts) > 0 {
				return m.conflict(ctx, cs, head, baseTree, ours, theirs, conflicts)
			}
		}
		if len(changed) == 0 {
			return res.refused(StatusRejected, &ResultError{Code: "E_CHANGESET_EMPTY",
				Message: "the changeset changes no file", Hint: "write or delete files with the changeset tools first"}), nil
		}
		files, err := merged.bundleFiles(objs)
		if err != nil {
			return Result{}, err
		}
		after, err := m.load(files)
		if err != nil {
			var ve *bundle.ValidationError
			if !errors.As(err, &ve) {
				return Result{}, err
			}
			return res.refused(StatusRejected, &ResultError{Code: "E_BUNDLE_INVALID",
				Message: clip("the bundle would not load; nothing changed:\n"+err.Error(), 4000),
				Hint:    "fix the files named above in the changeset and commit again"}), nil
		}
		if after != nil {
			baseFiles, err := baseTree.bundleFiles(objs)
			if err != nil {
				return Result{}, err
			}
			before, err := m.Load(baseFiles)
			if err != nil {
				return Result{}, fmt.Errorf("the changeset's base %s does not load: %w", cs.Base, err)
			}
			if bad := protectedChanges(before, after, changed); len(bad) > 0 {
				return res.refused(StatusRejected, &ResultError{Code: "E_PROTECTED_RESOURCE",
					Message:       "a changeset may not change OAuthApps, AccessPolicies, Connectors, Models, Swarms or an Agent's changesets policy: " + strings.Join(bad, "; "),
					ViolatedFiles: pathsOf(bad), Hint: "restore those files; an operator changes them with git or agentauth bundle import"}), nil
			}
		}
		root, err := writeTree(objs, merged)
		if err != nil {
			return Result{}, err
		}
		now := m.now()
		author := signature("agent "+c.Owner.Agent, c.Owner.Agent+"@"+c.Owner.Swarm+".agents.agentauth.invalid", now)
		committer := signature("agentauth", "agentauth@agentauth.invalid", now)
		commit, err := writeCommit(objs, root, head, author, committer, commitMessage(message, cs, c, changed)+m.inheritImport(head))
		if err != nil {
			return Result{}, err
		}
		err = m.Repo.SwapHead(ctx, head, commit)
		if errors.Is(err, ErrHeadMoved) {
			m.log().DebugContext(ctx, "changeset commit lost the ref, merging again", "changesetId", cs.ID, "attempt", attempt+1)
			continue
		}
		if err != nil {
			return Result{}, err
		}
		return m.finish(ctx, cs, commit, head, baseTree, ours)
	}
	return res.refused(StatusFailed, &ResultError{Code: "E_CHANGESET_BUSY",
		Message: fmt.Sprintf("%d other commits landed while this one merged", swapAttempts), Hint: "commit again"}), nil
}

// backoff waits before a swap attempt after the first: another process
// landed a commit, so let it finish its record before merging again
// (jittered, growing to 64 ms).
func backoff(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return nil
	}
	return sleep(ctx, backoffDelay(attempt, rand.IntN))
}

// backoffDelay is the wait before swap attempt attempt (1 or more): 1 ms
// and a jitter of intN(n) ms, n from 8 after the first lost swap up to 64.
// intN is rand.IntN; it is a parameter so that a test can pin the jitter.
func backoffDelay(attempt int, intN func(int) int) time.Duration {
	return time.Duration(1+intN(4<<min(attempt, 4))) * time.Millisecond
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

const conflictHint = "the files changed since the changeset was opened, on the same lines; the changeset now holds them with git conflict markers (<<<<<<< changeset, =======, >>>>>>> active): read each, keep what both sides need, write it back without markers, and commit again"

func (r Result) refused(status string, e *ResultError) Result {
	r.Status, r.Error = status, e
	return r
}

// finish records the landed commit on the changeset and answers ok. The
// ref has moved: a record that cannot be written is logged, not an error
// (a repeated commit finds the commit in the history).
func (m *Manager) finish(ctx context.Context, cs Changeset, commit, previous plumbing.Hash, base, ours tree) (Result, error) {
	cm, err := object.GetCommit(m.Repo.Objects(), commit)
	if err != nil {
		return Result{}, err
	}
	if len(cm.ParentHashes) == 1 {
		previous = cm.ParentHashes[0]
	}
	res := Result{Status: StatusOK, ChangesetID: cs.ID, BaseRef: Ref(plumbing.NewHash(cs.Base)), NewRef: Ref(commit),
		PreviousRef: Ref(previous), Summary: summarize(base, ours)}
	for range casAttempts {
		cs.Status, cs.Result = StatusCommitted, &res
		cs.Updated, cs.Expires = m.now(), m.now().Add(m.ttl())
		err := m.Records.Put(ctx, cs, cs.Version)
		if err == nil || !errors.Is(err, ErrVersion) {
			if err != nil {
				m.log().WarnContext(ctx, "changeset landed but its record was not updated", "changesetId", cs.ID, "newRef", res.NewRef, "err", err)
			}
			return res, nil
		}
		if cs, err = m.Records.Get(ctx, cs.ID); err != nil {
			return res, nil
		}
		if cs.Status == StatusCommitted && cs.Result != nil {
			return *cs.Result, nil
		}
	}
	return res, nil
}

// landed finds a commit of changeset id between head and base (first
// parents).
func (m *Manager) landed(head, base plumbing.Hash, id string) (plumbing.Hash, bool, error) {
	trailer := "\nChangeset-Id: " + id + "\n"
	h := head
	for range maxWalk {
		if h == base || h.IsZero() {
			return plumbing.ZeroHash, false, nil
		}
		cm, err := object.GetCommit(m.Repo.Objects(), h)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if strings.Contains(cm.Message+"\n", trailer) {
			return h, true, nil
		}
		if len(cm.ParentHashes) == 0 {
			return plumbing.ZeroHash, false, nil
		}
		h = cm.ParentHashes[0]
	}
	return plumbing.ZeroHash, false, nil
}

// merge merges base→theirs into base→ours, file by file and, for a file
// both changed, line by line (Merge3). It returns the merged tree and the
// files that could not be merged.
func (m *Manager) merge(base, ours, theirs tree) (tree, []string, error) {
	out := tree{}
	var conflicts []string
	for _, p := range union(base, ours, theirs) {
		b, inB := base[p]
		o, inO := ours[p]
		t, inT := theirs[p]
		switch {
		case inO == inT && o == t: // the same on both sides
			if inO {
				out[p] = o
			}
		case inB == inO && b == o: // only theirs changed it
			if inT {
				out[p] = t
			}
		case inB == inT && b == t: // only ours changed it
			if inO {
				out[p] = o
			}
		case !inO || !inT: // deleted on one side, changed on the other
			conflicts = append(conflicts, p)
		default:
			data, ok, err := m.mergeBlobs(b, inB, o, t)
			if err != nil {
				return nil, nil, err
			}
			if !ok {
				conflicts = append(conflicts, p)
				continue
			}
			h, err := writeBlob(m.Repo.Objects(), data)
			if err != nil {
				return nil, nil, err
			}
			out[p] = h
		}
	}
	return out, conflicts, nil
}

// mergeBlobs merges three versions of a file line by line.
func (m *Manager) mergeBlobs(b plumbing.Hash, inB bool, o, t plumbing.Hash) ([]byte, bool, error) {
	objs := m.Repo.Objects()
	var bd []byte
	if inB {
		var err error
		if bd, err = readBlob(objs, b, MaxReadBytes); err != nil {
			return nil, false, err
		}
	}
	od, err := readBlob(objs, o, MaxReadBytes)
	if err != nil {
		return nil, false, err
	}
	td, err := readBlob(objs, t, MaxReadBytes)
	if err != nil {
		return nil, false, err
	}
	merged, conflict := Merge3(bd, od, td)
	return merged, !conflict, nil
}

// conflict answers a commit whose edits overlap the head's: the changeset
// moves onto the head, keeping every edit that merged and holding each
// conflicting file with conflict markers, and stays open for the agent to
// resolve and commit again.
func (m *Manager) conflict(ctx context.Context, cs Changeset, head plumbing.Hash, base, ours, theirs tree, conflicts []string) (Result, error) {
	res := Result{ChangesetID: cs.ID, BaseRef: Ref(plumbing.NewHash(cs.Base))}
	objs := m.Repo.Objects()
	edits := map[string]Edit{}
	for _, p := range union(base, ours, theirs) {
		if slices.Contains(conflicts, p) {
			var od, td []byte
			var err error
			if h, ok := ours[p]; ok {
				if od, err = readBlob(objs, h, MaxReadBytes); err != nil {
					return Result{}, err
				}
			}
			if h, ok := theirs[p]; ok {
				if td, err = readBlob(objs, h, MaxReadBytes); err != nil {
					return Result{}, err
				}
			}
			var bd []byte
			if h, ok := base[p]; ok {
				if bd, err = readBlob(objs, h, MaxReadBytes); err != nil {
					return Result{}, err
				}
			}
			var marked []byte
			if od == nil || td == nil {
				// Deleted on one side: the whole of the other, marked.
				marked = append(append(append(append([]byte("<<<<<<< changeset\n"), withNewline(od)...), "=======\n"...), withNewline(td)...), ">>>>>>> active "+Ref(head)+"\n"...)
			} else {
				marked, _ = MergeWithMarkers(bd, od, td, Ref(head))
			}
			h, err := writeBlob(objs, marked)
			if err != nil {
				return Result{}, err
			}
			edits[p] = Edit{Blob: h.String()}
			continue
		}
		// A clean path: the changeset keeps its own edit of it, now
		// relative to the head.
		o, inO := ours[p]
		b, inB := base[p]
		if inO == inB && o == b {
			continue // not edited: the head's version shows through
		}
		t, inT := theirs[p]
		switch {
		case inO == inT && o == t:
			// the head has the same: nothing left to change
		case !inO:
			edits[p] = Edit{Deleted: true}
		default:
			edits[p] = Edit{Blob: o.String()}
		}
	}
	for range casAttempts {
		cs.Base, cs.Edits, cs.Conflicts = head.String(), edits, conflicts
		cs.Updated, cs.Expires = m.now(), m.now().Add(m.ttl())
		err := m.Records.Put(ctx, cs, cs.Version)
		if err == nil {
			break
		}
		if !errors.Is(err, ErrVersion) {
			return Result{}, err
		}
		// An edit came in between: answer conflict on the record as it
		// is; the next commit merges again.
		break
	}
	return res.refused(StatusConflict, &ResultError{Code: "E_CHANGESET_CONFLICT",
		Message:          fmt.Sprintf("the active revision (%s) changed %s since this changeset was opened", Ref(head), strings.Join(conflicts, ", ")),
		ConflictingFiles: conflicts, Hint: conflictHint}), nil
}

func withNewline(b []byte) []byte {
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return append(slices.Clone(b), '\n')
	}
	return b
}

// changedPaths lists the paths whose blob differs between a and b.
func changedPaths(a, b tree) []string {
	var out []string
	for _, p := range union(a, b) {
		ha, inA := a[p]
		hb, inB := b[p]
		if inA != inB || ha != hb {
			out = append(out, p)
		}
	}
	return out
}

// summarize lists what ours changed against base.
func summarize(base, ours tree) *Summary {
	s := &Summary{FilesChanged: []string{}, FilesAdded: []string{}, FilesDeleted: []string{}}
	for _, p := range changedPaths(base, ours) {
		_, inB := base[p]
		_, inO := ours[p]
		switch {
		case !inB:
			s.FilesAdded = append(s.FilesAdded, p)
		case !inO:
			s.FilesDeleted = append(s.FilesDeleted, p)
		default:
			s.FilesChanged = append(s.FilesChanged, p)
		}
	}
	return s
}

// union lists the paths of the trees, sorted.
func union(ts ...tree) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		for p := range t {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// commitMessage is the agent's message (or a summary) and the trailers
// that name the changeset and who made it: `git log` shows them.
func commitMessage(message string, cs Changeset, c Caller, changed []string) string {
	subject := strings.TrimSpace(message)
	if subject == "" {
		subject = fmt.Sprintf("change %d file(s): %s", len(changed), clip(strings.Join(changed, ", "), 200))
	}
	subject = clip(strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' || r == 0x7f {
			return ' '
		}
		return r
	}, subject), maxMessageBytes)
	var b strings.Builder
	b.WriteString(subject)
	b.WriteString("\n\n")
	trailer := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s: %s\n", k, oneLine(v))
		}
	}
	trailer("Changeset-Id", cs.ID)
	trailer("Agentauth-Swarm", c.Owner.Swarm)
	trailer("Agentauth-Instance", c.Owner.Instance)
	trailer("Agentauth-Agent", c.Owner.Agent)
	trailer("Agentauth-Turn", c.TurnID)
	trailer("Trace-Id", c.TraceID)
	return b.String()
}

// oneLine keeps a trailer value on its line.
func oneLine(s string) string {
	return clip(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s), 300)
}

// ImportResult is what Import did.
type ImportResult struct {
	// Status: "unchanged" (the source is what was imported last),
	// "imported" (a new revision) or "conflict" (the source and the
	// active revision changed the same lines since the last import:
	// nothing changed).
	Status      string   `json:"status"`
	NewRef      string   `json:"newRef,omitempty"`
	PreviousRef string   `json:"previousRef,omitempty"`
	Summary     *Summary `json:"summary,omitempty"`
	// ConflictingFiles, with status conflict.
	ConflictingFiles []string `json:"conflictingFiles,omitempty"`
}

// Import statuses.
const (
	ImportUnchanged = "unchanged"
	ImportDone      = "imported"
	ImportConflict  = "conflict"
)

// importTrailer names, in an import's commit, the tree of the files it
// imported: the base the next import of the same source merges from.
const importTrailer = "Agentauth-Import-Tree"

// Import brings a source directory's files (a deploy's packaged bundle,
// the files make run starts from) into the repository the way a changeset
// lands: the changes the source made since it was last imported are
// merged with what agents committed since (edits to different files or
// lines both stay; the same lines changed on both sides are a conflict,
// and nothing changes), the bundle loader checks the result, and the
// active ref moves by compare-and-swap. An empty repository gets the
// source as its first commit. An invalid bundle is a
// *bundle.ValidationError.
func (m *Manager) Import(ctx context.Context, files []ImportFile, source string) (ImportResult, error) {
	objs := m.Repo.Objects()
	src := tree{}
	for _, f := range files {
		if err := CheckPath(f.Path); err != nil {
			return ImportResult{}, fmt.Errorf("%s: %w", source, err)
		}
		h, err := writeBlob(objs, f.Data)
		if err != nil {
			return ImportResult{}, err
		}
		src[f.Path] = h
	}
	srcRoot, err := writeTree(objs, src)
	if err != nil {
		return ImportResult{}, err
	}
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	for attempt := range swapAttempts {
		if err := backoff(ctx, attempt); err != nil {
			return ImportResult{}, err
		}
		head, err := m.Repo.Head(ctx)
		if errors.Is(err, ErrNoRevision) {
			head = plumbing.ZeroHash
		} else if err != nil {
			return ImportResult{}, err
		}
		base := tree{}
		var merged tree
		if head.IsZero() {
			merged = src
		} else {
			last, ok, err := m.lastImport(head)
			if err != nil {
				return ImportResult{}, err
			}
			if ok && last == srcRoot {
				return ImportResult{Status: ImportUnchanged, NewRef: Ref(head)}, nil
			}
			if ok {
				if base, err = readTreeObject(objs, last); err != nil {
					return ImportResult{}, err
				}
			}
			theirs, err := readTree(objs, head)
			if err != nil {
				return ImportResult{}, err
			}
			if !ok {
				// Never imported: the repository's history is its own, and
				// the source replaces the files it has.
				base = theirs
			}
			var conflicts []string
			if merged, conflicts, err = m.merge(base, src, theirs); err != nil {
				return ImportResult{}, err
			}
			if len(conflicts) > 0 {
				return ImportResult{Status: ImportConflict, PreviousRef: Ref(head), ConflictingFiles: conflicts}, nil
			}
		}
		bfiles, err := merged.bundleFiles(objs)
		if err != nil {
			return ImportResult{}, err
		}
		if _, err := m.load(bfiles); err != nil {
			return ImportResult{}, err
		}
		root, err := writeTree(objs, merged)
		if err != nil {
			return ImportResult{}, err
		}
		sig := signature("agentauth", "agentauth@agentauth.invalid", m.now())
		msg := fmt.Sprintf("import %s\n\n%s: %s\n", oneLine(source), importTrailer, srcRoot)
		c, err := writeCommit(objs, root, head, sig, sig, msg)
		if err != nil {
			return ImportResult{}, err
		}
		err = m.Repo.SwapHead(ctx, head, c)
		if errors.Is(err, ErrHeadMoved) {
			continue
		}
		if err != nil {
			return ImportResult{}, err
		}
		res := ImportResult{Status: ImportDone, NewRef: Ref(c)}
		if !head.IsZero() {
			prev, err := readTree(objs, head)
			if err != nil {
				return ImportResult{}, err
			}
			res.PreviousRef, res.Summary = Ref(head), summarize(prev, merged)
		} else {
			res.Summary = summarize(tree{}, merged)
		}
		return res, nil
	}
	return ImportResult{}, fmt.Errorf("import %s: %d other commits landed while it merged; run it again", source, swapAttempts)
}

// inheritImport is the import trailer a commit on parent carries: the
// tree of the last import its history holds (parent's own trailer, which
// every commit agentauth writes carries forward), so finding it is one
// read (lastImport) however many commits landed since; "" when parent
// has none (a commit made with git).
func (m *Manager) inheritImport(parent plumbing.Hash) string {
	cm, err := object.GetCommit(m.Repo.Objects(), parent)
	if err != nil {
		return ""
	}
	if v := trailer(cm.Message, importTrailer); v != "" {
		return importTrailer + ": " + v + "\n"
	}
	return ""
}

// lastImport finds the tree of the last import head's history holds: the
// import trailer of the newest commit that has one (every commit
// agentauth writes carries it forward; commits made with git do not).
func (m *Manager) lastImport(head plumbing.Hash) (plumbing.Hash, bool, error) {
	h := head
	for range maxWalk {
		cm, err := object.GetCommit(m.Repo.Objects(), h)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if v := trailer(cm.Message, importTrailer); v != "" && plumbing.IsHash(v) {
			return plumbing.NewHash(v), true, nil
		}
		if len(cm.ParentHashes) == 0 {
			break
		}
		h = cm.ParentHashes[0]
	}
	return plumbing.ZeroHash, false, nil
}

// readTreeObject lists the files of tree object h.
func readTreeObject(objs storer.EncodedObjectStorer, h plumbing.Hash) (tree, error) {
	t, err := object.GetTree(objs, h)
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", h, err)
	}
	return treeFiles(t)
}

// load checks files with Load (the bundle, for the protection check) or
// Validate (nil bundle).
func (m *Manager) load(files []bundle.File) (*bundle.Bundle, error) {
	if m.Load != nil {
		return m.Load(files)
	}
	return nil, m.Validate(files)
}

// pathsOf keeps the path of each "path (why)".
func pathsOf(items []string) []string {
	var out []string
	for _, it := range items {
		p, _, _ := strings.Cut(it, " (")
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}
