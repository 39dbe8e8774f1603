// Package changesettest is the conformance suite of the changeset
// backends: the same open / edit / commit / conflict / reject tests run on
// the local repository (shared/local/bundlerepo) and on S3 + DynamoDB
// (the emulator).
package changesettest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
)

// Backends opens an empty repository (no commit yet) and its records.
type Backends func(t *testing.T) (changeset.Repo, changeset.Records)

// Tool is a valid Tool resource named name, for a bundle file.
func Tool(name string) string {
	return fmt.Sprintf(`apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata:
  name: %[1]s
spec:
  id: "seed:%[1]s"
  name: %[1]s
  description: The %[1]s tool.
  inputSchema: {type: object}
  sourceId: seed
  transport: native
`, name)
}

// Seed is the bundle every test starts from.
func Seed() []changeset.ImportFile {
	return []changeset.ImportFile{
		{Path: "tools/alpha.yaml", Data: []byte(Tool("alpha"))},
		{Path: "tools/beta.yaml", Data: []byte(Tool("beta"))},
		{Path: "groups.yaml", Data: []byte("apiVersion: agents.example.io/v1alpha1\nkind: ToolGroup\nmetadata:\n  name: seed\nspec:\n  selectors:\n    - source: seed\n")},
		{Path: "README.md", Data: []byte("# seed bundle\n")},
	}
}

