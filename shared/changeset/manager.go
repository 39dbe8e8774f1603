package changeset

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"gopkg.in/yaml.v3"

	"github.com/agentauth/agentauth/shared/bundle"
)

// Limits of one changeset. A bundle is configuration, so these are
// generous for YAML and small for anything else an agent might try to
// store in it.
const (
	// MaxFileBytes is the largest file a changeset writes.
	MaxFileBytes = 256 << 10
	// MaxEdits is the most files one changeset changes.
	MaxEdits = 256
	// MaxPathBytes is the longest path.
	MaxPathBytes = 512
	// MaxReadBytes is the largest file read from a revision.
	MaxReadBytes = 8 << 20
	// maxMessageBytes bounds a commit message.
	maxMessageBytes = 2000
	// DefaultTTL is how long an open changeset lives after its last edit,
	// and how long the record of a landed one is kept (a repeated commit
	// answers from it).
	DefaultTTL = 24 * time.Hour
	// casAttempts bounds the retries of a record write that lost to
	// another write of the same changeset.
	casAttempts = 16
	// swapAttempts bounds the merge-and-swap loop of one commit: each lost
	// swap means another commit landed, so the loop ends; in one process
	// commits take turns (Manager.commitMu), so only other processes (other
	// servers, Lambda instances) make it go round.
	swapAttempts = 64
	// maxWalk bounds the history a commit searches for itself.
	maxWalk = 10000
)

// Manager runs changesets over a repository and their records.
type Manager struct {
	Repo    Repo
	Records Records
	// Validate loads files as a bundle with the process's options; an
	// error (a *bundle.ValidationError) rejects the commit.
	Validate func(files []bundle.File) error
	// Load, when set, is used instead of Validate, and also on the
	// changeset's base: a commit that changes a protected resource
	// (protectedChanges) is rejected.
	Load func(files []bundle.File) (*bundle.Bundle, error)
	// TTL is DefaultTTL when zero.
	TTL time.Duration
	// Now is time.Now when nil.
	Now func() time.Time
	Log *slog.Logger

	// commitMu makes this process's commits take turns: the runtime
	// model's single writer. Across processes the ref's compare-and-swap
	// decides.
	commitMu sync.Mutex
}

// Caller is who acts on a changeset and under which policy.
type Caller struct {
	Owner   Owner
	TurnID  string
	TraceID string
	Policy  bundle.ChangesetPolicy
}

// Error is a changeset operation refused for a reason the agent can act
// on; Code is stable (E_CHANGESET_*, E_PATH_*, E_FILE_*).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func refuse(code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Opened is what openChangeset answers.
type Opened struct {
	ChangesetID string `json:"changesetId"`
	BaseRef     string `json:"baseRef"`
	// Workdir names the changeset's view of the bundle. There is no shell:
	// its files are read and written through the changeset file tools, with
	// paths relative to the bundle root.
	Workdir string `json:"workdir"`
	Hint    Hint   `json:"hint"`
}

// Hint helps the model find its way.
type Hint struct {
	BundleRootInWorkdir string   `json:"bundleRootInWorkdir"`
	RecommendedFiles    []string `json:"recommendedFiles"`
	AllowedFiles        []string `json:"allowedFiles,omitempty"`
}

// Result is what commitChangeset answers.
type Result struct {
	Status      string `json:"status"` // ok | rejected | conflict | failed
	ChangesetID string `json:"changesetId"`
	BaseRef     string `json:"baseRef"`
	NewRef      string `json:"newRef,omitempty"`
	// PreviousRef is the active revision the commit replaced (ok only).
	PreviousRef string       `json:"previousRef,omitempty"`
	Summary     *Summary     `json:"summary,omitempty"`
	Error       *ResultError `json:"error,omitempty"`
}

// Commit statuses.
const (
	StatusOK       = "ok"
	StatusRejected = "rejected"
	StatusConflict = "conflict"
	StatusFailed   = "failed"
)

