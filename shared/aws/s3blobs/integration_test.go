//go:build integration

package s3blobs

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
)

func TestAgainstEmulator(t *testing.T) {
	ctx := context.Background()
	cfg := emulatortest.Config(t)
	api := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	bucket := strings.ToLower(emulatortest.Name("agentauth-blobs"))
	if _, err := api.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	s, err := New(api, bucket)
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(strings.Repeat(`{"output":"x"}`, 5000))
	key := Key("turns/h/e/", doc)
	if err := s.Put(ctx, key, doc); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, key, doc); err != nil {
		t.Fatalf("a repeated put: %v", err)
	}
	got, err := s.Get(ctx, key)
	if err != nil || string(got) != string(doc) {
		t.Fatalf("get: %v (%d bytes)", err, len(got))
	}
	if err := s.DeletePrefix(ctx, "turns/h/e/"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	_, _ = api.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
}
