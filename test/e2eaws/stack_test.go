//go:build e2eaws

package e2eaws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// Settings read from the environment.
const (
	// envRequire=1 turns the skips (no outputs, no emulator, no browser or
	// provider) into failures.
	envRequire = "AGENTAUTH_REQUIRE_EMULATOR"
	// envOutputs overrides <module root>/.tools/deploy-local/outputs.json.
	envOutputs = "AGENTAUTH_DEPLOY_OUTPUTS"
	// envStack names the stack in the outputs (default agentauth-local).
	envStack = "AGENTAUTH_LOCAL_STACK"
	// envMiniStackLog overrides <module root>/.tools/ministack-run[-<port>]/ministack.log.
	envMiniStackLog = "AGENTAUTH_MINISTACK_LOG"
)

// The emulator's account: MiniStack's static test credentials.
const (
	region          = "us-east-1"
	accessKeyID     = "test"
	secretAccessKey = "test"
	defaultEndpoint = "http://127.0.0.1:4566"
)

// TestMain points every AWS SDK client of this process (and of the refresh
// worker processes it starts) at the emulator with the test credentials:
// every other AWS_* variable is dropped and ~/.aws is ignored, so nothing
// here can reach a real AWS account.
func TestMain(m *testing.M) {
	endpoint := os.Getenv("AWS_ENDPOINT_URL")
	if endpoint == "" {
		endpoint = defaultEndpoint
	}
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_") {
			os.Unsetenv(k)
		}
	}
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL":            endpoint,
		"AWS_ACCESS_KEY_ID":           accessKeyID,
		"AWS_SECRET_ACCESS_KEY":       secretAccessKey,
		"AWS_REGION":                  region,
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		os.Setenv(k, v)
	}
	os.Exit(m.Run())
}

// skipOrFail skips the test, or fails it when AGENTAUTH_REQUIRE_EMULATOR=1.
func skipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv(envRequire) == "1" {
		t.Fatalf("%s (%s=1, so this is a failure, not a skip)", msg, envRequire)
	}
	t.Skipf("skipping the deployed-stack end-to-end test: %s (run `make test-e2e-aws`, or set %s=1 to fail instead)", msg, envRequire)
}

// stack is the deployed stack as outputs.json describes it, plus where to
// reach the emulator.
type stack struct {
	Name                                string
	ApiURL, PublicURL                   string
	TableName, KeyArn, QueueURL, DlqURL string
	GetToken, Callback                  string
	// TurnFunction and TurnBucket are "" when the stack has no turn
	// function.
	TurnFunction, TurnBucket  string
	TurnStreamURL             string
	ToolsStreamURL            string
	SessionKeys, SecretPrefix string
	Endpoint                  string // http://127.0.0.1:4566
	APIHost                   string // <apiId>.execute-api.localhost:4566
	MiniStackLog              string
	outputsPath               string
}

