package gitstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

const testTable = "agentauth-test"

// onFakes is an empty repository and its records on a fresh fake bucket
// and table.
func onFakes(t *testing.T) (changeset.Repo, changeset.Records) {
	t.Helper()
	r, recs, _, _ := fakeBackends(t)
	return r, recs
}

func fakeBackends(t *testing.T) (*Repo, *Records, *fakeS3, *fakeDynamo) {
	t.Helper()
	s3api, db := newFakeS3(), newFakeDynamo(testTable)
	objs, err := NewObjects(s3api, "bucket", "bundles/main/")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRepo(objs, db, testTable, "main")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := NewRecords(db, testTable)
	if err != nil {
		t.Fatal(err)
	}
	return r, recs, s3api, db
}

// TestConformance runs the changeset backends' suite on the fakes: the
// semantics of this package's conditions and keys, without an emulator
// (integration_test.go runs it on one).
func TestConformance(t *testing.T) { changesettest.Run(t, onFakes) }

// TestTwoWriters: two processes (two Repos with caches of their own on
// one bucket and table) on the fakes.
func TestTwoWriters(t *testing.T) {
	a, recs, s3api, db := fakeBackends(t)
	objs, err := NewObjects(s3api, "bucket", "bundles/main/")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewRepo(objs, db, testTable, "main")
	if err != nil {
		t.Fatal(err)
	}
	twoWriters(t, a, b, recs, 6)
}

// twoWriters commits n changesets from each of two Managers at once, one
// per repository (each Manager's commits take turns, the two race on the
// head), and checks that every commit landed on one linear history.
func twoWriters(t *testing.T, a, b changeset.Repo, recs changeset.Records, n int) {
	t.Helper()
	ctx := context.Background()
	seed, err := changeset.CommitTree(ctx, a, changesettest.Seed(), "seed\n", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	managers := []*changeset.Manager{
		{Repo: a, Records: recs, Validate: changesettest.Validate},
		{Repo: b, Records: recs, Validate: changesettest.Validate},
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for w, m := range managers {
		for i := range n {
			name := fmt.Sprintf("w%dn%02d", w, i)
			c := changeset.Caller{Owner: changeset.Owner{Swarm: "default", Instance: "thread-" + name, Agent: name}, Policy: changesettest.Everyone}
			o, err := m.Open(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.WriteFile(ctx, c, o.ChangesetID, "tools/"+name+".yaml", []byte(changesettest.Tool(name))); err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := m.Commit(ctx, c, o.ChangesetID, "")
				if err == nil && res.Status != changeset.StatusOK {
					err = fmt.Errorf("status %s: %+v", res.Status, res.Error)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Both repositories see the same head, and the history from it holds
	// 2n commits on the seed.
	ha, err := a.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hb, err := b.Head(ctx); err != nil || hb != ha {
		t.Fatalf("heads %s and %s (%v)", ha, hb, err)
	}
	h, count := ha, 0
	for h != seed {
		cm, err := object.GetCommit(b.Objects(), h)
		if err != nil || len(cm.ParentHashes) != 1 {
			t.Fatalf("history at %s: %v", h, err)
		}
		h, count = cm.ParentHashes[0], count+1
	}
	if count != 2*n {
		t.Fatalf("%d commits on the seed, want %d", count, 2*n)
	}
	files, err := changeset.BundleFiles(a, ha)
	if err != nil {
		t.Fatal(err)
	}
	if err := changesettest.Validate(files); err != nil {
		t.Fatal(err)
	}
	if want := 3 + 2*n; len(files) != want { // alpha, beta, groups and one tool per commit
		t.Fatalf("%d bundle files at the head, want %d", len(files), want)
	}
}
