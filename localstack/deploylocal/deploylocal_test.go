//go:build deploylocal

// Package deploylocal checks the stack that `make deploy-local` put on the
// local emulator: the resources have the template's properties (after the
// re-apply step), and the deployed functions answer through the emulator's
// API Gateway data plane. Run by `make test-deploy-local`; it reads
// .tools/deploy-local/outputs.json and never prints a secret.
package deploylocal

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const region = "us-east-1"

// stack is the deployed stack as outputs.json describes it.
type stack struct {
	ApiURL, PublicURL, TableName, KeyArn, QueueURL, DlqURL string
	GetToken, Callback, SessionKeys, SecretPrefix          string
	// Turn is "" when the stack has no turn function.
	Turn string
}

func load(t *testing.T) (stack, aws.Config, string) {
	t.Helper()
	path := os.Getenv("AGENTAUTH_DEPLOY_OUTPUTS")
	if path == "" {
		path = "../../.tools/deploy-local/outputs.json"
	}
	name := os.Getenv("AGENTAUTH_LOCAL_STACK")
	if name == "" {
		name = "agentauth-local"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run make deploy-local first)", err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	o, ok := all[name]
	if !ok {
		t.Fatalf("%s has no stack %s", path, name)
	}
	s := stack{ApiURL: o["ApiUrl"], PublicURL: o["PublicUrl"], TableName: o["TableName"], KeyArn: o["KeyArn"],
		QueueURL: o["QueueUrl"], DlqURL: o["DlqUrl"], GetToken: o["GetTokenFunctionName"], Callback: o["CallbackFunctionName"],
		SessionKeys: o["SessionKeysSecretArn"], SecretPrefix: o["SecretPrefix"], Turn: o["TurnFunctionName"]}
	endpoint := os.Getenv("AWS_ENDPOINT_URL")
	if endpoint == "" {
		endpoint = "http://127.0.0.1:4566"
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(region), config.WithBaseEndpoint(endpoint),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
	if err != nil {
		t.Fatal(err)
	}
	return s, cfg, endpoint
}

func TestTable(t *testing.T) {
	s, cfg, _ := load(t)
	ctx := context.Background()
	db := dynamodb.NewFromConfig(cfg)
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &s.TableName})
	if err != nil {
		t.Fatalf("table %s: %v", s.TableName, err)
	}
	tb := d.Table
	if tb.TableStatus != ddbtypes.TableStatusActive || len(tb.KeySchema) != 1 || aws.ToString(tb.KeySchema[0].AttributeName) != "pk" {
		t.Errorf("table %s: status %s, key schema %+v", s.TableName, tb.TableStatus, tb.KeySchema)
	}
	if tb.BillingModeSummary == nil || tb.BillingModeSummary.BillingMode != ddbtypes.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", tb.BillingModeSummary)
	}
	if !aws.ToBool(tb.DeletionProtectionEnabled) {
		t.Error("deletion protection is off")
	}
	if sse := tb.SSEDescription; sse == nil || sse.Status != ddbtypes.SSEStatusEnabled || sse.SSEType != ddbtypes.SSETypeKms || aws.ToString(sse.KMSMasterKeyArn) != s.KeyArn {
		t.Errorf("SSE %+v, want KMS with %s", sse, s.KeyArn)
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &s.TableName})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "ttl" {
		t.Errorf("TTL %+v, want ENABLED on ttl", d)
	}
	pitr, err := db.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: &s.TableName})
	if err != nil {
		t.Fatal(err)
	}
	if d := pitr.ContinuousBackupsDescription; d == nil || d.PointInTimeRecoveryDescription == nil ||
		d.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus != ddbtypes.PointInTimeRecoveryStatusEnabled {
		t.Errorf("point-in-time recovery is not enabled")
	}
}

func TestQueues(t *testing.T) {
	s, cfg, _ := load(t)
	ctx := context.Background()
	q := sqs.NewFromConfig(cfg)
	attrs := func(u string) map[string]string {
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &u, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatalf("queue %s: %v", u, err)
		}
		return out.Attributes
	}
	main, dlq := attrs(s.QueueURL), attrs(s.DlqURL)
	var redrive struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     any    `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(main["RedrivePolicy"]), &redrive); err != nil {
		t.Fatalf("events queue has no redrive policy (%q): %v", main["RedrivePolicy"], err)
	}
	if redrive.DeadLetterTargetArn != dlq["QueueArn"] || strings.Trim(strings.TrimSpace(jsonString(redrive.MaxReceiveCount)), `"`) != "5" {
		t.Errorf("redrive %+v, want the DLQ %s after 5 receives", redrive, dlq["QueueArn"])
	}
	for name, a := range map[string]map[string]string{"events": main, "dlq": dlq} {
		if a["FifoQueue"] != "true" || a["ContentBasedDeduplication"] != "false" || a["SqsManagedSseEnabled"] != "true" || a["MessageRetentionPeriod"] != "1209600" {
			t.Errorf("%s queue attributes: FIFO %s, content dedup %s, SSE %s, retention %s", name,
				a["FifoQueue"], a["ContentBasedDeduplication"], a["SqsManagedSseEnabled"], a["MessageRetentionPeriod"])
		}
	}
	// Six times the turn function's timeout (its event source), else 180.
	want := "180"
	if s.Turn != "" {
		fn, err := lambda.NewFromConfig(cfg).GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: &s.Turn})
		if err != nil {
			t.Fatal(err)
		}
		want = strconv.Itoa(6 * int(aws.ToInt32(fn.Timeout)))
	}
	if main["VisibilityTimeout"] != want {
		t.Errorf("events queue visibility %s, want %s", main["VisibilityTimeout"], want)
	}
}