// Summary lists the files a commit changed, added and deleted.
type Summary struct {
	FilesChanged []string `json:"filesChanged"`
	FilesAdded   []string `json:"filesAdded"`
	FilesDeleted []string `json:"filesDeleted"`
}

// ResultError says why a commit did not land and what to do.
type ResultError struct {
	Code             string   `json:"code"`
	Message          string   `json:"message"`
	ViolatedFiles    []string `json:"violatedFiles,omitempty"`
	ConflictingFiles []string `json:"conflictingFiles,omitempty"`
	Hint             string   `json:"hint,omitempty"`
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Manager) ttl() time.Duration {
	if m.TTL > 0 {
		return m.TTL
	}
	return DefaultTTL
}

func (m *Manager) log() *slog.Logger {
	if m.Log != nil {
		return m.Log
	}
	return slog.New(slog.DiscardHandler)
}

// newID is a changeset id: cs_ and 26 base32 characters of crypto/rand.
func newID() string {
	return "cs_" + strings.ToLower(rand.Text())
}

// ValidID reports whether id has the form of a changeset id (cs_ and up
// to 64 lower-case letters and digits): adapters check an id a tool call
// gave before it names a file or an item.
func ValidID(id string) bool {
	rest, ok := strings.CutPrefix(id, "cs_")
	if !ok || rest == "" || len(rest) > 64 {
		return false
	}
	for _, c := range rest {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Open starts a changeset on the active revision.
func (m *Manager) Open(ctx context.Context, c Caller) (Opened, error) {
	if !c.Policy.Enabled {
		return Opened{}, refuse("E_CHANGESETS_DISABLED", "changesets are not enabled for agent %s of swarm %s (Swarm spec.policy.changesets.enabled, Agent spec.changesets.enabled)", c.Owner.Agent, c.Owner.Swarm)
	}
	head, err := m.Repo.Head(ctx)
	if err != nil {
		return Opened{}, err
	}
	t, err := readTree(m.Repo.Objects(), head)
	if err != nil {
		return Opened{}, err
	}
	now := m.now()
	cs := Changeset{ID: newID(), Owner: c.Owner, Base: head.String(), Status: StatusOpen, TurnID: c.TurnID,
		Created: now, Updated: now, Expires: now.Add(m.ttl())}
	if err := m.Records.Create(ctx, cs); err != nil {
		return Opened{}, err
	}
	var rec []string
	for _, p := range t.paths() {
		if bundle.IsBundleFile(p) && c.Policy.Allows(p) && len(rec) < 50 {
			rec = append(rec, p)
		}
	}
	allowed := slices.Concat(c.Policy.SwarmFiles, c.Policy.AgentFiles)
	return Opened{ChangesetID: cs.ID, BaseRef: Ref(head), Workdir: "changeset:" + cs.ID,
		Hint: Hint{BundleRootInWorkdir: ".", RecommendedFiles: nonNil(rec), AllowedFiles: allowed}}, nil
}

// get returns changeset id when c owns it: anyone else's, or a missing
// one, is E_CHANGESET_NOT_FOUND (an owner's existence is not revealed).
func (m *Manager) get(ctx context.Context, c Caller, id string) (Changeset, error) {
	cs, err := m.Records.Get(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && (cs.Owner != c.Owner || !m.now().Before(cs.Expires))) {
		return Changeset{}, refuse("E_CHANGESET_NOT_FOUND", "no open changeset %q for this agent: open one with swarmBundle.openChangeset", clip(id, 64))
	}
	return cs, err
}

// getOpen is get for an edit: a landed changeset takes no more.
func (m *Manager) getOpen(ctx context.Context, c Caller, id string) (Changeset, error) {
	cs, err := m.get(ctx, c, id)
	if err == nil && cs.Status != StatusOpen {
		return Changeset{}, refuse("E_CHANGESET_COMMITTED", "changeset %s was committed as %s; open a new one for more changes", cs.ID, cs.Result.NewRef)
	}
	return cs, err
}

// ReadFile returns path as the changeset sees it.
func (m *Manager) ReadFile(ctx context.Context, c Caller, id, path string) ([]byte, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	cs, err := m.get(ctx, c, id)
	if err != nil {
		return nil, err
	}
	h, ok, err := m.lookup(cs, path)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, refuse("E_FILE_NOT_FOUND", "%s: no such file in changeset %s", path, cs.ID)
	}
	data, err := readBlob(m.Repo.Objects(), h, MaxReadBytes)
	if errors.Is(err, errTooLarge) {
		return nil, refuse("E_FILE_TOO_LARGE", "%s is larger than %d bytes", path, MaxReadBytes)
	}
	return data, err
}

// lookup finds path's blob in the changeset: its edit, else its base.
func (m *Manager) lookup(cs Changeset, path string) (plumbing.Hash, bool, error) {
	if e, ok := cs.Edits[path]; ok {
		if e.Deleted {
			return plumbing.ZeroHash, false, nil
		}
		return plumbing.NewHash(e.Blob), true, nil
	}
	t, err := readTree(m.Repo.Objects(), plumbing.NewHash(cs.Base))
	if err != nil {
		return plumbing.ZeroHash, false, err
	}
	h, ok := t[path]
	return h, ok, nil
}

// FileInfo is one file of a listing.
type FileInfo struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Changed bool   `json:"changed,omitempty"` // written in this changeset
}