// loadStack reads outputs.json and checks that the emulator answers; it
// skips (or fails, see envRequire) when either is missing.
func loadStack(t *testing.T) *stack {
	t.Helper()
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{Name: os.Getenv(envStack), outputsPath: os.Getenv(envOutputs)}
	if s.Name == "" {
		s.Name = "agentauth-local"
	}
	if s.outputsPath == "" {
		s.outputsPath = filepath.Join(root, ".tools", "deploy-local", "outputs.json")
	}
	b, err := os.ReadFile(s.outputsPath)
	if err != nil {
		skipOrFail(t, "no deployed stack: %v (make deploy-local writes it)", err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("%s: %v", s.outputsPath, err)
	}
	o, ok := all[s.Name]
	if !ok {
		skipOrFail(t, "%s has no stack %s", s.outputsPath, s.Name)
	}
	s.ApiURL, s.PublicURL, s.TableName, s.KeyArn = o["ApiUrl"], o["PublicUrl"], o["TableName"], o["KeyArn"]
	s.QueueURL, s.DlqURL, s.GetToken, s.Callback = o["QueueUrl"], o["DlqUrl"], o["GetTokenFunctionName"], o["CallbackFunctionName"]
	s.SessionKeys, s.SecretPrefix = o["SessionKeysSecretArn"], o["SecretPrefix"]
	s.TurnFunction, s.TurnBucket, s.TurnStreamURL = o["TurnFunctionName"], o["TurnBucketName"], o["TurnStreamUrl"]
	s.ToolsStreamURL = o["ToolsStreamUrl"]
	for k, v := range map[string]string{"ApiUrl": s.ApiURL, "PublicUrl": s.PublicURL, "TableName": s.TableName, "KeyArn": s.KeyArn,
		"QueueUrl": s.QueueURL, "GetTokenFunctionName": s.GetToken, "CallbackFunctionName": s.Callback, "SessionKeysSecretArn": s.SessionKeys} {
		if v == "" {
			t.Fatalf("%s: stack %s has no %s output", s.outputsPath, s.Name, k)
		}
	}

	// Only the emulator on this machine.
	s.Endpoint = os.Getenv("AWS_ENDPOINT_URL")
	eu, err := url.Parse(s.Endpoint)
	if err != nil || eu.Scheme != "http" || !isLoopback(eu.Hostname()) {
		t.Fatalf("AWS_ENDPOINT_URL %q: want http://127.0.0.1:<port>, the local emulator", s.Endpoint)
	}
	au, err := url.Parse(s.ApiURL)
	if err != nil || !strings.Contains(au.Host, ".execute-api.") || !strings.HasSuffix(au.Hostname(), ".localhost") {
		t.Fatalf("ApiUrl %q is not an emulator execute-api URL (<apiId>.execute-api.localhost)", s.ApiURL)
	}
	s.APIHost = au.Host
	pu, err := url.Parse(s.PublicURL)
	if err != nil || !strings.HasSuffix(pu.Hostname(), ".localhost") {
		t.Fatalf("PublicUrl %q is not a *.localhost URL the browser can reach", s.PublicURL)
	}

	s.MiniStackLog = os.Getenv(envMiniStackLog)
	if s.MiniStackLog == "" {
		dir := "ministack-run"
		if p := eu.Port(); p != "" && p != "4566" {
			dir += "-" + p
		}
		s.MiniStackLog = filepath.Join(root, ".tools", dir, "ministack.log")
	}

	// The emulator must answer, and the API must still be deployed there
	// (MiniStack keeps no state across a restart).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.Endpoint, "/")+"/_localstack/health", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		skipOrFail(t, "the emulator at %s does not answer (%v); make deploy-local starts it", s.Endpoint, err)
	}
	resp.Body.Close()
	return s
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// recorded is a response body the test received, kept for the leak scan.
type recorded struct {
	what string
	body []byte
}

// recorder keeps every response body; what is "ready" for the one kind of
// answer allowed to hold a token.
type recorder struct {
	mu   sync.Mutex
	list []recorded
}

func (r *recorder) add(what string, body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, recorded{what, append([]byte(nil), body...)})
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.list...)
}

// gateway calls the deployed HTTP API through the emulator's API Gateway
// data plane: requests go to 127.0.0.1 with the API's own Host header
// (<apiId>.execute-api.localhost:4566), which is how MiniStack routes to an
// HTTP API's $default stage; runtime calls are SigV4-signed for
// execute-api.
type gateway struct {
	endpoint string
	host     string
	creds    aws.Credentials
	client   *http.Client
	rec      *recorder
}

func newGateway(endpoint, host string, rec *recorder) *gateway {
	return &gateway{
		endpoint: strings.TrimRight(endpoint, "/"),
		host:     host,
		creds:    aws.Credentials{AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey, Source: "e2eaws"},
		// Each worker process may start a fresh Lambda environment.
		client: &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}},
		rec:    rec,
	}
}

// answer is one HTTP response.
type answer struct {
	Code   int
	Header http.Header
	Body   []byte
}

// do sends one request; sign signs it with SigV4 as an IAM principal
// calling an AWS_IAM route does.
func (g *gateway) do(ctx context.Context, method, path string, body []byte, sign bool) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, g.endpoint+path, bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Host = g.host
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if sign {
		sum := sha256.Sum256(body)
		if err := v4.NewSigner().SignHTTP(ctx, g.creds, req, hex.EncodeToString(sum[:]), "execute-api", region, time.Now()); err != nil {
			return answer{}, err
		}
	}
	return g.send(req, method, path)
}

