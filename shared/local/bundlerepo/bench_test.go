package bundlerepo

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

// BenchmarkCommit100Files: one changeset — open, write one file, commit —
// on a bundle of 100 tool files in a local repository: the merge-free
// path (the head has not moved), the loader's check of all 100 files,
// the objects, the ref's lock file and the working-tree sync.
func BenchmarkCommit100Files(b *testing.B) {
	repo, recs := emptyRepo(b)
	ctx := context.Background()
	var files []changeset.ImportFile
	for i := range 100 {
		files = append(files, changeset.ImportFile{Path: fmt.Sprintf("tools/t%03d.yaml", i), Data: []byte(changesettest.Tool(fmt.Sprintf("t%03d", i)))})
	}
	m := &changeset.Manager{Repo: repo, Records: recs, Validate: changesettest.Validate}
	if _, err := m.Import(ctx, files, "bench"); err != nil {
		b.Fatal(err)
	}
	if _, err := repo.(*Repo).Sync(); err != nil {
		b.Fatal(err)
	}
	c := changeset.Caller{Owner: changeset.Owner{Swarm: "s", Instance: "i", Agent: "a"}, Policy: changesettest.Everyone}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		o, err := m.Open(ctx, c)
		if err != nil {
			b.Fatal(err)
		}
		desc := fmt.Sprintf("edit %d", i)
		if err := m.WriteFile(ctx, c, o.ChangesetID, "tools/t007.yaml", []byte(strings.Replace(changesettest.Tool("t007"), "The t007 tool.", desc, 1))); err != nil {
			b.Fatal(err)
		}
		res, err := m.Commit(ctx, c, o.ChangesetID, desc)
		if err != nil || res.Status != changeset.StatusOK {
			b.Fatalf("%+v %v", res, err)
		}
	}
}