// ListFiles lists the changeset's files under prefix ("" for all, else a
// directory or a path prefix).
func (m *Manager) ListFiles(ctx context.Context, c Caller, id, prefix string) ([]FileInfo, error) {
	cs, err := m.get(ctx, c, id)
	if err != nil {
		return nil, err
	}
	t, err := m.view(cs)
	if err != nil {
		return nil, err
	}
	out := []FileInfo{}
	for _, p := range t.paths() {
		if !strings.HasPrefix(p, prefix) {
			continue
		}
		size, err := m.Repo.Objects().EncodedObjectSize(t[p])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		_, changed := cs.Edits[p]
		out = append(out, FileInfo{Path: p, Size: size, Changed: changed})
	}
	return out, nil
}

// view is the changeset's tree: its base with its edits.
func (m *Manager) view(cs Changeset) (tree, error) {
	t, err := readTree(m.Repo.Objects(), plumbing.NewHash(cs.Base))
	if err != nil {
		return nil, err
	}
	return withEdits(t, cs), nil
}

// withEdits applies cs's edits to t, its base's files, in place.
func withEdits(t tree, cs Changeset) tree {
	for p, e := range cs.Edits {
		if e.Deleted {
			delete(t, p)
		} else {
			t[p] = plumbing.NewHash(e.Blob)
		}
	}
	return t
}

// WriteFile sets path's content in the changeset.
func (m *Manager) WriteFile(ctx context.Context, c Caller, id, path string, data []byte) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	if !c.Policy.Allows(path) {
		return refuse("E_PATH_NOT_ALLOWED", "%s is not a file this agent may change (allowed: %s)", path, strings.Join(slices.Concat(c.Policy.SwarmFiles, c.Policy.AgentFiles), ", "))
	}
	if len(data) > MaxFileBytes {
		return refuse("E_FILE_TOO_LARGE", "%s: %d bytes, at most %d", path, len(data), MaxFileBytes)
	}
	if err := checkContent(path, data); err != nil {
		return err
	}
	h, err := writeBlob(m.Repo.Objects(), data)
	if err != nil {
		return err
	}
	return m.edit(ctx, c, id, path, Edit{Blob: h.String()})
}

