package changeset_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

// TestExportCopiesOnlyWhatIsNew: the first export copies the whole
// history into an empty repository and moves its ref; the next copies
// only the objects of the commits since; one more copies nothing.
func TestExportCopiesOnlyWhatIsNew(t *testing.T) {
	ctx := context.Background()
	from, _ := memBackends(t)
	to, _ := memBackends(t)
	seed, err := changeset.CommitTree(ctx, from, changesettest.Seed(), "seed\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	// The seed: 4 blobs (tools/alpha.yaml, tools/beta.yaml, groups.yaml,
	// README.md), 2 trees (the root, tools) and the commit.
	head, n, err := changeset.Export(ctx, from, to)
	if err != nil || head != seed || n != 7 {
		t.Fatalf("the first export = %s, %d objects, %v; want %s and 7", head, n, err, seed)
	}
	sameFiles(t, from, to, seed)

	// A changed README.md: its blob, a new root tree (tools is
	// unchanged) and the commit.
	files := changesettest.Seed()
	for i := range files {
		if files[i].Path == "README.md" {
			files[i].Data = []byte("# changed\n")
		}
	}
	second, err := changeset.CommitTree(ctx, from, files, "second\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	head, n, err = changeset.Export(ctx, from, to)
	if err != nil || head != second || n != 3 {
		t.Fatalf("the second export = %s, %d objects, %v; want %s and 3", head, n, err, second)
	}
	sameFiles(t, from, to, second)
	if log, err := changeset.Log(ctx, to, 10); err != nil || len(log) != 2 || log[1].Ref != changeset.Ref(seed) {
		t.Fatalf("the destination's history: %+v %v", log, err)
	}

	head, n, err = changeset.Export(ctx, from, to)
	if err != nil || head != second || n != 0 {
		t.Fatalf("an export with nothing new = %s, %d objects, %v; want %s and 0", head, n, err, second)
	}
}

// TestExportOfAnEmptyRepository: nothing to export is ErrNoRevision.
func TestExportOfAnEmptyRepository(t *testing.T) {
	from, _ := memBackends(t)
	to, _ := memBackends(t)
	if _, _, err := changeset.Export(context.Background(), from, to); !errors.Is(err, changeset.ErrNoRevision) {
		t.Fatalf("Export(an empty repository) = %v, want ErrNoRevision", err)
	}
}

// sameFiles checks that to's head is h and holds h's files as from does.
func sameFiles(t *testing.T, from, to changeset.Repo, h plumbing.Hash) {
	t.Helper()
	if got, err := to.Head(context.Background()); err != nil || got != h {
		t.Fatalf("the destination's head = %s, %v; want %s", got, err, h)
	}
	want, err := changeset.BundleFiles(from, h)
	if err != nil {
		t.Fatal(err)
	}
	got, err := changeset.BundleFiles(to, h)
	if err != nil {
		t.Fatalf("the destination cannot read %s: %v", h, err)
	}
	if len(got) != len(want) {
		t.Fatalf("the destination has %d files of %s, want %d", len(got), h, len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || string(got[i].Data) != string(want[i].Data) {
			t.Fatalf("the destination's %s = %q, want %s = %q", got[i].Name, got[i].Data, want[i].Name, want[i].Data)
		}
	}
	readme, err := changeset.CommitFiles(to.Objects(), h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := changeset.ReadBlob(to.Objects(), readme["README.md"], 1<<20); err != nil {
		t.Fatalf("the destination lacks README.md of %s: %v", h, err)
	}
}