// send sends req, a method request for path, and reads the answer.
func (g *gateway) send(req *http.Request, method, path string) (answer, error) {
	resp, err := g.client.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", method, redactPath(path), err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: read body: %w", method, redactPath(path), err)
	}
	return answer{Code: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

func redactPath(p string) string {
	if i := strings.IndexByte(p, '?'); i >= 0 {
		return p[:i] + "?…"
	}
	return p
}

// tokenReq is the body of POST /v1/oauth/token.
type tokenReq struct {
	App      string
	Global   string
	User     string
	Instance string
	Channel  string
	MinTTL   *int
}

func (r tokenReq) body() []byte {
	b := map[string]any{
		"oauthAppRef": "OAuthApp/" + r.App,
		"turn": map[string]any{
			"auth":   map[string]any{"actor": map[string]any{"type": "user", "id": r.User}, "subjects": map[string]string{"global": r.Global, "user": r.User}},
			"origin": map[string]any{"connector": "e2eaws", "channel": r.Channel},
			"resume": map[string]any{"swarmRef": "Swarm/default", "instanceKey": r.Instance, "agentName": "planner"},
		},
	}
	if r.MinTTL != nil {
		b["minTtlSeconds"] = *r.MinTTL
	}
	out, _ := json.Marshal(b)
	return out
}

// tokenResult is the wire OAuthTokenResult.
type tokenResult struct {
	Status           string     `json:"status"`
	AccessToken      string     `json:"accessToken"`
	TokenType        string     `json:"tokenType"`
	ExpiresAt        *time.Time `json:"expiresAt"`
	AuthSessionID    string     `json:"authSessionId"`
	AuthorizationURL string     `json:"authorizationUrl"`
	Error            *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// describe prints a result without its token.
func (r tokenResult) describe() string {
	s := "status=" + r.Status
	if r.AuthSessionID != "" {
		s += " authSessionId=" + r.AuthSessionID
	}
	if r.Error != nil {
		s += fmt.Sprintf(" error=%s: %s", r.Error.Code, r.Error.Message)
	}
	if r.AccessToken != "" {
		s += " accessToken=[present]"
	}
	return s
}

// token asks the deployed gettoken function for a token, signed.
func (g *gateway) token(ctx context.Context, r tokenReq) (tokenResult, answer, error) {
	a, err := g.do(ctx, http.MethodPost, "/v1/oauth/token", r.body(), true)
	if err != nil {
		return tokenResult{}, a, err
	}
	var out tokenResult
	if err := json.Unmarshal(a.Body, &out); err != nil || a.Code != http.StatusOK {
		if g.rec != nil {
			g.rec.add("POST /v1/oauth/token (HTTP error)", a.Body)
		}
		return out, a, fmt.Errorf("POST /v1/oauth/token: HTTP %d %.300q", a.Code, a.Body)
	}
	if g.rec != nil {
		what := "POST /v1/oauth/token → " + out.Status
		if out.Status == "ready" {
			what = "ready"
		}
		g.rec.add(what, a.Body)
	}
	return out, a, nil
}

// awsJSON calls an AWS JSON 1.1 API of the emulator (CloudWatch Logs),
// signed with the test credentials: this module's go.mod has no
// CloudWatch Logs client, and the protocol is plain signed JSON.
func (s *stack) awsJSON(ctx context.Context, service, target string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.Endpoint, "/")+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", target)
	return signedCall(ctx, req, body, service, target, out)
}

// signedCall signs req, whose body is payload, for service with the test
// credentials, sends it to the emulator, and decodes the JSON of a 200
// answer into out; errors name the call as what.
func signedCall(ctx context.Context, req *http.Request, payload []byte, service, what string, out any) error {
	sum := sha256.Sum256(payload)
	creds := aws.Credentials{AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), service, region, time.Now()); err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d %.300s", what, resp.StatusCode, b)
	}
	return json.Unmarshal(b, out)
}