// DeleteFile removes path from the changeset.
func (m *Manager) DeleteFile(ctx context.Context, c Caller, id, path string) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	if !c.Policy.Allows(path) {
		return refuse("E_PATH_NOT_ALLOWED", "%s is not a file this agent may change", path)
	}
	cs, err := m.getOpen(ctx, c, id)
	if err != nil {
		return err
	}
	if _, ok, err := m.lookup(cs, path); err != nil {
		return err
	} else if !ok {
		return refuse("E_FILE_NOT_FOUND", "%s: no such file in changeset %s", path, cs.ID)
	}
	return m.edit(ctx, c, id, path, Edit{Deleted: true})
}

// edit records one edit, retrying when another edit of the same
// changeset came first.
func (m *Manager) edit(ctx context.Context, c Caller, id, path string, e Edit) error {
	for range casAttempts {
		cs, err := m.getOpen(ctx, c, id)
		if err != nil {
			return err
		}
		if _, ok := cs.Edits[path]; !ok && len(cs.Edits) >= MaxEdits {
			return refuse("E_CHANGESET_LIMIT", "changeset %s already changes %d files, the most one changeset may", cs.ID, MaxEdits)
		}
		if cs.Edits == nil {
			cs.Edits = map[string]Edit{}
		}
		cs.Edits[path] = e
		cs.Conflicts = slices.DeleteFunc(cs.Conflicts, func(p string) bool { return p == path })
		now := m.now()
		cs.Updated, cs.Expires = now, now.Add(m.ttl())
		err = m.Records.Put(ctx, cs, cs.Version)
		if !errors.Is(err, ErrVersion) {
			return err
		}
	}
	return fmt.Errorf("changeset %s: %d concurrent edits in a row", id, casAttempts)
}

// CheckPath refuses a path that is not a clean, relative, slash-separated
// path of visible names: no escape from the bundle ("..", "/x"), no
// hidden segment (.git, dot files the loader skips), no control
// characters.
func CheckPath(p string) error {
	bad := func(why string) error {
		return refuse("E_PATH_INVALID", "path %q: %s; give a path relative to the bundle root such as tools/search.yaml", clip(p, 80), why)
	}
	switch {
	case p == "":
		return bad("empty")
	case len(p) > MaxPathBytes:
		return bad(fmt.Sprintf("longer than %d bytes", MaxPathBytes))
	case !utf8.ValidString(p):
		return bad("not UTF-8")
	case strings.HasPrefix(p, "/"):
		return bad("absolute")
	case strings.ContainsRune(p, '\\'):
		return bad("backslash")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return bad("control character")
		}
	}
	for _, seg := range strings.Split(p, "/") {
		switch {
		case seg == "":
			return bad("empty segment")
		case seg == "." || seg == "..":
			return bad("a . or .. segment")
		case strings.HasPrefix(seg, "."):
			return bad("a hidden name (starting with .)")
		}
	}
	return nil
}

// checkContent refuses a bundle file that is not YAML, and text that is
// not UTF-8.
func checkContent(p string, data []byte) error {
	if !utf8.Valid(data) {
		return refuse("E_FILE_INVALID", "%s: not UTF-8 text", p)
	}
	if !bundle.IsBundleFile(p) {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if err == nil {
			continue
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		return refuse("E_YAML_INVALID", "%s: %v", p, err)
	}
}

// Sweep removes expired changesets, at most limit; it returns how many.
func (m *Manager) Sweep(ctx context.Context, limit int) (int, error) {
	ids, err := m.Records.Expired(ctx, m.now(), limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		// Read it again: an edit since the listing extended its life. (An
		// edit between this read and the delete is lost with the record;
		// the window is a few milliseconds after a day without one.)
		cs, err := m.Records.Get(ctx, id)
		if errors.Is(err, ErrNotFound) || (err == nil && !cs.Expires.Before(m.now())) {
			continue
		}
		if err != nil {
			return n, err
		}
		if err := m.Records.Delete(ctx, id); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// signature is who a commit names.
func signature(name, email string, at time.Time) object.Signature {
	return object.Signature{Name: name, Email: email, When: at.UTC().Truncate(time.Second)}
}