// TestTurnEventSource: the events queue feeds the turn function through an
// enabled event source mapping that reports batch item failures.
func TestTurnEventSource(t *testing.T) {
	s, cfg, _ := load(t)
	if s.Turn == "" {
		t.Skip("the stack has no turn function (deployed without -c turns=1)")
	}
	ctx := context.Background()
	arn, err := sqs.NewFromConfig(cfg).GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &s.QueueURL,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := lambda.NewFromConfig(cfg).ListEventSourceMappings(ctx, &lambda.ListEventSourceMappingsInput{FunctionName: &s.Turn})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.EventSourceMappings) != 1 {
		t.Fatalf("%d event source mappings on %s, want 1", len(out.EventSourceMappings), s.Turn)
	}
	m := out.EventSourceMappings[0]
	if aws.ToString(m.EventSourceArn) != arn.Attributes["QueueArn"] || aws.ToInt32(m.BatchSize) != 10 ||
		len(m.FunctionResponseTypes) != 1 || m.FunctionResponseTypes[0] != "ReportBatchItemFailures" {
		t.Fatalf("mapping: source %s (want %s), batch %d, response types %v", aws.ToString(m.EventSourceArn), arn.Attributes["QueueArn"],
			aws.ToInt32(m.BatchSize), m.FunctionResponseTypes)
	}
	if st := aws.ToString(m.State); st != "Enabled" {
		t.Errorf("mapping state %s", st)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestKeyAndSecrets(t *testing.T) {
	s, cfg, _ := load(t)
	ctx := context.Background()
	rot, err := kms.NewFromConfig(cfg).GetKeyRotationStatus(ctx, &kms.GetKeyRotationStatusInput{KeyId: &s.KeyArn})
	if err != nil || !rot.KeyRotationEnabled {
		t.Errorf("key rotation: %v, %v", rot, err)
	}
	sm := secretsmanager.NewFromConfig(cfg)
	v, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &s.SessionKeys})
	if err != nil {
		t.Fatalf("session keys secret: %v", err)
	}
	key := aws.ToString(v.SecretString)
	if len(key) < 48 || strings.ContainsFunc(key, func(r rune) bool { return r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r)) }) {
		// Length and character classes only: the value itself never leaves the emulator.
		t.Errorf("session keys secret: %d characters, want at least 48 letters and digits", len(key))
	}
	if _, err := sm.DescribeSecret(ctx, &secretsmanager.DescribeSecretInput{SecretId: aws.String(s.SecretPrefix + "demo-oidc")}); err != nil {
		t.Errorf("demo bundle secret %sdemo-oidc: %v", s.SecretPrefix, err)
	}
}

func TestPackages(t *testing.T) {
	s, cfg, _ := load(t)
	l := lambda.NewFromConfig(cfg)
	fns := []string{s.GetToken, s.Callback}
	if s.Turn != "" {
		fns = append(fns, s.Turn)
	}
	for _, fn := range fns {
		out, err := l.GetFunctionConfiguration(context.Background(), &lambda.GetFunctionConfigurationInput{FunctionName: &fn})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: package %d bytes (%.2f MB), %s %v", fn, out.CodeSize, float64(out.CodeSize)/(1<<20), out.Runtime, out.Architectures)
		if out.CodeSize > 11<<20 {
			t.Errorf("%s: package %d bytes is over the 11 MiB budget (docs/deploy.md)", fn, out.CodeSize)
		}
	}
}

// gateway sends requests to the emulator's API Gateway data plane: to
// 127.0.0.1 with the API's own host name (<apiId>.execute-api.localhost),
// which is how MiniStack routes to an HTTP API's $default stage; that name
// need not resolve.
type gateway struct {
	t        *testing.T
	base     *url.URL // the ApiUrl output
	endpoint string
	creds    aws.CredentialsProvider
}

func newGateway(t *testing.T) (*gateway, stack) {
	s, cfg, endpoint := load(t)
	u, err := url.Parse(s.ApiURL)
	if err != nil || !strings.Contains(u.Host, ".execute-api.") {
		t.Fatalf("ApiUrl %q is not an execute-api URL", s.ApiURL)
	}
	return &gateway{t: t, base: u, endpoint: endpoint, creds: cfg.Credentials}, s
}