// Validate is the bundle loader the suite's manager uses.
func Validate(files []bundle.File) error {
	_, err := bundle.Parse(files, bundle.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	return err
}

// Everyone is a policy that allows every file.
var Everyone = bundle.ChangesetPolicy{Enabled: true}

type fixture struct {
	t    *testing.T
	ctx  context.Context
	repo changeset.Repo
	recs changeset.Records
	m    *changeset.Manager
	seed plumbing.Hash
}

func setup(t *testing.T, open Backends) *fixture {
	t.Helper()
	repo, recs := open(t)
	ctx := context.Background()
	seed, err := changeset.CommitTree(ctx, repo, Seed(), "seed\n", time.Now())
	if err != nil {
		t.Fatalf("import the seed: %v", err)
	}
	return &fixture{t: t, ctx: ctx, repo: repo, recs: recs, seed: seed,
		m: &changeset.Manager{Repo: repo, Records: recs, Validate: Validate}}
}

func caller(agent string) changeset.Caller {
	return changeset.Caller{Owner: changeset.Owner{Swarm: "default", Instance: "thread-" + agent, Agent: agent},
		TurnID: "turn-" + agent, TraceID: "trace-" + agent, Policy: Everyone}
}

func (f *fixture) open(c changeset.Caller) string {
	f.t.Helper()
	o, err := f.m.Open(f.ctx, c)
	if err != nil {
		f.t.Fatalf("open: %v", err)
	}
	return o.ChangesetID
}

func (f *fixture) write(c changeset.Caller, id, path, data string) {
	f.t.Helper()
	if err := f.m.WriteFile(f.ctx, c, id, path, []byte(data)); err != nil {
		f.t.Fatalf("write %s: %v", path, err)
	}
}

func (f *fixture) commit(c changeset.Caller, id string) changeset.Result {
	f.t.Helper()
	res, err := f.m.Commit(f.ctx, c, id, "")
	if err != nil {
		f.t.Fatalf("commit %s: %v", id, err)
	}
	return res
}

func (f *fixture) head() plumbing.Hash {
	f.t.Helper()
	h, err := f.repo.Head(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	return h
}

// headFile is path's content at the active revision ("" when absent).
func (f *fixture) headFile(path string) string {
	f.t.Helper()
	files, err := changeset.BundleFiles(f.repo, f.head())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, fl := range files {
		if fl.Name == path {
			return string(fl.Data)
		}
	}
	return ""
}

// loads checks the active revision loads as a bundle.
func (f *fixture) loads() *bundle.Bundle {
	f.t.Helper()
	files, err := changeset.BundleFiles(f.repo, f.head())
	if err != nil {
		f.t.Fatal(err)
	}
	b, err := bundle.Parse(files, bundle.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		f.t.Fatalf("the active revision does not load: %v", err)
	}
	return b
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var ce *changeset.Error
	if !errors.As(err, &ce) || ce.Code != code {
		t.Fatalf("got %v, want %s", err, code)
	}
}

// Run runs the suite on open.
func Run(t *testing.T, open Backends) {
	t.Run("OpenEditCommit", func(t *testing.T) { openEditCommit(t, setup(t, open)) })
	t.Run("Refusals", func(t *testing.T) { refusals(t, setup(t, open)) })
	t.Run("OtherOwners", func(t *testing.T) { otherOwners(t, setup(t, open)) })
	t.Run("DifferentFilesBothLand", func(t *testing.T) { differentFiles(t, setup(t, open)) })
	t.Run("DifferentHunksMerge", func(t *testing.T) { differentHunks(t, setup(t, open)) })
	t.Run("SameLinesConflict", func(t *testing.T) { sameLines(t, setup(t, open)) })
	t.Run("PolicyRejects", func(t *testing.T) { policyRejects(t, setup(t, open)) })
	t.Run("InvalidBundleRejected", func(t *testing.T) { invalidBundle(t, setup(t, open)) })
	t.Run("RepeatedCommit", func(t *testing.T) { repeatedCommit(t, setup(t, open)) })
	t.Run("LostSwapRetries", func(t *testing.T) { lostSwap(t, setup(t, open)) })
	t.Run("CrashAroundTheSwap", func(t *testing.T) { crashAroundSwap(t, open) })
	t.Run("Expiry", func(t *testing.T) { expiry(t, setup(t, open)) })
	t.Run("TwentyConcurrentCommits", func(t *testing.T) { twenty(t, setup(t, open)) })
	t.Run("Import", func(t *testing.T) { importSuite(t, open) })
	t.Run("History", func(t *testing.T) { historySuite(t, setup(t, open)) })
	t.Run("ProtectedResources", func(t *testing.T) { protectedSuite(t, open) })
}

func openEditCommit(t *testing.T, f *fixture) {
	c := caller("a")
	o, err := f.m.Open(f.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if o.BaseRef != changeset.Ref(f.seed) || !strings.HasPrefix(o.ChangesetID, "cs_") ||
		!slices.Contains(o.Hint.RecommendedFiles, "tools/alpha.yaml") || slices.Contains(o.Hint.RecommendedFiles, "README.md") {
		t.Fatalf("opened %+v", o)
	}
	id := o.ChangesetID
	got, err := f.m.ReadFile(f.ctx, c, id, "tools/alpha.yaml")
	if err != nil || string(got) != Tool("alpha") {
		t.Fatalf("read the base: %q %v", got, err)
	}
	f.write(c, id, "tools/gamma.yaml", Tool("gamma"))
	f.write(c, id, "tools/alpha.yaml", strings.Replace(Tool("alpha"), "The alpha tool.", "The alpha tool, edited.", 1))
	if err := f.m.DeleteFile(f.ctx, c, id, "tools/beta.yaml"); err != nil {
		t.Fatal(err)
	}
	if f.head() != f.seed {
		t.Fatal("an open changeset moved the active revision")
	}
	if _, err := f.m.ReadFile(f.ctx, c, id, "tools/beta.yaml"); err == nil {
		t.Fatal("a deleted file reads")
	}
	list, err := f.m.ListFiles(f.ctx, c, id, "tools/")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range list {
		names = append(names, fmt.Sprintf("%s:%v", fi.Path, fi.Changed))
	}
	if strings.Join(names, " ") != "tools/alpha.yaml:true tools/gamma.yaml:true" {
		t.Fatalf("listing %v", names)
	}
	res, err := f.m.Commit(f.ctx, c, id, "add gamma, drop beta")
	if err != nil || res.Status != changeset.StatusOK {
		t.Fatalf("commit: %+v %v", res, err)
	}
	if res.NewRef != changeset.Ref(f.head()) || res.PreviousRef != changeset.Ref(f.seed) || res.BaseRef != o.BaseRef {
		t.Fatalf("refs: %+v, head %s", res, f.head())
	}
	s := res.Summary
	if s == nil || strings.Join(s.FilesAdded, ",") != "tools/gamma.yaml" || strings.Join(s.FilesChanged, ",") != "tools/alpha.yaml" ||
		strings.Join(s.FilesDeleted, ",") != "tools/beta.yaml" {
		t.Fatalf("summary %+v", s)
	}
	b := f.loads()
	if _, ok := b.Tools["seed:gamma"]; !ok || b.Tools["seed:beta"] != nil {
		t.Fatalf("the new revision's tools: %v", b.Tools)
	}
	cm, err := object.GetCommit(f.repo.Objects(), f.head())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"add gamma, drop beta\n", "Changeset-Id: " + id + "\n", "Agentauth-Swarm: default\n",
		"Agentauth-Instance: thread-a\n", "Agentauth-Agent: a\n", "Agentauth-Turn: turn-a\n", "Trace-Id: trace-a\n"} {
		if !strings.Contains(cm.Message, want) {
			t.Errorf("commit message lacks %q:\n%s", want, cm.Message)
		}
	}
	if len(cm.ParentHashes) != 1 || cm.ParentHashes[0] != f.seed || cm.Author.Name != "agent a" {
		t.Fatalf("commit %+v", cm)
	}
	// A landed changeset takes no more edits.
	wantCode(t, f.m.WriteFile(f.ctx, c, id, "tools/x.yaml", []byte(Tool("x"))), "E_CHANGESET_COMMITTED")
}

func refusals(t *testing.T, f *fixture) {
	c := caller("a")
	off := c
	off.Policy = bundle.ChangesetPolicy{}
	_, err := f.m.Open(f.ctx, off)
	wantCode(t, err, "E_CHANGESETS_DISABLED")
	id := f.open(c)
	for _, p := range []string{"../x.yaml", "/etc/passwd", ".git/config", "tools/../../x", "a\\b.yaml", "tools//x.yaml", "tools/.hidden.yaml", "", "a\x00b"} {
		wantCode(t, f.m.WriteFile(f.ctx, c, id, p, []byte("a: 1\n")), "E_PATH_INVALID")
		_, err := f.m.ReadFile(f.ctx, c, id, p)
		wantCode(t, err, "E_PATH_INVALID")
	}
	wantCode(t, f.m.WriteFile(f.ctx, c, id, "tools/x.yaml", []byte("a: [1\n")), "E_YAML_INVALID")
	wantCode(t, f.m.WriteFile(f.ctx, c, id, "tools/x.yaml", make([]byte, changeset.MaxFileBytes+1)), "E_FILE_TOO_LARGE")
	wantCode(t, f.m.WriteFile(f.ctx, c, id, "notes.txt", []byte{0xff, 0xfe}), "E_FILE_INVALID")
	wantCode(t, f.m.DeleteFile(f.ctx, c, id, "tools/none.yaml"), "E_FILE_NOT_FOUND")
	_, err = f.m.ReadFile(f.ctx, c, id, "tools/none.yaml")
	wantCode(t, err, "E_FILE_NOT_FOUND")
	_, err = f.m.ReadFile(f.ctx, c, "cs_doesnotexist", "tools/alpha.yaml")
	wantCode(t, err, "E_CHANGESET_NOT_FOUND")
	_, err = f.m.ReadFile(f.ctx, c, "../../etc/passwd", "tools/alpha.yaml")
	wantCode(t, err, "E_CHANGESET_NOT_FOUND")
	res := f.commit(c, id)
	if res.Status != changeset.StatusRejected || res.Error == nil || res.Error.Code != "E_CHANGESET_EMPTY" {
		t.Fatalf("an empty commit: %+v", res)
	}
	if f.head() != f.seed {
		t.Fatal("a refused commit moved the ref")
	}
}

func otherOwners(t *testing.T, f *fixture) {
	a, b := caller("a"), caller("b")
	id := f.open(a)
	f.write(a, id, "tools/gamma.yaml", Tool("gamma"))
	for _, other := range []changeset.Caller{b, {Owner: changeset.Owner{Swarm: "other", Instance: "thread-a", Agent: "a"}, Policy: Everyone},
		{Owner: changeset.Owner{Swarm: "default", Instance: "thread-b", Agent: "a"}, Policy: Everyone}} {
		_, err := f.m.ReadFile(f.ctx, other, id, "tools/gamma.yaml")
		wantCode(t, err, "E_CHANGESET_NOT_FOUND")
		wantCode(t, f.m.WriteFile(f.ctx, other, id, "tools/x.yaml", []byte(Tool("x"))), "E_CHANGESET_NOT_FOUND")
		_, err = f.m.Commit(f.ctx, other, id, "")
		wantCode(t, err, "E_CHANGESET_NOT_FOUND")
	}
	if res := f.commit(a, id); res.Status != changeset.StatusOK {
		t.Fatalf("the owner's commit: %+v", res)
	}
}

func differentFiles(t *testing.T, f *fixture) {
	a, b := caller("a"), caller("b")
	ida, idb := f.open(a), f.open(b)
	f.write(a, ida, "tools/gamma.yaml", Tool("gamma"))
	f.write(b, idb, "tools/delta.yaml", Tool("delta"))
	if r := f.commit(a, ida); r.Status != changeset.StatusOK {
		t.Fatalf("a: %+v", r)
	}
	r := f.commit(b, idb)
	if r.Status != changeset.StatusOK {
		t.Fatalf("b: %+v", r)
	}
	b2 := f.loads()
	if b2.Tools["seed:gamma"] == nil || b2.Tools["seed:delta"] == nil {
		t.Fatalf("lost a commit: %v", b2.Tools)
	}
}

// withLines is the alpha tool with a tags list of n lines, line i replaced
// by edits[i].
func withLines(edits map[int]string) string {
	var b strings.Builder
	b.WriteString(Tool("alpha"))
	b.WriteString("  tags:\n")
	for i := range 20 {
		v, ok := edits[i]
		if !ok {
			v = fmt.Sprintf("t%02d", i)
		}
		fmt.Fprintf(&b, "    - %s\n", v)
	}
	return b.String()
}

func differentHunks(t *testing.T, f *fixture) {
	a, b := caller("a"), caller("b")
	setup := f.open(a)
	f.write(a, setup, "tools/alpha.yaml", withLines(nil))
	if r := f.commit(a, setup); r.Status != changeset.StatusOK {
		t.Fatalf("setup: %+v", r)
	}
	ida, idb := f.open(a), f.open(b)
	f.write(a, ida, "tools/alpha.yaml", withLines(map[int]string{1: "top-a"}))
	f.write(b, idb, "tools/alpha.yaml", withLines(map[int]string{18: "bottom-b"}))
	if r := f.commit(a, ida); r.Status != changeset.StatusOK {
		t.Fatalf("a: %+v", r)
	}
	if r := f.commit(b, idb); r.Status != changeset.StatusOK {
		t.Fatalf("b (another hunk of the same file): %+v", r)
	}
	if got, want := f.headFile("tools/alpha.yaml"), withLines(map[int]string{1: "top-a", 18: "bottom-b"}); got != want {
		t.Fatalf("merged:\n%s\nwant\n%s", got, want)
	}
}

func sameLines(t *testing.T, f *fixture) {
	a, b := caller("a"), caller("b")
	ida, idb := f.open(a), f.open(b)
	edit := func(desc string) string { return strings.Replace(Tool("alpha"), "The alpha tool.", desc, 1) }
	f.write(a, ida, "tools/alpha.yaml", edit("Alpha, by a."))
	f.write(b, idb, "tools/alpha.yaml", edit("Alpha, by b."))
	f.write(b, idb, "tools/delta.yaml", Tool("delta"))
	if r := f.commit(a, ida); r.Status != changeset.StatusOK {
		t.Fatalf("a: %+v", r)
	}
	afterA := f.head()
	r := f.commit(b, idb)
	if r.Status != changeset.StatusConflict || r.Error == nil || strings.Join(r.Error.ConflictingFiles, ",") != "tools/alpha.yaml" || r.Error.Hint == "" {
		t.Fatalf("b on the same line: %+v", r)
	}
	if f.head() != afterA {
		t.Fatal("a conflict moved the ref")
	}
	// The changeset stays open, on the head, with the conflict marked.
	got, err := f.m.ReadFile(f.ctx, b, idb, "tools/alpha.yaml")
	if err != nil || !strings.Contains(string(got), "<<<<<<< changeset") || !strings.Contains(string(got), "Alpha, by a.") || !strings.Contains(string(got), "Alpha, by b.") {
		t.Fatalf("the conflicting file in the changeset: %q %v", got, err)
	}
	if strings.Count(string(got), "kind: Tool") != 1 || !strings.Contains(string(got), ">>>>>>> active "+changeset.Ref(afterA)) {
		t.Fatalf("the markers are not around the conflicting line alone:\n%s", got)
	}
	if r := f.commit(b, idb); r.Status != changeset.StatusConflict {
		t.Fatalf("a commit with the markers still in: %+v", r)
	}
	f.write(b, idb, "tools/alpha.yaml", edit("Alpha, by a and b."))
	r = f.commit(b, idb)
	if r.Status != changeset.StatusOK {
		t.Fatalf("after resolving: %+v", r)
	}
	if !strings.Contains(f.headFile("tools/alpha.yaml"), "Alpha, by a and b.") || f.headFile("tools/delta.yaml") == "" {
		t.Fatalf("the resolution or b's other file is missing:\n%s", f.headFile("tools/alpha.yaml"))
	}
}

func policyRejects(t *testing.T, f *fixture) {
	c := caller("a")
	c.Policy = bundle.ChangesetPolicy{Enabled: true, SwarmFiles: []string{"tools/**"}, AgentFiles: []string{"tools/*.yaml"}}
	id := f.open(c)
	wantCode(t, f.m.WriteFile(f.ctx, c, id, "groups.yaml", []byte("a: 1\n")), "E_PATH_NOT_ALLOWED")
	wantCode(t, f.m.WriteFile(f.ctx, c, id, "tools/sub/x.yaml", []byte(Tool("x"))), "E_PATH_NOT_ALLOWED")
	// A wider policy wrote it; the commit runs under the narrow one.
	wide := c
	wide.Policy = Everyone
	f.write(wide, id, "groups.yaml", "apiVersion: agents.example.io/v1alpha1\nkind: ToolGroup\nmetadata:\n  name: seed\nspec:\n  selectors:\n    - source: other\n")
	f.write(c, id, "tools/gamma.yaml", Tool("gamma"))
	r := f.commit(c, id)
	if r.Status != changeset.StatusRejected || r.Error == nil || r.Error.Code != "E_PATH_NOT_ALLOWED" || strings.Join(r.Error.ViolatedFiles, ",") != "groups.yaml" {
		t.Fatalf("outside allowed.files: %+v", r)
	}
	if f.head() != f.seed {
		t.Fatal("a rejected commit moved the ref")
	}
	off := c
	off.Policy.Enabled = false
	if r := f.commit(off, id); r.Status != changeset.StatusRejected || r.Error.Code != "E_CHANGESETS_DISABLED" {
		t.Fatalf("disabled at commit: %+v", r)
	}
}

func invalidBundle(t *testing.T, f *fixture) {
	c := caller("a")
	id := f.open(c)
	f.write(c, id, "tools/gamma.yaml", strings.Replace(Tool("gamma"), "transport: native", "transport: carrier-pigeon", 1))
	r := f.commit(c, id)
	if r.Status != changeset.StatusRejected || r.Error == nil || r.Error.Code != "E_BUNDLE_INVALID" ||
		!strings.Contains(r.Error.Message, "tools/gamma.yaml:") || !strings.Contains(r.Error.Message, "transport") {
		t.Fatalf("an invalid bundle: %+v", r)
	}
	if f.head() != f.seed {
		t.Fatal("an invalid bundle moved the ref")
	}
	f.loads()
	f.write(c, id, "tools/gamma.yaml", Tool("gamma"))
	if r := f.commit(c, id); r.Status != changeset.StatusOK {
		t.Fatalf("after the fix: %+v", r)
	}
}

func repeatedCommit(t *testing.T, f *fixture) {
	c := caller("a")
	id := f.open(c)
	f.write(c, id, "tools/gamma.yaml", Tool("gamma"))
	first := f.commit(c, id)
	head := f.head()
	again := f.commit(c, id)
	if again.Status != changeset.StatusOK || again.NewRef != first.NewRef || f.head() != head {
		t.Fatalf("a repeated commit: %+v after %+v; head %s → %s", again, first, head, f.head())
	}
}

// swapHook wraps a repository to act around SwapHead.
type swapHook struct {
	changeset.Repo
	before func() error // before the swap; an error skips it
	after  func()
}

func (s *swapHook) SwapHead(ctx context.Context, old, new plumbing.Hash) error {
	if s.before != nil {
		if err := s.before(); err != nil {
			return err
		}
	}
	err := s.Repo.SwapHead(ctx, old, new)
	if s.after != nil && err == nil {
		s.after()
	}
	return err
}

func lostSwap(t *testing.T, f *fixture) {
	a, b := caller("a"), caller("b")
	ida := f.open(a)
	f.write(a, ida, "tools/gamma.yaml", Tool("gamma"))
	idb := f.open(b)
	f.write(b, idb, "tools/delta.yaml", Tool("delta"))
	// b's commit lands while a's is between its merge and its swap.
	once := sync.Once{}
	hooked := &swapHook{Repo: f.repo}
	hooked.before = func() error {
		once.Do(func() {
			mb := &changeset.Manager{Repo: f.repo, Records: f.recs, Validate: Validate}
			if r, err := mb.Commit(f.ctx, b, idb, ""); err != nil || r.Status != changeset.StatusOK {
				t.Errorf("b: %+v %v", r, err)
			}
		})
		return nil
	}
	ma := &changeset.Manager{Repo: hooked, Records: f.recs, Validate: Validate}
	r, err := ma.Commit(f.ctx, a, ida, "")
	if err != nil || r.Status != changeset.StatusOK {
		t.Fatalf("a after losing the swap: %+v %v", r, err)
	}
	b2 := f.loads()
	if b2.Tools["seed:gamma"] == nil || b2.Tools["seed:delta"] == nil {
		t.Fatalf("a commit was lost: %v", b2.Tools)
	}
}

var errCrash = errors.New("crash")

// failingPut fails the records' Put once armed.
type failingPut struct {
	changeset.Records
	armed bool
}

func (p *failingPut) Put(ctx context.Context, cs changeset.Changeset, expect int64) error {
	if p.armed {
		return errCrash
	}
	return p.Records.Put(ctx, cs, expect)
}

func crashAroundSwap(t *testing.T, open Backends) {
	// Before the swap: the objects are written, the ref is not moved. The
	// active revision is the old one and loads; a retry lands.
	f := setup(t, open)
	c := caller("a")
	id := f.open(c)
	f.write(c, id, "tools/gamma.yaml", Tool("gamma"))
	crashed := &changeset.Manager{Repo: &swapHook{Repo: f.repo, before: func() error { return errCrash }}, Records: f.recs, Validate: Validate}
	if _, err := crashed.Commit(f.ctx, c, id, ""); !errors.Is(err, errCrash) {
		t.Fatalf("the crash: %v", err)
	}
	if f.head() != f.seed {
		t.Fatal("the ref moved")
	}
	f.loads()
	if r := f.commit(c, id); r.Status != changeset.StatusOK {
		t.Fatalf("the retry: %+v", r)
	}

	// After the swap, before the record: the commit is in the history; a
	// retry finds it and answers ok without committing again.
	f = setup(t, open)
	id = f.open(c)
	f.write(c, id, "tools/gamma.yaml", Tool("gamma"))
	fp := &failingPut{Records: f.recs}
	m := &changeset.Manager{Repo: &swapHook{Repo: f.repo, after: func() { fp.armed = true }}, Records: fp, Validate: Validate}
	first, err := m.Commit(f.ctx, c, id, "")
	if err != nil || first.Status != changeset.StatusOK {
		t.Fatalf("the commit whose record failed: %+v %v", first, err)
	}
	head := f.head()
	again := f.commit(c, id)
	if again.Status != changeset.StatusOK || again.NewRef != first.NewRef || f.head() != head {
		t.Fatalf("the retry: %+v, first %+v; head %s → %s", again, first, head, f.head())
	}
}

func expiry(t *testing.T, f *fixture) {
	now := time.Now()
	f.m.Now = func() time.Time { return now }
	f.m.TTL = time.Hour
	c := caller("a")
	id := f.open(c)
	keep := f.open(c)
	now = now.Add(50 * time.Minute)
	f.write(c, keep, "tools/gamma.yaml", Tool("gamma")) // an edit extends its life
	now = now.Add(20 * time.Minute)
	_, err := f.m.ReadFile(f.ctx, c, id, "tools/alpha.yaml")
	wantCode(t, err, "E_CHANGESET_NOT_FOUND")
	n, err := f.m.Sweep(f.ctx, 100)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if _, err := f.recs.Get(f.ctx, id); !errors.Is(err, changeset.ErrNotFound) {
		t.Fatalf("the expired record: %v", err)
	}
	if r := f.commit(c, keep); r.Status != changeset.StatusOK {
		t.Fatalf("the live one: %+v", r)
	}
}

func twenty(t *testing.T, f *fixture) {
	const n = 20
	var wg sync.WaitGroup
	results := make([]changeset.Result, n)
	errs := make([]error, n)
	for i := range n {
		c := caller(fmt.Sprintf("agent%02d", i))
		id := f.open(c)
		f.write(c, id, fmt.Sprintf("tools/t%02d.yaml", i), Tool(fmt.Sprintf("t%02d", i)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = f.m.Commit(f.ctx, c, id, "")
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || results[i].Status != changeset.StatusOK {
			t.Fatalf("commit %d: %+v %v", i, results[i], errs[i])
		}
	}
	b := f.loads()
	for i := range n {
		if b.Tools[fmt.Sprintf("seed:t%02d", i)] == nil {
			t.Fatalf("commit %d was lost", i)
		}
	}
	// The history is linear: 20 commits on the seed.
	h, count := f.head(), 0
	for h != f.seed {
		cm, err := object.GetCommit(f.repo.Objects(), h)
		if err != nil || len(cm.ParentHashes) != 1 {
			t.Fatalf("history at %s: %v", h, err)
		}
		h, count = cm.ParentHashes[0], count+1
	}
	if count != n {
		t.Fatalf("%d commits on the seed, want %d", count, n)
	}
}

func importSuite(t *testing.T, open Backends) {
	repo, recs := open(t)
	ctx := context.Background()
	m := &changeset.Manager{Repo: repo, Records: recs, Validate: Validate}
	f := &fixture{t: t, ctx: ctx, repo: repo, recs: recs, m: m}
	res, err := m.Import(ctx, Seed(), "seed/")
	if err != nil || res.Status != changeset.ImportDone || res.PreviousRef != "" || len(res.Summary.FilesAdded) != len(Seed()) {
		t.Fatalf("the first import: %+v %v", res, err)
	}
	f.seed = f.head()
	if res, err := m.Import(ctx, Seed(), "seed/"); err != nil || res.Status != changeset.ImportUnchanged || f.head() != f.seed {
		t.Fatalf("the same source again: %+v %v", res, err)
	}
	// An agent adds gamma and edits alpha's first lines; the source then
	// edits beta and adds delta: both survive the next import.
	c := caller("a")
	id := f.open(c)
	f.write(c, id, "tools/gamma.yaml", Tool("gamma"))
	f.write(c, id, "tools/alpha.yaml", strings.Replace(Tool("alpha"), "The alpha tool.", "Alpha, by the agent.", 1))
	if r := f.commit(c, id); r.Status != changeset.StatusOK {
		t.Fatalf("the agent's commit: %+v", r)
	}
	// The agent's commit carries the import it is based on forward, so the
	// next import finds it in one read.
	top, err := changeset.Log(ctx, repo, 2)
	if err != nil || top[0].Trailers.ImportTree == "" || top[0].Trailers.ImportTree != top[1].Trailers.ImportTree {
		t.Fatalf("the import trailer is not carried forward: %+v %v", top, err)
	}
	src := Seed()
	src[1].Data = []byte(strings.Replace(Tool("beta"), "The beta tool.", "Beta, by the source.", 1))
	src = append(src, changeset.ImportFile{Path: "tools/delta.yaml", Data: []byte(Tool("delta"))})
	res, err = m.Import(ctx, src, "seed/")
	if err != nil || res.Status != changeset.ImportDone {
		t.Fatalf("the import after an agent's commit: %+v %v", res, err)
	}
	b := f.loads()
	if b.Tools["seed:gamma"] == nil || b.Tools["seed:delta"] == nil || !strings.Contains(f.headFile("tools/alpha.yaml"), "Alpha, by the agent.") ||
		!strings.Contains(f.headFile("tools/beta.yaml"), "Beta, by the source.") {
		t.Fatalf("the merged import lost a side: %v\nalpha: %s\nbeta: %s", b.Tools, f.headFile("tools/alpha.yaml"), f.headFile("tools/beta.yaml"))
	}
	// The source changes the line the agent changed: conflict, nothing moves.
	before := f.head()
	src[0].Data = []byte(strings.Replace(Tool("alpha"), "The alpha tool.", "Alpha, by the source.", 1))
	res, err = m.Import(ctx, src, "seed/")
	if err != nil || res.Status != changeset.ImportConflict || strings.Join(res.ConflictingFiles, ",") != "tools/alpha.yaml" || f.head() != before {
		t.Fatalf("a conflicting import: %+v %v", res, err)
	}
	// An invalid source: the loader's problems, nothing moves.
	src[0].Data = []byte(Tool("alpha"))
	bad := append(slices.Clone(src), changeset.ImportFile{Path: "tools/bad.yaml", Data: []byte("kind: Tool\n")})
	_, err = m.Import(ctx, bad, "seed/")
	var ve *bundle.ValidationError
	if !errors.As(err, &ve) || f.head() != before {
		t.Fatalf("an invalid import: %v", err)
	}
}

func historySuite(t *testing.T, f *fixture) {
	c := caller("a")
	id := f.open(c)
	f.write(c, id, "tools/gamma.yaml", Tool("gamma"))
	added := f.commit(c, id)
	id = f.open(c)
	f.write(c, id, "tools/alpha.yaml", strings.Replace(Tool("alpha"), "The alpha tool.", "Alpha, edited.", 1))
	edited := f.commit(c, id)
	log, err := changeset.Log(f.ctx, f.repo, 10)
	if err != nil || len(log) != 3 || log[0].Ref != edited.NewRef || !log[0].Active || log[1].Ref != added.NewRef || log[2].Ref != changeset.Ref(f.seed) ||
		log[0].Trailers.ChangesetID != id || log[0].Trailers.Instance != "thread-a" || log[0].Parent != added.NewRef {
		t.Fatalf("log: %+v %v", log, err)
	}
	e, err := changeset.Show(f.ctx, f.repo, added.NewRef)
	if err != nil || e.Active || strings.Join(e.Summary.FilesAdded, ",") != "tools/gamma.yaml" {
		t.Fatalf("show: %+v %v", e, err)
	}
	d, err := changeset.Diff(f.ctx, f.repo, added.NewRef, edited.NewRef)
	if err != nil || !strings.Contains(d, "-  description: The alpha tool.") || !strings.Contains(d, "+  description: Alpha, edited.") {
		t.Fatalf("diff: %v\n%s", err, d)
	}
	for ref, want := range map[string]string{"active": edited.NewRef, "active~1": added.NewRef, "active~2": changeset.Ref(f.seed),
		strings.TrimPrefix(added.NewRef, changeset.RefPrefix): added.NewRef} {
		if got, err := changeset.ResolveRef(f.ctx, f.repo, ref); err != nil || got != want {
			t.Errorf("resolve %s: %s %v, want %s", ref, got, err, want)
		}
	}
	for _, bad := range []string{"active~3", "active~x", "main", "git:123", "HEAD~1"} {
		if _, err := changeset.ResolveRef(f.ctx, f.repo, bad); err == nil {
			t.Errorf("resolve %s: no error", bad)
		}
	}
	// Revert the older commit (gamma's): the later edit of alpha stays.
	r, err := f.m.Revert(f.ctx, added.NewRef, "operator alice")
	if err != nil || r.Status != changeset.StatusOK || strings.Join(r.Summary.FilesDeleted, ",") != "tools/gamma.yaml" {
		t.Fatalf("revert: %+v %v", r, err)
	}
	b := f.loads()
	if b.Tools["seed:gamma"] != nil || !strings.Contains(f.headFile("tools/alpha.yaml"), "Alpha, edited.") {
		t.Fatalf("after the revert: %v", b.Tools)
	}
	top, _ := changeset.Log(f.ctx, f.repo, 1)
	if top[0].Trailers.Reverts != added.NewRef || top[0].Trailers.Operator != "operator alice" {
		t.Fatalf("the revert's trailers: %+v", top[0].Trailers)
	}
	if _, err := f.m.Revert(f.ctx, changeset.Ref(f.seed), "alice"); err == nil {
		t.Fatal("reverting the first revision")
	}
	if _, err := f.m.Revert(f.ctx, "git:"+strings.Repeat("ab", 20), "alice"); !errors.Is(err, changeset.ErrUnknownRevision) {
		t.Fatalf("reverting an unknown revision: %v", err)
	}
}

const protectModel = `apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: m}
spec: {provider: openai, model: m, endpoint: "http://127.0.0.1:1/v1"}
`

const protectAgent = `apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec: {modelRef: Model/m, systemPrompt: be brief, tools: {selectors: [{source: seed}]}, changesets: {allowed: {files: ["tools/**"]}}}
`

const protectPolicy = `apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: everyone}
spec: {claimMatchers: [{claim: sub, operator: exists}], allowedGroupIds: [seed]}
`

// protectedSuite: whatever allowed.files says, a changeset may
// not change a file that defines an AccessPolicy, a Model, an OAuthApp, a
// Connector or a Swarm (before or after), nor an Agent's changesets
// policy; it may change the rest of an Agent (its prompt) and tools.
func protectedSuite(t *testing.T, open Backends) {
	ctx := context.Background()
	repo, recs := open(t)
	load := func(files []bundle.File) (*bundle.Bundle, error) {
		return bundle.Parse(files, bundle.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	}
	m := &changeset.Manager{Repo: repo, Records: recs, Load: load}
	seed := append(Seed(),
		changeset.ImportFile{Path: "model.yaml", Data: []byte(protectModel)},
		changeset.ImportFile{Path: "agent.yaml", Data: []byte(protectAgent)},
		changeset.ImportFile{Path: "policy.yaml", Data: []byte(protectPolicy)})
	if _, err := m.Import(ctx, seed, "seed"); err != nil {
		t.Fatal(err)
	}
	c := changeset.Caller{Owner: changeset.Owner{Swarm: "s", Instance: "i", Agent: "assistant"}, Policy: Everyone}
	for _, tc := range []struct {
		name, path, data string
		code             string // "" lands
	}{
		{"an access policy widened", "policy.yaml", strings.Replace(protectPolicy, "allowedGroupIds: [seed]", "allowedGroupIds: [seed, all]", 1) +
			"---\napiVersion: agents.example.io/v1alpha1\nkind: ToolGroup\nmetadata: {name: all}\nspec: {selectors: [{source: \"*\"}]}\n", "E_PROTECTED_RESOURCE"},
		{"a new access policy in a new file", "tools/policy.yaml", strings.Replace(protectPolicy, "everyone", "mine", 1), "E_PROTECTED_RESOURCE"},
		{"the model's endpoint", "model.yaml", strings.Replace(protectModel, "127.0.0.1:1", "127.0.0.1:2", 1), "E_PROTECTED_RESOURCE"},
		{"the agent's own changesets policy", "agent.yaml", strings.Replace(protectAgent, `["tools/**"]`, `["**"]`, 1), "E_PROTECTED_RESOURCE"},
		{"the agent's prompt", "agent.yaml", strings.Replace(protectAgent, "be brief", "be thorough", 1), ""},
		{"a tool", "tools/gamma.yaml", Tool("gamma"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := repo.Head(ctx)
			o, err := m.Open(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.WriteFile(ctx, c, o.ChangesetID, tc.path, []byte(tc.data)); err != nil {
				t.Fatal(err)
			}
			res, err := m.Commit(ctx, c, o.ChangesetID, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := repo.Head(ctx)
			if tc.code == "" {
				if res.Status != changeset.StatusOK {
					t.Fatalf("%+v %+v", res, res.Error)
				}
				return
			}
			if res.Status != changeset.StatusRejected || res.Error.Code != tc.code || res.Error.ViolatedFiles[0] != tc.path || after != before {
				t.Fatalf("%+v %+v", res, res.Error)
			}
		})
	}
}
