//go:build integration

package lambdaentry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentauth/agentauth/shared/aws/awscount"
	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/aws/sqsqueue"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
)

// tinyProvider issues one token pair per code and remembers the values.
type tinyProvider struct {
	mu     sync.Mutex
	issued []string
}

func (p *tinyProvider) handler(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	at, rt := "at-"+hex.EncodeToString(b), "rt-"+hex.EncodeToString(b)
	p.mu.Lock()
	p.issued = append(p.issued, at, rt)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": 3600, "scope": "read"})
}

func v2Event(method, rawURL, body string) events.APIGatewayV2HTTPRequest {
	u, _ := url.Parse(rawURL)
	return events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: u.Path, RawQueryString: u.RawQuery,
		Headers: map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: u.Path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
		},
		Body: body,
	}
}

// TestAWSBackendsFlowAndCallCounts runs the token → consent → callback →
// ready flow through the two functions' handlers on the emulator's DynamoDB,
// KMS, Secrets Manager and SQS, and counts the AWS calls of each operation
// (printed for `make bench-aws`).
func TestAWSBackendsFlowAndCallCounts(t *testing.T) {
	ctx := context.Background()
	cfg := emulatortest.Config(t)
	suffix := fmt.Sprintf("%d", time.Now().UnixNano())
	ddb, kmsc, sqsc, sm := dynamodb.NewFromConfig(cfg), kms.NewFromConfig(cfg), sqs.NewFromConfig(cfg), secretsmanager.NewFromConfig(cfg)

	table := "agentauth-it-" + suffix
	if _, err := ddb.CreateTable(ctx, dynamostore.TableSchema(table)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ddb.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	key, err := kmsc.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("agentauth it")})
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("agentauth-it-" + suffix + ".fifo"),
		Attributes: map[string]string{"FifoQueue": "true", "ContentBasedDeduplication": "false"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	secretName := "agentauth-it-" + suffix + "/session-keys"
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(secretName), SecretString: aws.String("session-key-0123456789abcdefghijklmnopqrstuvwxyz")}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(secretName), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})

	prov := &tinyProvider{}
	ps := httptest.NewServer(http.HandlerFunc(prov.handler))
	defer ps.Close()
	bdir := t.TempDir()
	app := `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: team}
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: global
  client: {clientId: {value: c1}, clientSecret: {valueFrom: {secretRef: {ref: Secret/demo, key: clientSecret}}}}
  endpoints: {authorizationUrl: "` + ps.URL + `/authorize", tokenUrl: "` + ps.URL + `/token"}
  scopes: [read]
  redirect: {callbackPath: /oauth/callback/team}
`
	if err := os.WriteFile(filepath.Join(bdir, "app.yaml"), []byte(app), 0o600); err != nil {
		t.Fatal(err)
	}
	prefix := "agentauth-it-" + suffix + "/"
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(prefix + "demo"), SecretString: aws.String(`{"clientSecret":"s1"}`)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(prefix + "demo"), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	for k, v := range map[string]string{
		config.Table: table, config.KMSKeyID: *key.KeyMetadata.Arn, config.QueueURL: *q.QueueUrl, config.SessionKeysSecret: secretName,
		config.SecretPrefix: prefix, config.Bundle: bdir, config.PublicURL: "https://auth.example", config.MaxWait: "25",
	} {
		t.Setenv(k, v)
	}
	log := slog.New(slog.DiscardHandler)
	runtimeCount, callbackCount := awscount.New(), awscount.New()
	runtime, err := Build(ctx, os.Getenv, RuntimeRoutes, "gettoken", log, Options{Counter: runtimeCount})
	if err != nil {
		t.Fatal(err)
	}
	callback, err := Build(ctx, os.Getenv, CallbackRoutes, "callback", log, Options{Counter: callbackCount})
	if err != nil {
		t.Fatal(err)
	}
	token := func() map[string]any {
		t.Helper()
		resp, err := httpadapter.NewV2(runtime).ProxyWithContext(ctx, v2Event("POST", "/v1/oauth/token",
			`{"oauthAppRef":"OAuthApp/team","turn":{"auth":{"subjects":{"global":"demo:team:T1"}},"resume":{"swarmRef":"Swarm/default","instanceKey":"i-1","agentName":"planner"}}}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("token: %v %d %s", err, resp.StatusCode, resp.Body)
		}
		var out map[string]any
		_ = json.Unmarshal([]byte(resp.Body), &out)
		return out
	}
	counts := func(c *awscount.Counter) string { s := c.String(); c.Reset(); return s }

	// exactly checks that counter c holds exactly want, and starts again.
	exactly := func(what string, c *awscount.Counter, want map[string]int) {
		t.Helper()
		got := c.Snapshot()
		t.Logf("AWS calls: %-32s: %s", what, counts(c))
		if !maps.Equal(got, want) {
			t.Errorf("%s: AWS calls %v, want %v", what, got, want)
		}
	}

	runtimeCount.Reset()
	out := token()
	if out["status"] != "authorization_required" {
		t.Fatalf("first: %v", out)
	}
	// The grant, the reuse pointer, then the session and its pointer in
	// one transaction (issue 9.11).
	exactly("token, new session", runtimeCount, map[string]int{"dynamodb.GetItem": 2, "dynamodb.TransactWriteItems": 1})
	again := token()
	if again["authSessionId"] != out["authSessionId"] || again["authorizationUrl"] != out["authorizationUrl"] {
		t.Fatalf("a repeated request got another session: %v, first %v", again, out)
	}
	exactly("token, pending session reused", runtimeCount, map[string]int{"dynamodb.GetItem": 3})
	resp, err := httpadapter.NewV2(runtime).ProxyWithContext(ctx, v2Event("GET", "/v1/oauth/pending?swarmRef=Swarm/default&instanceKey=i-1&agentName=planner", ""))
	if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, out["authSessionId"].(string)) {
		t.Fatalf("auth.pending: %v %d %s", err, resp.StatusCode, resp.Body)
	}
	exactly("auth.pending", runtimeCount, map[string]int{"dynamodb.Query": 2}) // the target's key, and the key before issue 17 (its sessions expire within 10 min)
	au, _ := url.Parse(out["authorizationUrl"].(string))

	callbackCount.Reset()
	resp, err = httpadapter.NewV2(callback).ProxyWithContext(ctx, v2Event("GET", "/oauth/callback/team?code=c&state="+url.QueryEscape(au.Query().Get("state")), ""))
	if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Body, "Connected") {
		t.Fatalf("callback: %v %d %s", err, resp.StatusCode, resp.Body)
	}
	cb := callbackCount.Snapshot()
	t.Logf("AWS calls: callback                      : %s", counts(callbackCount))
	// GetItem: the session; PutItem: the claim (pending → exchanging)
	// before the code is redeemed; one transaction: grant + session.
	want := map[string]int{"dynamodb.GetItem": 1, "dynamodb.PutItem": 1, "dynamodb.TransactWriteItems": 1, "kms.GenerateDataKey": 1, "sqs.SendMessage": 1}
	for k, n := range want {
		if cb[k] != n {
			t.Errorf("callback %s = %d, want %d (all: %v)", k, cb[k], n, cb)
		}
	}
	if len(cb) != len(want) {
		t.Errorf("callback made other AWS calls: %v", cb)
	}

	out = token()
	rt := runtimeCount.Snapshot()
	t.Logf("AWS calls: token, ready (cold data key)  : %s", counts(runtimeCount))
	if out["status"] != "ready" || rt["dynamodb.GetItem"] != 1 || rt["kms.Decrypt"] != 1 || len(rt) != 2 {
		t.Fatalf("cold ready: %v, calls %v", out["status"], rt)
	}
	out = token()
	rt = runtimeCount.Snapshot()
	t.Logf("AWS calls: token, ready (warm)           : %s", counts(runtimeCount))
	if out["status"] != "ready" || rt["dynamodb.GetItem"] != 1 || len(rt) != 1 {
		t.Fatalf("warm ready: %v, calls %v", out["status"], rt)
	}

	queue, err := sqsqueue.New(sqsc, *q.QueueUrl, sqsqueue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := queue.Receive(ctx, 10, 2*time.Second)
	if err != nil || len(ds) != 1 || ds[0].Event.AgentName != "planner" || ds[0].Event.InstanceKey != "i-1" {
		t.Fatalf("auth.granted from SQS: %+v %v", ds, err)
	}

	// Only sealed values in the table.
	items, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(items.Items)
	prov.mu.Lock()
	defer prov.mu.Unlock()
	for _, s := range prov.issued {
		if strings.Contains(string(raw), s) {
			t.Fatalf("a token is stored in plaintext")
		}
	}
}
