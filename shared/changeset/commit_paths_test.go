package changeset_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

// logRecords keeps the records a Manager logs, for the tests to read.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r)
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// find returns the records with message msg, each as its attributes.
func (l *logRecords) find(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, r := range l.records {
		if r.Message != msg {
			continue
		}
		attrs := map[string]any{"level": r.Level}
		r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.Any(); return true })
		out = append(out, attrs)
	}
	return out
}

// swapHook acts before a repository's SwapHead and after a successful one.
type swapHook struct {
	changeset.Repo
	before func() error // an error is the swap's answer, the ref stays
	after  func()
}

func (s *swapHook) SwapHead(ctx context.Context, old, new plumbing.Hash) error {
	if s.before != nil {
		if err := s.before(); err != nil {
			return err
		}
	}
	err := s.Repo.SwapHead(ctx, old, new)
	if err == nil && s.after != nil {
		s.after()
	}
	return err
}

// putHook runs before a records' Put once armed; its error is the Put's.
type putHook struct {
	changeset.Records
	armed  bool
	before func(ctx context.Context, cs changeset.Changeset) error
}

func (p *putHook) Put(ctx context.Context, cs changeset.Changeset, expect int64) error {
	if p.armed {
		p.armed = false
		if err := p.before(ctx, cs); err != nil {
			return err
		}
	}
	return p.Records.Put(ctx, cs, expect)
}

type commitFixture struct {
	ctx  context.Context
	repo changeset.Repo
	recs changeset.Records
	seed plumbing.Hash
}

