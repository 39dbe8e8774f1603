//go:build integration

package gitstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
)

// The integration tests run against the local AWS emulator (MiniStack by
// default) named by AWS_ENDPOINT_URL, or skip (see emulatortest). Each
// repository gets a bucket and a table of its own, with random names,
// deleted when its test ends.

// emulator is a fresh bucket and table on the emulator.
type emulator struct {
	s3     *s3.Client
	db     *dynamodb.Client
	bucket string
	table  string
}

func newEmulator(t testing.TB) *emulator {
	t.Helper()
	cfg := emulatortest.Config(t)
	e := &emulator{s3: s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }), db: dynamodb.NewFromConfig(cfg)}
	e.table = emulatortest.DynamoTable(t, e.db, "agentauth-gitstore-test-", dynamostore.TableSchema, dynamostore.TimeToLiveSpec)
	e.bucket = strings.ToLower(emulatortest.Name("agentauth-gitstore-"))
	ctx := context.Background()
	if _, err := e.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(e.bucket)}); err != nil {
		t.Fatalf("create bucket %s: %v", e.bucket, err)
	}
	t.Cleanup(func() { e.dropBucket(t) })
	return e
}

// dropBucket empties and deletes the bucket.
func (e *emulator) dropBucket(t testing.TB) {
	ctx := context.Background()
	var token *string
	for {
		out, err := e.s3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(e.bucket), ContinuationToken: token})
		if err != nil {
			t.Errorf("list bucket %s: %v", e.bucket, err)
			return
		}
		if len(out.Contents) > 0 {
			ids := make([]s3types.ObjectIdentifier, 0, len(out.Contents))
			for _, o := range out.Contents {
				ids = append(ids, s3types.ObjectIdentifier{Key: o.Key})
			}
			if _, err := e.s3.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(e.bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
				t.Errorf("empty bucket %s: %v", e.bucket, err)
				return
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		token = out.NextContinuationToken
	}
	if _, err := e.s3.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(e.bucket)}); err != nil {
		t.Errorf("delete bucket %s: %v", e.bucket, err)
	}
}

// repo is a Repo on the emulator's bucket and table, with a cache of its
// own (another process).
func (e *emulator) repo(t testing.TB) *Repo {
	t.Helper()
	objs, err := NewObjects(e.s3, e.bucket, "bundles/main/")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRepo(objs, e.db, e.table, "main")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *emulator) records(t testing.TB) *Records {
	t.Helper()
	recs, err := NewRecords(e.db, e.table)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func onEmulator(t *testing.T) (changeset.Repo, changeset.Records) {
	t.Helper()
	e := newEmulator(t)
	return e.repo(t), e.records(t)
}

func TestConformanceOnEmulator(t *testing.T) {
	start := time.Now()
	changesettest.Run(t, onEmulator)
	t.Logf("the conformance suite took %s on the emulator", time.Since(start).Round(time.Millisecond))
}

// TestTwoWritersOnEmulator: two processes race on the head item.
func TestTwoWritersOnEmulator(t *testing.T) {
	e := newEmulator(t)
	twoWriters(t, e.repo(t), e.repo(t), e.records(t), 10)
}

// TestEmulatorAnswers: what this package reads from the service's
// answers is what the emulator sends — 412 for a taken key, NoSuchKey, the
// old item with a failed condition, the sweep index.
func TestEmulatorAnswers(t *testing.T) {
	e := newEmulator(t)
	ctx := context.Background()
	a, b := e.repo(t), e.repo(t)
	if _, err := a.Head(ctx); err != changeset.ErrNoRevision {
		t.Fatalf("head of an empty repository: %v", err)
	}
	h, err := a.objs.SetEncodedObject(blob("one\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.objs.SetEncodedObject(blob("one\n")); err != nil || got != h { // 412: taken
		t.Fatalf("a second process writes the same object: %v", err)
	}
	if _, err := b.objs.EncodedObject(plumbing.BlobObject, plumbing.ComputeHash(plumbing.BlobObject, []byte("none"))); err != plumbing.ErrObjectNotFound {
		t.Fatalf("a missing object: %v", err)
	}
	if _, err := b.objs.EncodedObject(plumbing.CommitObject, h); err != plumbing.ErrObjectNotFound {
		t.Fatalf("a blob as a commit: %v", err)
	}
	c1, c2 := commitHash("1"), commitHash("2")
	if err := a.SwapHead(ctx, plumbing.ZeroHash, c1); err != nil {
		t.Fatal(err)
	}
	if err := b.SwapHead(ctx, plumbing.ZeroHash, c2); err != changeset.ErrHeadMoved {
		t.Fatalf("a second first swap: %v", err)
	}
	if err := b.SwapHead(ctx, c2, c1); err != changeset.ErrHeadMoved {
		t.Fatalf("a swap from a stale commit: %v", err)
	}
	if err := b.SwapHead(ctx, c1, c2); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Head(ctx); err != nil || got != c2 {
		t.Fatalf("head %s %v", got, err)
	}

	recs := e.records(t)
	now := time.Now()
	if err := recs.Create(ctx, record("cs_one", now.Add(-time.Minute))); err != nil {
		t.Fatal(err)
	}
	if err := recs.Create(ctx, record("cs_one", now)); err != changeset.ErrExists {
		t.Fatalf("create twice: %v", err)
	}
	if err := recs.Create(ctx, record("cs_two", now.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if err := recs.Put(ctx, record("cs_one", now), 2); err != changeset.ErrVersion {
		t.Fatalf("a stale put: %v", err)
	}
	if err := recs.Put(ctx, record("cs_none", now), 1); err != changeset.ErrNotFound {
		t.Fatalf("a put of a missing record: %v", err)
	}
	ids, err := recs.Expired(ctx, now, 10)
	if err != nil || len(ids) != 1 || ids[0] != "cs_one" {
		t.Fatalf("expired %v %v", ids, err)
	}
	other, err := NewRecords(e.db, e.table+"-none")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Get(ctx, "cs_one"); !errors.Is(err, dynamostore.ErrTableNotFound) {
		t.Fatalf("a missing table: %v", err)
	}
}
