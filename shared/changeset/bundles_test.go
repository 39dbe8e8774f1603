package changeset_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

// TestBundlesFollowTheHead: Head loads the active revision (its Revision
// is its ref), At keeps what it loaded (the same bundle again) and loads
// any other revision by its ref; Between names the changesets and the
// files from one revision to another; a revision that would not load is
// an error naming it.
func TestBundlesFollowTheHead(t *testing.T) {
	ctx := context.Background()
	repo, recs := memBackends(t)
	first, err := changeset.CommitTree(ctx, repo, changesettest.Seed(), "seed\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	loads := 0
	bs := changeset.NewBundles(repo, func(files []bundle.File) (*bundle.Bundle, error) {
		loads++
		return bundle.Parse(files, bundle.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	})
	b1, err := bs.Head(ctx)
	if err != nil || b1.Revision != changeset.Ref(first) || b1.Tools["seed:alpha"] == nil {
		t.Fatalf("head: %v %v", b1, err)
	}
	if again, _ := bs.At(ctx, changeset.Ref(first)); again != b1 || loads != 1 {
		t.Fatalf("At the loaded revision loaded again (%d loads)", loads)
	}
	m := &changeset.Manager{Repo: repo, Records: recs, Validate: changesettest.Validate}
	c := changeset.Caller{Owner: changeset.Owner{Swarm: "s", Instance: "i", Agent: "a"}, Policy: changesettest.Everyone}
	o, _ := m.Open(ctx, c)
	if err := m.WriteFile(ctx, c, o.ChangesetID, "tools/gamma.yaml", []byte(changesettest.Tool("gamma"))); err != nil {
		t.Fatal(err)
	}
	res, err := m.Commit(ctx, c, o.ChangesetID, "")
	if err != nil || res.Status != changeset.StatusOK {
		t.Fatalf("%+v %v", res, err)
	}
	b2, err := bs.Head(ctx)
	if err != nil || b2.Revision != res.NewRef || b2.Tools["seed:gamma"] == nil || loads != 2 {
		t.Fatalf("head after the commit: %v %v (%d loads)", b2, err, loads)
	}
	if old, _ := bs.At(ctx, changeset.Ref(first)); old != b1 {
		t.Fatal("the older revision was not kept")
	}
	ch, err := bs.Between(ctx, changeset.Ref(first), res.NewRef)
	if err != nil || ch.ChangesetID != o.ChangesetID || len(ch.Changesets) != 1 || strings.Join(ch.Summary.FilesAdded, ",") != "tools/gamma.yaml" ||
		ch.PreviousRef != changeset.Ref(first) || ch.NewRef != res.NewRef {
		t.Fatalf("between: %+v %v", ch, err)
	}
	if _, err := bs.At(ctx, "git:nothex"); err == nil {
		t.Fatal("a malformed ref loaded")
	}
	bad, err := changeset.CommitTree(ctx, repo, append(changesettest.Seed(), changeset.ImportFile{Path: "tools/bad.yaml", Data: []byte("kind: Tool\n")}), "bad\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bs.At(ctx, changeset.Ref(bad)); err == nil || !strings.Contains(err.Error(), changeset.Ref(bad)) {
		t.Fatalf("a revision that does not load: %v", err)
	}
	if !changeset.IsGitRef(res.NewRef) || changeset.IsGitRef("abc") {
		t.Fatal("IsGitRef")
	}
}