func newCommitFixture(t *testing.T) *commitFixture {
	t.Helper()
	repo, recs := memBackends(t)
	ctx := context.Background()
	seed, err := changeset.CommitTree(ctx, repo, changesettest.Seed(), "seed\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &commitFixture{ctx: ctx, repo: repo, recs: recs, seed: seed}
}

func agent(name string) changeset.Caller {
	return changeset.Caller{Owner: changeset.Owner{Swarm: "s", Instance: "i-" + name, Agent: name}, Policy: changesettest.Everyone}
}

// edit opens a changeset for c on m and writes files (path, content pairs).
func edit(t *testing.T, ctx context.Context, m *changeset.Manager, c changeset.Caller, files ...string) string {
	t.Helper()
	o, err := m.Open(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(files); i += 2 {
		if err := m.WriteFile(ctx, c, o.ChangesetID, files[i], []byte(files[i+1])); err != nil {
			t.Fatalf("write %s: %v", files[i], err)
		}
	}
	return o.ChangesetID
}

func head(t *testing.T, ctx context.Context, repo changeset.Repo) plumbing.Hash {
	t.Helper()
	h, err := repo.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestRepeatedCommitAnswersFromTheRecord: a commit of a changeset already
// committed answers what the first commit did, from its record, even when
// the caller's policy has changed since.
func TestRepeatedCommitAnswersFromTheRecord(t *testing.T) {
	f := newCommitFixture(t)
	m := &changeset.Manager{Repo: f.repo, Records: f.recs, Validate: changesettest.Validate}
	c := agent("a")
	id := edit(t, f.ctx, m, c, "tools/gamma.yaml", changesettest.Tool("gamma"))
	first, err := m.Commit(f.ctx, c, id, "")
	if err != nil || first.Status != changeset.StatusOK {
		t.Fatalf("commit: %+v %v", first, err)
	}
	c.Policy = bundle.ChangesetPolicy{} // changesets disabled since
	again, err := m.Commit(f.ctx, c, id, "")
	if err != nil || !reflect.DeepEqual(again, first) {
		t.Fatalf("the repeated commit answered %+v %v, want the first answer %+v", again, err, first)
	}
}

// TestRetryFindsItsCommitUnderAnother: the swap of a's commit succeeds but
// its record is not written (logged as a warning, answered ok); b's commit
// lands on top; a's retry finds its commit under b's and answers as the
// first did — the same new ref and the same previous ref, its commit's
// parent, not the head — without committing again.
func TestRetryFindsItsCommitUnderAnother(t *testing.T) {
	f := newCommitFixture(t)
	logs := &logRecords{}
	puts := &putHook{Records: f.recs, before: func(context.Context, changeset.Changeset) error { return errors.New("records unreachable") }}
	ma := &changeset.Manager{Repo: &swapHook{Repo: f.repo, after: func() { puts.armed = true }}, Records: puts,
		Validate: changesettest.Validate, Log: slog.New(logs)}
	a := agent("a")
	ida := edit(t, f.ctx, ma, a, "tools/gamma.yaml", changesettest.Tool("gamma"))
	first, err := ma.Commit(f.ctx, a, ida, "")
	if err != nil || first.Status != changeset.StatusOK || first.PreviousRef != changeset.Ref(f.seed) {
		t.Fatalf("a's commit whose record failed: %+v %v", first, err)
	}
	warned := logs.find("changeset landed but its record was not updated")
	if len(warned) != 1 || warned[0]["level"] != slog.LevelWarn || warned[0]["changesetId"] != ida || warned[0]["newRef"] != first.NewRef {
		t.Fatalf("the record that was not written was logged as %v, want one warning naming %s and %s", warned, ida, first.NewRef)
	}

	logsB := &logRecords{}
	mb := &changeset.Manager{Repo: f.repo, Records: f.recs, Validate: changesettest.Validate, Log: slog.New(logsB)}
	b := agent("b")
	idb := edit(t, f.ctx, mb, b, "tools/delta.yaml", changesettest.Tool("delta"))
	rb, err := mb.Commit(f.ctx, b, idb, "")
	if err != nil || rb.Status != changeset.StatusOK || rb.PreviousRef != first.NewRef {
		t.Fatalf("b's commit: %+v %v", rb, err)
	}
	if w := logsB.find("changeset landed but its record was not updated"); len(w) != 0 {
		t.Fatalf("a commit whose record was written warned: %v", w)
	}
	top := head(t, f.ctx, f.repo)

	m := &changeset.Manager{Repo: f.repo, Records: f.recs, Validate: changesettest.Validate}
	again, err := m.Commit(f.ctx, a, ida, "")
	if err != nil || again.Status != changeset.StatusOK || again.NewRef != first.NewRef || again.PreviousRef != first.PreviousRef {
		t.Fatalf("a's retry: %+v %v, want new ref %s and previous ref %s", again, err, first.NewRef, first.PreviousRef)
	}
	if h := head(t, f.ctx, f.repo); h != top {
		t.Fatalf("a's retry moved the head from %s to %s", top, h)
	}
	if rec, err := f.recs.Get(f.ctx, ida); err != nil || rec.Status != changeset.StatusCommitted {
		t.Fatalf("a's record after the retry: %+v %v", rec, err)
	}
}

// TestCommitRecordWrittenAfterAnEditCameBetween: an edit of the record
// between the commit's read and its write after the swap (a version
// conflict) does not leave the record open: the commit reads it again and
// records the landed commit on it.
func TestCommitRecordWrittenAfterAnEditCameBetween(t *testing.T) {
	f := newCommitFixture(t)
	puts := &putHook{Records: f.recs}
	puts.before = func(ctx context.Context, cs changeset.Changeset) error {
		cur, err := f.recs.Get(ctx, cs.ID)
		if err != nil {
			return err
		}
		return f.recs.Put(ctx, cur, cur.Version) // a write in between
	}
	logs := &logRecords{}
	m := &changeset.Manager{Repo: &swapHook{Repo: f.repo, after: func() { puts.armed = true }}, Records: puts,
		Validate: changesettest.Validate, Log: slog.New(logs)}
	c := agent("a")
	id := edit(t, f.ctx, m, c, "tools/gamma.yaml", changesettest.Tool("gamma"))
	res, err := m.Commit(f.ctx, c, id, "")
	if err != nil || res.Status != changeset.StatusOK {
		t.Fatalf("commit: %+v %v", res, err)
	}
	rec, err := f.recs.Get(f.ctx, id)
	if err != nil || rec.Status != changeset.StatusCommitted || rec.Result == nil || rec.Result.NewRef != res.NewRef {
		t.Fatalf("the record after a version conflict: %+v %v, want committed as %s", rec, err, res.NewRef)
	}
	if w := logs.find("changeset landed but its record was not updated"); len(w) != 0 {
		t.Fatalf("a version conflict that the retry resolved warned: %v", w)
	}
}

// TestLostSwapLogsTheAttempt: a swap lost to another commit is logged at
// debug level with the number of the attempt that lost, counting from 1,
// and the commit lands on the next.
func TestLostSwapLogsTheAttempt(t *testing.T) {
	f := newCommitFixture(t)
	lost := 0
	logs := &logRecords{}
	m := &changeset.Manager{Repo: &swapHook{Repo: f.repo, before: func() error {
		if lost < 2 {
			lost++
			return changeset.ErrHeadMoved
		}
		return nil
	}}, Records: f.recs, Validate: changesettest.Validate, Log: slog.New(logs)}
	c := agent("a")
	id := edit(t, f.ctx, m, c, "tools/gamma.yaml", changesettest.Tool("gamma"))
	res, err := m.Commit(f.ctx, c, id, "")
	if err != nil || res.Status != changeset.StatusOK {
		t.Fatalf("commit: %+v %v", res, err)
	}
	var attempts []string
	for _, r := range logs.find("changeset commit lost the ref, merging again") {
		if r["level"] != slog.LevelDebug || r["changesetId"] != id {
			t.Errorf("lost swap logged as %v", r)
		}
		attempts = append(attempts, fmt.Sprint(r["attempt"]))
	}
	if got := strings.Join(attempts, ","); got != "1,2" {
		t.Fatalf("lost swaps logged attempts %q, want \"1,2\"", got)
	}
}

// TestConflictKeepsTheCleanPaths: after a conflict the changeset holds the
// conflicting file with markers around the conflicting lines alone (merged
// from the base), keeps its own clean edits, and shows the head's version
// of a file it did not edit; resolved, it lands with both sides' changes.
func TestConflictKeepsTheCleanPaths(t *testing.T) {
	f := newCommitFixture(t)
	files := append(changesettest.Seed(), changeset.ImportFile{Path: "notes/plan.txt", Data: []byte("one\ntwo\nthree\n")})
	if _, err := changeset.CommitTree(f.ctx, f.repo, files, "plan\n", time.Now()); err != nil {
		t.Fatal(err)
	}
	m := &changeset.Manager{Repo: f.repo, Records: f.recs, Validate: changesettest.Validate}
	a, b := agent("a"), agent("b")
	betaByB := strings.Replace(changesettest.Tool("beta"), "The beta tool.", "The beta tool, revised.", 1)
	delta := changesettest.Tool("delta") // added by both, the same
	ida := edit(t, f.ctx, m, a, "notes/plan.txt", "one\ntwo by a\nthree\n", "tools/gamma.yaml", changesettest.Tool("gamma"), "tools/delta.yaml", delta)
	idb := edit(t, f.ctx, m, b, "notes/plan.txt", "one\ntwo by b\nthree\n", "tools/beta.yaml", betaByB, "tools/delta.yaml", delta)
	if rb, err := m.Commit(f.ctx, b, idb, ""); err != nil || rb.Status != changeset.StatusOK {
		t.Fatalf("b: %+v %v", rb, err)
	}
	ra, err := m.Commit(f.ctx, a, ida, "")
	if err != nil || ra.Status != changeset.StatusConflict || ra.Error == nil || strings.Join(ra.Error.ConflictingFiles, ",") != "notes/plan.txt" {
		t.Fatalf("a: %+v %v, want a conflict on notes/plan.txt", ra, err)
	}
	read := func(path string) string {
		t.Helper()
		data, err := m.ReadFile(f.ctx, a, ida, path)
		if err != nil {
			t.Fatalf("read %s: %v", path, err)
		}
		return string(data)
	}
	wantMarked := "one\n<<<<<<< changeset\ntwo by a\n=======\ntwo by b\n>>>>>>> active " + changeset.Ref(head(t, f.ctx, f.repo)) + "\nthree\n"
	if got := read("notes/plan.txt"); got != wantMarked {
		t.Errorf("notes/plan.txt after the conflict = %q, want %q", got, wantMarked)
	}
	if got := read("tools/beta.yaml"); got != betaByB {
		t.Errorf("tools/beta.yaml, which a did not edit, = %q, want the head's %q", got, betaByB)
	}
	if got := read("tools/gamma.yaml"); got != changesettest.Tool("gamma") {
		t.Errorf("tools/gamma.yaml, a's clean edit, = %q", got)
	}
	// Now on the head, the changeset changes only what the head lacks:
	// not delta, which the head has the same, nor beta, which it left.
	list, err := m.ListFiles(f.ctx, a, ida, "")
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, fi := range list {
		if fi.Changed {
			changed = append(changed, fi.Path)
		}
	}
	if got := strings.Join(changed, ","); got != "notes/plan.txt,tools/gamma.yaml" {
		t.Errorf("after the conflict the changeset changes %s, want notes/plan.txt,tools/gamma.yaml", got)
	}
	if err := m.WriteFile(f.ctx, a, ida, "notes/plan.txt", []byte("one\ntwo by both\nthree\n")); err != nil {
		t.Fatal(err)
	}
	ra, err = m.Commit(f.ctx, a, ida, "")
	if err != nil || ra.Status != changeset.StatusOK {
		t.Fatalf("a resolved: %+v %v", ra, err)
	}
	got, err := changeset.BundleFiles(f.repo, head(t, f.ctx, f.repo))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, fl := range got {
		byName[fl.Name] = string(fl.Data)
	}
	if byName["tools/beta.yaml"] != betaByB || byName["tools/gamma.yaml"] != changesettest.Tool("gamma") {
		t.Fatalf("the head after a's resolved commit lost a change: beta %q, gamma %q", byName["tools/beta.yaml"], byName["tools/gamma.yaml"])
	}
}

// TestConflictDeletedOnOneSide: a file the changeset deleted and the head
// changed conflicts; the changeset then holds the head's whole version,
// marked, with an empty part of its own.
func TestConflictDeletedOnOneSide(t *testing.T) {
	f := newCommitFixture(t)
	m := &changeset.Manager{Repo: f.repo, Records: f.recs, Validate: changesettest.Validate}
	a, b := agent("a"), agent("b")
	oa, err := m.Open(f.ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteFile(f.ctx, a, oa.ChangesetID, "README.md"); err != nil {
		t.Fatal(err)
	}
	idb := edit(t, f.ctx, m, b, "README.md", "# b's title\n")
	if rb, err := m.Commit(f.ctx, b, idb, ""); err != nil || rb.Status != changeset.StatusOK {
		t.Fatalf("b: %+v %v", rb, err)
	}
	ra, err := m.Commit(f.ctx, a, oa.ChangesetID, "")
	if err != nil || ra.Status != changeset.StatusConflict || ra.Error == nil || strings.Join(ra.Error.ConflictingFiles, ",") != "README.md" {
		t.Fatalf("a: %+v %v, want a conflict on README.md", ra, err)
	}
	got, err := m.ReadFile(f.ctx, a, oa.ChangesetID, "README.md")
	want := "<<<<<<< changeset\n=======\n# b's title\n>>>>>>> active " + changeset.Ref(head(t, f.ctx, f.repo)) + "\n"
	if err != nil || string(got) != want {
		t.Fatalf("README.md after the conflict = %q %v, want %q", got, err, want)
	}
}

// TestCommitRecordWrittenFirstByAnotherCommit: when the record's write
// after the swap loses to another commit of the same changeset that
// recorded its answer first, that answer stands: the commit returns it
// and leaves the record as it is.
func TestCommitRecordWrittenFirstByAnotherCommit(t *testing.T) {
	f := newCommitFixture(t)
	other := &changeset.Result{Status: changeset.StatusOK, NewRef: "git:recorded-by-the-other-commit"}
	puts := &putHook{Records: f.recs}
	puts.before = func(ctx context.Context, cs changeset.Changeset) error {
		cur, err := f.recs.Get(ctx, cs.ID)
		if err != nil {
			return err
		}
		other.ChangesetID, other.BaseRef = cur.ID, changeset.Ref(plumbing.NewHash(cur.Base))
		cur.Status, cur.Result = changeset.StatusCommitted, other
		return f.recs.Put(ctx, cur, cur.Version)
	}
	m := &changeset.Manager{Repo: &swapHook{Repo: f.repo, after: func() { puts.armed = true }}, Records: puts,
		Validate: changesettest.Validate}
	c := agent("a")
	id := edit(t, f.ctx, m, c, "tools/gamma.yaml", changesettest.Tool("gamma"))
	res, err := m.Commit(f.ctx, c, id, "")
	if err != nil || !reflect.DeepEqual(res, *other) {
		t.Fatalf("commit = %+v %v, want the answer recorded first %+v", res, err, *other)
	}
	rec, err := f.recs.Get(f.ctx, id)
	if err != nil || rec.Result == nil || !reflect.DeepEqual(*rec.Result, *other) {
		t.Fatalf("the record = %+v %v, want the answer recorded first kept", rec, err)
	}
}
