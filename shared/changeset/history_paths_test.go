package changeset_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

// TestShowTheFirstRevision: the first revision has no parent; Show
// answers every file of it as added.
func TestShowTheFirstRevision(t *testing.T) {
	f := newCommitFixture(t)
	e, err := changeset.Show(f.ctx, f.repo, changeset.Ref(f.seed))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range changesettest.Seed() {
		want = append(want, s.Path)
	}
	slices.Sort(want)
	if e.Parent != "" || e.Summary == nil || !slices.Equal(e.Summary.FilesAdded, want) || len(e.Summary.FilesChanged)+len(e.Summary.FilesDeleted) != 0 {
		t.Fatalf("Show(the first revision) = %+v, want no parent and %v added", e, want)
	}
}

// TestResolveActiveBack: active~0 is active itself, active~1 its parent.
func TestResolveActiveBack(t *testing.T) {
	f := newCommitFixture(t)
	second, err := changeset.CommitTree(f.ctx, f.repo, append(changesettest.Seed(), changeset.ImportFile{Path: "notes/n.txt", Data: []byte("n\n")}), "second\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for ref, want := range map[string]string{"active": changeset.Ref(second), "active~0": changeset.Ref(second), "active~1": changeset.Ref(f.seed)} {
		if got, err := changeset.ResolveRef(f.ctx, f.repo, ref); err != nil || got != want {
			t.Errorf("ResolveRef(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	if _, err := changeset.ResolveRef(f.ctx, f.repo, "active~2"); err == nil {
		t.Error("ResolveRef(active~2) past the first revision: no error")
	}
}

// TestOpenRecommendsAtMostFifty: Open's hint lists the first 50 bundle
// files, in path order, however many the revision has.
func TestOpenRecommendsAtMostFifty(t *testing.T) {
	repo, recs := memBackends(t)
	ctx := context.Background()
	var files []changeset.ImportFile
	var all []string
	for i := range 51 {
		p := fmt.Sprintf("tools/t%02d.yaml", i)
		files = append(files, changeset.ImportFile{Path: p, Data: []byte(changesettest.Tool(fmt.Sprintf("t%02d", i)))})
		all = append(all, p)
	}
	if _, err := changeset.CommitTree(ctx, repo, files, "many\n", time.Now()); err != nil {
		t.Fatal(err)
	}
	m := &changeset.Manager{Repo: repo, Records: recs, Validate: changesettest.Validate}
	o, err := m.Open(ctx, agent("a"))
	if err != nil {
		t.Fatal(err)
	}
	if got := o.Hint.RecommendedFiles; !slices.Equal(got, all[:50]) {
		t.Fatalf("recommended %d files %v, want the first 50 of 51", len(got), got)
	}
}

// TestBundlesKeepFour: Bundles keeps the four most recently used
// revisions: a fifth pushes out the least recently used one, which then
// loads again, while the others answer from memory.
func TestBundlesKeepFour(t *testing.T) {
	f := newCommitFixture(t)
	refs := []string{changeset.Ref(f.seed)}
	for i := range 4 {
		h, err := changeset.CommitTree(f.ctx, f.repo, append(changesettest.Seed(),
			changeset.ImportFile{Path: "notes/n.txt", Data: []byte(fmt.Sprint(i))}), "note\n", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, changeset.Ref(h))
	}
	loads := 0
	bs := changeset.NewBundles(f.repo, func([]bundle.File) (*bundle.Bundle, error) {
		loads++
		return &bundle.Bundle{}, nil
	})
	at := func(ref string) *bundle.Bundle {
		t.Helper()
		b, err := bs.At(f.ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := make([]*bundle.Bundle, 4)
	for i := range 4 {
		first[i] = at(refs[i])
	}
	for i := range 4 { // all four kept, now refs[0] is the most recent
		if at(refs[i]) != first[i] {
			t.Fatalf("revision %d of 4 was loaded again", i)
		}
	}
	at(refs[4]) // pushes out refs[0], the least recently used
	for i := 1; i < 4; i++ {
		if at(refs[i]) != first[i] {
			t.Fatalf("revision %d was loaded again after a fifth", i)
		}
	}
	if at(refs[0]) == first[0] || loads != 6 {
		t.Fatalf("the least recently used revision was kept (%d loads of 5 revisions)", loads)
	}
}

// TestBetweenNamesEveryChangeset: Between lists every changeset that
// landed from one revision to another, newest first; none between a
// revision and itself.
func TestBetweenNamesEveryChangeset(t *testing.T) {
	f := newCommitFixture(t)
	m := &changeset.Manager{Repo: f.repo, Records: f.recs, Validate: changesettest.Validate}
	var ids []string
	for _, tool := range []string{"gamma", "delta"} {
		c := agent(tool)
		id := edit(t, f.ctx, m, c, "tools/"+tool+".yaml", changesettest.Tool(tool))
		if r, err := m.Commit(f.ctx, c, id, ""); err != nil || r.Status != changeset.StatusOK {
			t.Fatalf("%s: %+v %v", tool, r, err)
		}
		ids = append([]string{id}, ids...)
	}
	top := changeset.Ref(head(t, f.ctx, f.repo))
	bs := changeset.NewBundles(f.repo, nil)
	ch, err := bs.Between(f.ctx, changeset.Ref(f.seed), top)
	if err != nil || !slices.Equal(ch.Changesets, ids) || ch.ChangesetID != ids[0] ||
		strings.Join(ch.Summary.FilesAdded, ",") != "tools/delta.yaml,tools/gamma.yaml" {
		t.Fatalf("Between(seed, top) = %+v %v, want changesets %v", ch, err, ids)
	}
	ch, err = bs.Between(f.ctx, top, top)
	if err != nil || len(ch.Changesets) != 0 || ch.ChangesetID != "" || len(ch.Summary.FilesAdded)+len(ch.Summary.FilesChanged)+len(ch.Summary.FilesDeleted) != 0 {
		t.Fatalf("Between(top, top) = %+v %v, want nothing", ch, err)
	}
}

// staleListing lists ids as expired whatever their records say: an edit
// came in after the listing.
type staleListing struct {
	changeset.Records
	ids []string
}

func (s staleListing) Expired(context.Context, time.Time, int) ([]string, error) { return s.ids, nil }

// TestSweepRereadsEachRecord: Sweep deletes a listed changeset only if
// its record, read again, is still expired.
func TestSweepRereadsEachRecord(t *testing.T) {
	f := newCommitFixture(t)
	now := time.Now()
	m := &changeset.Manager{Repo: f.repo, Records: f.recs, Validate: changesettest.Validate, TTL: time.Hour,
		Now: func() time.Time { return now }}
	c := agent("a")
	expired := edit(t, f.ctx, m, c)
	now = now.Add(50 * time.Minute)
	extended := edit(t, f.ctx, m, c, "notes/n.txt", "n\n")
	now = now.Add(20 * time.Minute)
	m.Records = staleListing{Records: f.recs, ids: []string{expired, extended, "cs_gone"}}
	n, err := m.Sweep(f.ctx, 10)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if _, err := f.recs.Get(f.ctx, expired); err == nil {
		t.Error("the expired changeset is still there")
	}
	if _, err := f.recs.Get(f.ctx, extended); err != nil {
		t.Errorf("the changeset an edit extended was swept: %v", err)
	}
}

// TestReadBlobLimit: a blob of exactly limit bytes is read whole; one
// byte over the limit is an error, nothing read.
func TestReadBlobLimit(t *testing.T) {
	f := newCommitFixture(t)
	files, err := changeset.CommitFiles(f.repo.Objects(), f.seed)
	if err != nil {
		t.Fatal(err)
	}
	const path = "README.md"
	var want string
	for _, s := range changesettest.Seed() {
		if s.Path == path {
			want = string(s.Data)
		}
	}
	size := int64(len(want))
	if got, err := changeset.ReadBlob(f.repo.Objects(), files[path], size); err != nil || string(got) != want {
		t.Fatalf("ReadBlob(%s, limit %d, its size) = %q, %v; want it whole", path, size, got, err)
	}
	if got, err := changeset.ReadBlob(f.repo.Objects(), files[path], size-1); err == nil {
		t.Fatalf("ReadBlob(%s, limit %d, a byte under its size) = %q, want an error", path, size-1, got)
	}
}

// TestTreeEntriesInGitOrder: a tree lists its entries as git sorts them,
// a directory as if its name ended in "/": the file "a.b" ('.' is 0x2e)
// before the directory "a" ("a/", '/' is 0x2f), which before "a0" ('0'
// is 0x30); otherwise git fsck calls the tree unsorted and its hash is
// not git's.
func TestTreeEntriesInGitOrder(t *testing.T) {
	repo, _ := memBackends(t)
	ctx := context.Background()
	h, err := changeset.CommitTree(ctx, repo, []changeset.ImportFile{
		{Path: "a0", Data: []byte("3\n")}, {Path: "a/x", Data: []byte("2\n")}, {Path: "a.b", Data: []byte("1\n")},
	}, "files\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cm, err := object.GetCommit(repo.Objects(), h)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := object.GetTree(repo.Objects(), cm.TreeHash)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range tr.Entries {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, " "); got != "a.b a a0" {
		t.Fatalf("tree entries %q, want git's order \"a.b a a0\"", got)
	}
}