// logEvent is one CloudWatch Logs event.
type logEvent struct {
	LogStreamName string `json:"logStreamName"`
	Timestamp     int64  `json:"timestamp"`
	Message       string `json:"message"`
}

// logEvents returns every event of a log group (FilterLogEvents, all
// pages). MiniStack answers at most 10,000 events, oldest first, with no
// nextToken: past that the next request starts at the last timestamp seen,
// and events already returned are dropped.
func (s *stack) logEvents(ctx context.Context, group string) ([]logEvent, error) {
	const pageMax = 10000
	var events []logEvent
	seen := map[logEvent]bool{}
	next, from := "", int64(-1)
	for page := 0; ; page++ {
		if page > 10000 {
			return events, errors.New("FilterLogEvents: more than 10000 pages")
		}
		in := map[string]any{"logGroupName": group}
		if next != "" {
			in["nextToken"] = next
		}
		if from >= 0 {
			in["startTime"] = from
		}
		var out struct {
			Events    []logEvent `json:"events"`
			NextToken string     `json:"nextToken"`
		}
		if err := s.awsJSON(ctx, "logs", "Logs_20140328.FilterLogEvents", in, &out); err != nil {
			return events, fmt.Errorf("log group %s: %w", group, err)
		}
		fresh := 0
		for _, e := range out.Events {
			if !seen[e] {
				seen[e] = true
				events = append(events, e)
				fresh++
			}
		}
		switch {
		case out.NextToken != "" && out.NextToken != next:
			next = out.NextToken
		case len(out.Events) >= pageMax && fresh > 0:
			next, from = "", out.Events[len(out.Events)-1].Timestamp
		default:
			return events, nil
		}
	}
}

// scanTable returns every item of the table (all pages of a Scan).
func scanTable(ctx context.Context, db *dynamodb.Client, table string) ([]map[string]ddbtypes.AttributeValue, error) {
	var items []map[string]ddbtypes.AttributeValue
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return items, err
		}
		items = append(items, out.Items...)
	}
	return items, nil
}

// itemText renders an item's every attribute as text, for the leak scan.
func itemText(item map[string]ddbtypes.AttributeValue) string {
	var b strings.Builder
	keys := make([]string, 0, len(item))
	for k := range item {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteString("=")
		writeAttr(&b, item[k])
		b.WriteString("\n")
	}
	return b.String()
}

func writeAttr(b *strings.Builder, v ddbtypes.AttributeValue) {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		b.WriteString(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		b.WriteString(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		b.Write(v.Value)
	case *ddbtypes.AttributeValueMemberSS:
		b.WriteString(strings.Join(v.Value, "\n"))
	case *ddbtypes.AttributeValueMemberNS:
		b.WriteString(strings.Join(v.Value, "\n"))
	case *ddbtypes.AttributeValueMemberBS:
		for _, x := range v.Value {
			b.Write(x)
			b.WriteString("\n")
		}
	case *ddbtypes.AttributeValueMemberL:
		for _, x := range v.Value {
			writeAttr(b, x)
			b.WriteString("\n")
		}
	case *ddbtypes.AttributeValueMemberM:
		b.WriteString(itemText(v.Value))
	case *ddbtypes.AttributeValueMemberBOOL:
		fmt.Fprint(b, v.Value)
	}
}

func attrString(item map[string]ddbtypes.AttributeValue, name string) string {
	if v, ok := item[name].(*ddbtypes.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// logSize is the MiniStack log's current size (0 when it is missing).
func (s *stack) logSize() int64 {
	st, err := os.Stat(s.MiniStackLog)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSince returns the MiniStack log from byte offset off on.
func (s *stack) logSince(off int64) (string, error) {
	f, err := os.Open(s.MiniStackLog)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return "", err
	}
	b, err := io.ReadAll(f)
	return string(b), err
}

// spawns counts MiniStack's "environment spawned" lines for fn in log.
func spawns(log, fn string) int {
	return strings.Count(log, "Lambda provided-runtime environment spawned for "+fn+" (cold start)")
}
