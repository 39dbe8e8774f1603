package awscount

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// fakeAWS answers KMS and Secrets Manager (JSON protocol, keyed by
// X-Amz-Target) and STS (query protocol) with canned bodies, and counts
// HTTP attempts. (The tests use only SDK modules already in go.sum.)
type fakeAWS struct {
	attempts atomic.Int64
	// fail500 makes every kms.ListKeys attempt a 500, so the retryer tries
	// again and attempts exceed calls.
	fail500 bool
}

func (f *fakeAWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.attempts.Add(1)
	body, _ := io.ReadAll(r.Body)
	target := r.Header.Get("X-Amz-Target")
	w.Header().Set("X-Amzn-RequestId", "req-1")
	if strings.Contains(string(body), "Action=GetCallerIdentity") {
		w.Header().Set("Content-Type", "text/xml")
		_, _ = io.WriteString(w, `<GetCallerIdentityResponse><GetCallerIdentityResult><Account>000000000000</Account>`+
			`<Arn>arn:aws:iam::000000000000:root</Arn><UserId>test</UserId></GetCallerIdentityResult></GetCallerIdentityResponse>`)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	switch {
	case strings.HasSuffix(target, ".GetSecretValue"):
		_ = json.NewEncoder(w).Encode(map[string]string{"Name": "s", "SecretString": "v"})
	case strings.HasSuffix(target, ".ListKeys") && f.fail500:
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"__type":"KMSInternalException","message":"try again"}`)
	case strings.HasSuffix(target, ".ListKeys"):
		_, _ = io.WriteString(w, `{"Keys":[],"Truncated":false}`)
	case strings.HasSuffix(target, ".Decrypt"):
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"InvalidCiphertextException","message":"no"}`)
	default:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"UnknownOperationException","message":"`+target+`"}`)
	}
}

func testConfig(url string) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(url),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 3
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		},
	}
}

func TestCountsPerServiceAndOperation(t *testing.T) {
	fake := &fakeAWS{}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	ctx := context.Background()

	var c Counter // the zero value is usable
	cfg := testConfig(srv.URL)
	c.Register(&cfg)
	sm := secretsmanager.NewFromConfig(cfg)
	km := kms.NewFromConfig(cfg)
	st := sts.NewFromConfig(cfg)

	for range 2 {
		if _, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String("s")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); err != nil {
		t.Fatal(err)
	}
	if _, err := km.ListKeys(ctx, &kms.ListKeysInput{}); err != nil {
		t.Fatal(err)
	}
	// A failed call is still a call.
	if _, err := km.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: []byte("x")}); err == nil {
		t.Fatal("Decrypt: want an error from the fake")
	}

	want := map[string]int{"secretsmanager.GetSecretValue": 2, "sts.GetCallerIdentity": 1, "kms.ListKeys": 1, "kms.Decrypt": 1}
	assertCounts(t, c.Snapshot(), want)
	if c.Total() != 5 || c.Get("secretsmanager.GetSecretValue") != 2 || c.Get("kms.Encrypt") != 0 {
		t.Fatalf("Total %d, Get %d", c.Total(), c.Get("secretsmanager.GetSecretValue"))
	}
	if s := c.String(); s != "kms.Decrypt=1 kms.ListKeys=1 secretsmanager.GetSecretValue=2 sts.GetCallerIdentity=1" {
		t.Fatalf("String: %q", s)
	}

	snap := c.Snapshot()
	snap["kms.ListKeys"] = 99 // a snapshot is a copy
	c.Reset()
	if got := c.Snapshot(); len(got) != 0 || c.String() != "none" {
		t.Fatalf("after Reset: %v", got)
	}
	if _, err := km.ListKeys(ctx, &kms.ListKeysInput{}); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, c.Snapshot(), map[string]int{"kms.ListKeys": 1})
}

// Retries are attempts of one call: bench-aws counts calls.
func TestRetriesCountOnce(t *testing.T) {
	fake := &fakeAWS{fail500: true}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := New()
	cfg := testConfig(srv.URL)
	c.Register(&cfg)
	if _, err := kms.NewFromConfig(cfg).ListKeys(context.Background(), &kms.ListKeysInput{}); err == nil {
		t.Fatal("want an error after retries")
	}
	if got := fake.attempts.Load(); got != 3 {
		t.Fatalf("server saw %d attempts, want 3", got)
	}
	assertCounts(t, c.Snapshot(), map[string]int{"kms.ListKeys": 1})
}

// Added through config.LoadDefaultConfig and again on the client: counted
// once. A second counter on the same client counts too.
func TestLoadDefaultConfigAndClientOptions(t *testing.T) {
	srv := httptest.NewServer(&fakeAWS{})
	defer srv.Close()
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	a, b := New(), New()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithBaseEndpoint(srv.URL),
		config.WithAPIOptions(a.APIOptions()),
	)
	if err != nil {
		t.Fatal(err)
	}
	km := kms.NewFromConfig(cfg, func(o *kms.Options) {
		o.APIOptions = append(o.APIOptions, a.APIOption, b.APIOption)
	})
	if _, err := km.ListKeys(context.Background(), &kms.ListKeysInput{}); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, a.Snapshot(), map[string]int{"kms.ListKeys": 1})
	assertCounts(t, b.Snapshot(), map[string]int{"kms.ListKeys": 1})
}

func TestConcurrentCalls(t *testing.T) {
	srv := httptest.NewServer(&fakeAWS{})
	defer srv.Close()
	c := New()
	cfg := testConfig(srv.URL)
	c.Register(&cfg)
	km := kms.NewFromConfig(cfg)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				if _, err := km.ListKeys(context.Background(), &kms.ListKeysInput{}); err != nil {
					t.Error(err)
				}
				_ = c.Snapshot()
			}
		})
	}
	wg.Wait()
	assertCounts(t, c.Snapshot(), map[string]int{"kms.ListKeys": 160})
}

func TestKey(t *testing.T) {
	for _, tc := range []struct{ svc, op, want string }{
		{"DynamoDB", "GetItem", "dynamodb.GetItem"},
		{"KMS", "Decrypt", "kms.Decrypt"},
		{"Secrets Manager", "GetSecretValue", "secretsmanager.GetSecretValue"},
		{"", "", "unknown.unknown"},
	} {
		if got := Key(tc.svc, tc.op); got != tc.want {
			t.Errorf("Key(%q, %q) = %q, want %q", tc.svc, tc.op, got, tc.want)
		}
	}
}

func assertCounts(t *testing.T, got, want map[string]int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("counts %v, want %v", got, want)
		}
	}
}
