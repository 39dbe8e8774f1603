//go:build integration

package lambdaentry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/agentauth/agentauth/shared/aws/awscount"
	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/aws/gitstore"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
)

// TestGitBundleOnTheEmulator: functions on the AWS backends with
// AGENTAUTH_BUNDLE_REPO, on the emulator's S3 and DynamoDB. Eight cold
// starts at once on an empty repository all start and land the package
// once, as the first commit; a later cold start on the same package
// writes no object; a revision adding an OAuthApp, landed by
// compare-and-swap of the head item, is served by the token route within
// the bound (1 s here).
func TestGitBundleOnTheEmulator(t *testing.T) {
	ctx := context.Background()
	cfg := emulatortest.Config(t)
	ddb, kmsc, sqsc, sm := dynamodb.NewFromConfig(cfg), kms.NewFromConfig(cfg), sqs.NewFromConfig(cfg), secretsmanager.NewFromConfig(cfg)
	s3c := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	table := emulatortest.DynamoTable(t, ddb, "agentauth-gitbundle-", dynamostore.TableSchema, dynamostore.TimeToLiveSpec)
	name := strings.ToLower(emulatortest.Name("agentauth-gitbundle-"))
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { emptyBucket(t, s3c, name) })
	key, err := kmsc.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("agentauth gitbundle it")})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	secret := name + "/session-keys"
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(secret), SecretString: aws.String("session-key-0123456789abcdefghijklmnopqrstuvwxyz")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(secret), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	bdir := t.TempDir()
	app, err := os.ReadFile("testdata/bundle/app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bdir, "app.yaml"), app, 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		config.Table: table, config.KMSKeyID: *key.KeyMetadata.Arn, config.QueueURL: *q.QueueUrl, config.SessionKeysSecret: secret,
		config.SecretPrefix: name + "/", config.Bundle: bdir, config.PublicURL: "https://auth.example",
		config.BundleRepo: "s3://" + name + "/bundle/", config.UploadsCheckSeconds: "1", "TEAM_CLIENT_SECRET": "s3cret",
	} {
		t.Setenv(k, v)
	}
	objs, err := gitstore.NewObjects(s3c, name, "bundle/")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := gitstore.NewRepo(objs, ddb, table, "main")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)

	// Eight cold starts at once on the empty repository.
	fns := make([]*live, 8)
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			routes := RuntimeRoutes
			if i%2 == 1 {
				routes = CallbackRoutes
			}
			fns[i], errs[i] = start(ctx, os.Getenv, routes, fmt.Sprint("fn-", i), log, Options{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("cold start %d: %v", i, err)
		}
	}
	history, err := changeset.Log(ctx, repo, 10)
	if err != nil || len(history) != 1 || history[0].Parent != "" || history[0].Trailers.ImportTree == "" {
		t.Fatalf("after 8 cold starts: %+v, %v", history, err)
	}
	for i, f := range fns {
		if got := f.current(ctx).app.Bundle.Revision; got != history[0].Ref {
			t.Fatalf("function %d runs %s, want %s", i, got, history[0].Ref)
		}
	}

	// A cold start on the package already imported writes nothing.
	count := awscount.New()
	began := time.Now()
	gettoken, err := start(ctx, os.Getenv, RuntimeRoutes, "gettoken", log, Options{Counter: count})
	if err != nil {
		t.Fatal(err)
	}
	gitStart := time.Since(began)
	if n := count.Get("s3.PutObject"); n != 0 {
		t.Fatalf("a cold start on an imported package wrote %d objects", n)
	}
	t.Logf("FIGURE calls of a cold start on an imported package: %v", count.Snapshot())
	// The same cold start on the packaged directory, for comparison.
	t.Setenv(config.BundleRepo, "")
	plainCount := awscount.New()
	began = time.Now()
	if _, err := start(ctx, os.Getenv, RuntimeRoutes, "gettoken", log, Options{Counter: plainCount}); err != nil {
		t.Fatal(err)
	}
	t.Logf("FIGURE cold start on the emulator: %s with the git bundle (package imported), %s with the packaged directory (%v)",
		gitStart.Round(time.Microsecond), time.Since(began).Round(time.Microsecond), plainCount.Snapshot())
	t.Setenv(config.BundleRepo, "s3://"+name+"/bundle/")

	// A revision that adds an OAuthApp, served within the bound.
	head, err := repo.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := strings.NewReplacer("name: team", "name: other", "/oauth/callback/team", "/oauth/callback/other").Replace(string(app))
	if _, err := changeset.CommitTree(ctx, repo, []changeset.ImportFile{{Path: "app.yaml", Data: app}, {Path: "other.yaml", Data: []byte(other)}},
		"add OAuthApp/other", time.Now()); err != nil {
		t.Fatal(err)
	}
	committed := time.Now()
	for {
		code, body := tokenFor(t, gettoken, "other")
		if code == 200 && strings.Contains(body, "authorization_required") {
			break
		}
		if time.Since(committed) > 3*time.Second {
			t.Fatalf("not served %s after the commit (bound 1 s): %d %s", time.Since(committed), code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("FIGURE pickup on the emulator: %s after the commit (bound 1 s; head was %s)", time.Since(committed).Round(time.Millisecond), changeset.Ref(head))
}

// emptyBucket deletes the bucket's objects and the bucket.
func emptyBucket(t *testing.T, api *s3.Client, bucket string) {
	ctx := context.Background()
	for {
		out, err := api.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
		if err != nil {
			t.Errorf("list %s: %v", bucket, err)
			return
		}
		if len(out.Contents) == 0 {
			break
		}
		ids := make([]s3types.ObjectIdentifier, 0, len(out.Contents))
		for _, o := range out.Contents {
			ids = append(ids, s3types.ObjectIdentifier{Key: o.Key})
		}
		if _, err := api.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
			t.Errorf("empty %s: %v", bucket, err)
			return
		}
	}
	if _, err := api.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Errorf("delete %s: %v", bucket, err)
	}
}