// do sends a request; sign signs it with SigV4 for execute-api, as an IAM
// principal calling an AWS_IAM route does.
func (g *gateway) do(method, path, body string, sign bool) (int, []byte) {
	g.t.Helper()
	req, err := http.NewRequest(method, strings.TrimSuffix(g.endpoint, "/")+path, strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Host = g.base.Host
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if sign {
		creds, err := g.creds.Retrieve(context.Background())
		if err != nil {
			g.t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(body))
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "execute-api", region, time.Now()); err != nil {
			g.t.Fatal(err)
		}
	}
	client := &http.Client{Timeout: 60 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		g.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func TestHealthz(t *testing.T) {
	g, _ := newGateway(t)
	code, body := g.do("GET", "/healthz", "", false)
	var m map[string]any
	if code != 200 || json.Unmarshal(body, &m) != nil || m["status"] != "ok" {
		t.Fatalf("GET /healthz: %d %s", code, body)
	}
	t.Logf("GET /healthz: %d %s", code, body)
}

const tokenBody = `{"oauthAppRef":"OAuthApp/demo-global","turn":{"auth":{"subjects":{"global":"demo:team:deploylocal"}},` +
	`"origin":{"connector":"deploylocal"},"resume":{"swarmRef":"Swarm/default","instanceKey":"deploylocal","agentName":"planner"}}}`

func TestTokenNeedsIAM(t *testing.T) {
	g, _ := newGateway(t)
	code, body := g.do("POST", "/v1/oauth/token", tokenBody, false)
	if code != http.StatusForbidden {
		t.Fatalf("unsigned POST /v1/oauth/token: %d %s, want 403 from the AWS_IAM route", code, body)
	}
	t.Logf("unsigned POST /v1/oauth/token: %d %s", code, body)
}

func TestTokenAuthorizationRequired(t *testing.T) {
	g, s := newGateway(t)
	code, body := g.do("POST", "/v1/oauth/token", tokenBody, true)
	var r struct {
		Status, AuthSessionID, AuthorizationURL, AccessToken string
	}
	if code != 200 || json.Unmarshal(body, &r) != nil {
		t.Fatalf("signed POST /v1/oauth/token: %d %s", code, body)
	}
	if r.Status != "authorization_required" || !strings.HasPrefix(r.AuthSessionID, "as-") || r.AccessToken != "" {
		t.Fatalf("token result: status %q, session %q, access token present %v", r.Status, r.AuthSessionID, r.AccessToken != "")
	}
	au, err := url.Parse(r.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	q := au.Query()
	wantRedirect := s.PublicURL + "/oauth/callback/demo-global"
	if got := q.Get("redirect_uri"); got != wantRedirect {
		t.Errorf("redirect_uri %q, want the deployed API's callback %q", got, wantRedirect)
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("client_id") != "agentauth-demo" {
		t.Errorf("authorization URL lacks PKCE S256, state or client id: %v", redact(q))
	}
	t.Logf("signed POST /v1/oauth/token: %d status=%s authSessionId=%s authorizationUrl=%s://%s%s?%s", code, r.Status, r.AuthSessionID, au.Scheme, au.Host, au.Path, redact(q).Encode())

	// The redirect_uri's path is a public route of the same API that
	// reaches the callback function: with a state it never issued, the
	// function (not the gateway) refuses.
	cb, _ := url.Parse(wantRedirect)
	code, body = g.do("GET", cb.Path+"?code=x&state=forged", "", false)
	if code == 404 || code == 403 || code >= 500 {
		t.Errorf("GET %s with a forged state: %d %s, want the callback function's 4xx", cb.Path, code, body)
	}
	t.Logf("GET %s?code=x&state=forged: %d", cb.Path, code)
}

func redact(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		if k == "state" || k == "code_challenge" {
			out.Set(k, "[elided]")
			continue
		}
		out[k] = v
	}
	return out
}

var initRE = regexp.MustCompile(`"msg":"initialized".*"initMs":(\d+)`)

// TestInitDuration reads the functions' own "initialized … initMs" lines
// from the log groups MiniStack writes their output to (LoggingConfig).
func TestInitDuration(t *testing.T) {
	s, cfg, _ := load(t)
	logs := cloudwatchlogs.NewFromConfig(cfg)
	for _, fn := range []string{s.GetToken, s.Callback} {
		group := "/aws/lambda/" + fn
		var found []int
		var token *string
		for {
			out, err := logs.FilterLogEvents(context.Background(), &cloudwatchlogs.FilterLogEventsInput{LogGroupName: &group, NextToken: token})
			if err != nil {
				t.Fatalf("%s: %v", group, err)
			}
			for _, e := range out.Events {
				if m := initRE.FindStringSubmatch(aws.ToString(e.Message)); m != nil {
					n, _ := strconv.Atoi(m[1])
					found = append(found, n)
				}
			}
			if out.NextToken == nil || aws.ToString(out.NextToken) == aws.ToString(token) {
				break
			}
			token = out.NextToken
		}
		if len(found) == 0 {
			t.Errorf("%s: no initialized line in %s (invoke the function first)", fn, group)
			continue
		}
		t.Logf("%s: init durations (ms) from %s: %v", fn, group, found)
	}
}
