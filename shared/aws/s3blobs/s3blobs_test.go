package s3blobs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/agentauth/agentauth/shared/domain"
)

// fakeS3 is a hand-written bucket: objects by key, pages of pageSize.
type fakeS3 struct {
	objs     map[string][]byte
	pageSize int
	puts     []*s3.PutObjectInput
	deletes  int
	lists    int
	fail     error
	// getErr answers GetObject; endless makes every listing page
	// truncated, with a new token.
	getErr  error
	endless bool
}

func (f *fakeS3) PutObject(_ context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	b, _ := io.ReadAll(in.Body)
	f.objs[aws.ToString(in.Key)] = b
	f.puts = append(f.puts, in)
	return &s3.PutObjectOutput{}, nil
}

func (f *fakeS3) GetObject(_ context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	if f.fail != nil {
		return nil, f.fail
	}
	if f.getErr != nil {
		return nil, f.getErr
	}
	b, ok := f.objs[aws.ToString(in.Key)]
	if !ok {
		return nil, &types.NoSuchKey{Message: aws.String("The specified key does not exist.")}
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(b))}, nil
}

func (f *fakeS3) ListObjectsV2(_ context.Context, in *s3.ListObjectsV2Input, _ ...func(*s3.Options)) (*s3.ListObjectsV2Output, error) {
	f.lists++
	if f.endless {
		return &s3.ListObjectsV2Output{IsTruncated: aws.Bool(true), NextContinuationToken: aws.String(fmt.Sprint(f.lists))}, nil
	}
	var keys []string
	for k := range f.objs {
		if strings.HasPrefix(k, aws.ToString(in.Prefix)) && k > aws.ToString(in.ContinuationToken) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := &s3.ListObjectsV2Output{IsTruncated: aws.Bool(false)}
	if len(keys) > f.pageSize {
		keys = keys[:f.pageSize]
		out.IsTruncated, out.NextContinuationToken = aws.Bool(true), aws.String(keys[len(keys)-1])
	}
	for _, k := range keys {
		out.Contents = append(out.Contents, types.Object{Key: aws.String(k)})
	}
	return out, nil
}

func (f *fakeS3) DeleteObjects(_ context.Context, in *s3.DeleteObjectsInput, _ ...func(*s3.Options)) (*s3.DeleteObjectsOutput, error) {
	f.deletes++
	for _, o := range in.Delete.Objects {
		delete(f.objs, aws.ToString(o.Key))
	}
	return &s3.DeleteObjectsOutput{}, nil
}

func TestPutGetDelete(t *testing.T) {
	ctx := context.Background()
	f := &fakeS3{objs: map[string][]byte{}, pageSize: 2}
	s, err := New(f, "bucket")
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"text":"a tool output"}`)
	key := Key("turns/h1/e1/", doc)
	if !strings.HasPrefix(key, "turns/h1/e1/") || len(key) != len("turns/h1/e1/")+64 {
		t.Fatalf("key %s", key)
	}
	if err := s.Put(ctx, key, doc); err != nil {
		t.Fatal(err)
	}
	// S3 checks the body against the SHA-256 sent (base64 of the digest).
	sum := sha256.Sum256(doc)
	if got, want := aws.ToString(f.puts[0].ChecksumSHA256), base64.StdEncoding.EncodeToString(sum[:]); got != want {
		t.Fatalf("checksum %q, want %q", got, want)
	}
	got, err := s.Get(ctx, key)
	if err != nil || string(got) != string(doc) {
		t.Fatalf("get: %v %q", err, got)
	}
	if _, err := s.Get(ctx, "turns/h1/e1/none"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	for i := range 5 {
		_ = s.Put(ctx, fmt.Sprintf("turns/h1/e1/%d", i), doc)
	}
	_ = s.Put(ctx, "turns/h1/e2/x", doc)
	if err := s.DeletePrefix(ctx, "turns/h1/e1/"); err != nil {
		t.Fatal(err)
	}
	if len(f.objs) != 1 || f.objs["turns/h1/e2/x"] == nil || f.deletes != 3 {
		t.Fatalf("after delete: %d objects, %d DeleteObjects calls (6 objects in pages of 2)", len(f.objs), f.deletes)
	}
	if err := s.DeletePrefix(ctx, "turns"); err == nil {
		t.Fatal("a prefix that is not a folder was accepted")
	}
}

func TestErrorsHoldNoBody(t *testing.T) {
	f := &fakeS3{objs: map[string][]byte{}, fail: &smithy.GenericAPIError{Code: "AccessDenied", Message: "secret-looking request content"}}
	s, _ := New(f, "bucket")
	err := s.Put(context.Background(), "turns/k", []byte("payload-text"))
	if err == nil || !strings.Contains(err.Error(), "AccessDenied") || strings.Contains(err.Error(), "secret-looking") || strings.Contains(err.Error(), "payload-text") {
		t.Fatalf("put error %v", err)
	}
	if _, err := s.Get(context.Background(), "turns/k"); err == nil || strings.Contains(err.Error(), "secret-looking") {
		t.Fatalf("get error %v", err)
	}
	if _, err := New(nil, "b"); err == nil {
		t.Fatal("nil client accepted")
	}
}

func TestGetBounds(t *testing.T) {
	ctx := context.Background()
	f := &fakeS3{objs: map[string][]byte{"turns/max": make([]byte, MaxObjectBytes), "turns/over": make([]byte, MaxObjectBytes+1)}}
	s, _ := New(f, "bucket")
	if b, err := s.Get(ctx, "turns/max"); err != nil || len(b) != MaxObjectBytes {
		t.Fatalf("an object of MaxObjectBytes: %v, %d bytes", err, len(b))
	}
	if _, err := s.Get(ctx, "turns/over"); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("an object over MaxObjectBytes: %v, want ErrCorrupt", err)
	}
	// An emulator's not-found without the typed error is still not found.
	f.getErr = &smithy.GenericAPIError{Code: "NoSuchKey", Message: "gone"}
	if _, err := s.Get(ctx, "turns/max"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a generic NoSuchKey: %v, want ErrNotFound", err)
	}
	f.getErr = &smithy.GenericAPIError{Code: "SlowDown", Message: "x"}
	if _, err := s.Get(ctx, "turns/max"); err == nil || errors.Is(err, domain.ErrNotFound) || !strings.Contains(err.Error(), "SlowDown") {
		t.Fatalf("another error: %v", err)
	}
}

func TestDeletePrefixBounds(t *testing.T) {
	ctx := context.Background()
	f := &fakeS3{objs: map[string][]byte{}, pageSize: 2}
	s, _ := New(f, "bucket")
	// An empty folder: one listing, nothing to delete.
	if err := s.DeletePrefix(ctx, "a/"); err != nil || f.lists != 1 || f.deletes != 0 {
		t.Fatalf("empty folder: %v, %d lists, %d deletes", err, f.lists, f.deletes)
	}
	if err := s.DeletePrefix(ctx, "/"); err == nil {
		t.Fatal(`"/" (the whole bucket) was accepted`)
	}
	// A listing that never ends stops after maxDeletePages pages.
	f.endless, f.lists = true, 0
	if err := s.DeletePrefix(ctx, "a/"); err == nil || !strings.Contains(err.Error(), "too many pages") || f.lists != maxDeletePages {
		t.Fatalf("endless listing: %v after %d pages, want %d", err, f.lists, maxDeletePages)
	}
}
