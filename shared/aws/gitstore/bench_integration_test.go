//go:build integration

package gitstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentauth/agentauth/shared/aws/awscount"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
)

// BenchmarkCommit100FilesOnEmulator is shared/local/bundlerepo's
// BenchmarkCommit100Files on S3 and DynamoDB (the emulator): one
// changeset — open, write one file, commit — on a bundle of 100 tool
// files, the merge-free path (the head has not moved). Per commit: the
// changeset record (create, edit, result), the blob, the trees and the
// commit written to S3 only if absent, the loader's check of all 100
// files, and the head moved by a conditional write. The repository is
// warm, as a function's is after its first commit: the objects it read
// are in its cache, so the 100 files are not read from S3 again. It
// reports the S3 and DynamoDB calls a commit makes.
func BenchmarkCommit100FilesOnEmulator(b *testing.B) {
	e := newEmulator(b)
	// Clients of their own, counting their calls (awscount).
	calls := awscount.New()
	cfg := emulatortest.Config(b)
	calls.Register(&cfg)
	objs, err := NewObjects(s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }), e.bucket, "bundles/main/")
	if err != nil {
		b.Fatal(err)
	}
	db := dynamodb.NewFromConfig(cfg)
	repo, err := NewRepo(objs, db, e.table, "main")
	if err != nil {
		b.Fatal(err)
	}
	recs, err := NewRecords(db, e.table)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var files []changeset.ImportFile
	for i := range 100 {
		files = append(files, changeset.ImportFile{Path: fmt.Sprintf("tools/t%03d.yaml", i), Data: []byte(changesettest.Tool(fmt.Sprintf("t%03d", i)))})
	}
	m := &changeset.Manager{Repo: repo, Records: recs, Validate: changesettest.Validate}
	if _, err := m.Import(ctx, files, "bench"); err != nil {
		b.Fatal(err)
	}
	c := changeset.Caller{Owner: changeset.Owner{Swarm: "s", Instance: "i", Agent: "a"}, Policy: changesettest.Everyone}
	calls.Reset()
	n := 0
	for i := 0; b.Loop(); i++ {
		n++
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
	perService := map[string]int{}
	var each []string
	for k, v := range calls.Snapshot() {
		service, _, _ := strings.Cut(k, ".")
		perService[service] += v
		each = append(each, fmt.Sprintf("%s %.1f", k, float64(v)/float64(n)))
	}
	slices.Sort(each)
	b.Logf("AWS calls per commit: %s", strings.Join(each, ", "))
	b.ReportMetric(float64(perService["s3"])/float64(n), "s3-calls/op")
	b.ReportMetric(float64(perService["dynamodb"])/float64(n), "dynamodb-calls/op")
}
