//go:build e2eaws

package e2eaws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// pathForms are the deployed API's and the turn function URL's base URLs
// in MiniStack's path forms: *.localhost names resolve in the browser
// only, not for an SDK's HTTP client.
type pathForms struct {
	API    string // http://127.0.0.1:4566/_aws/execute-api/<apiId>/$default
	Stream string // http://127.0.0.1:4566/_aws/lambda-url/<urlId>/
	// StreamPath is Stream's path, which the proxy in front of the
	// emulator keeps.
	StreamPath string
}

func (s *stack) pathForms(t *testing.T) pathForms {
	t.Helper()
	apiID, _, _ := strings.Cut(s.APIHost, ".")
	su, err := url.Parse(s.TurnStreamURL)
	if err != nil || su.Host == "" {
		t.Fatalf("TurnStreamUrl %q: %v", s.TurnStreamURL, err)
	}
	urlID, _, _ := strings.Cut(su.Hostname(), ".")
	end := strings.TrimRight(s.Endpoint, "/")
	f := pathForms{API: end + "/_aws/execute-api/" + apiID + "/$default", StreamPath: "/_aws/lambda-url/" + urlID + "/"}
	f.Stream = end + f.StreamPath
	return f
}

// signedGet GETs target SigV4-signed for service as an IAM caller does
// (host and path as sent: the path form's), and returns the status and
// body.
func signedGet(ctx context.Context, target, service, accept string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, nil, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	sum := sha256.Sum256(nil)
	creds := aws.Credentials{AccessKeyID: accessKeyID, SecretAccessKey: secretAccessKey}
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), service, region, time.Now()); err != nil {
		return 0, nil, err
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// checkPathForms proves that the emulator routes the path forms to the
// deployed functions: a signed runtime route through the API and a signed
// stream request to the turn function URL reach agentauth (its JSON 404
// for an instance that does not exist), and an unsigned one is refused.
func checkPathForms(ctx context.Context, t *testing.T, f pathForms) {
	t.Helper()
	inst := "/v1/instances/default/" + runID() + "-probe/assistant"
	for _, c := range []struct{ what, target, service, accept string }{
		{"the runtime route through the API's path form", f.API + inst, "execute-api", ""},
		{"the turn function URL's path form", f.Stream + strings.TrimPrefix(inst, "/") + "/turns/turn-probe/events", "lambda", "text/event-stream"},
	} {
		code, body, err := signedGet(ctx, c.target, c.service, c.accept)
		if err != nil || code != http.StatusNotFound || !strings.Contains(string(body), `"notFound"`) {
			t.Fatalf("%s (GET %s, SigV4 for %s) does not reach agentauth: %v HTTP %d %.300s", c.what, c.target, c.service, err, code, body)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.target, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s unsigned: HTTP %d, want 403", c.what, resp.StatusCode)
		}
	}
}

// TestDeployedSDKs runs each client SDK's integration suite (sdk/TESTING.md)
// against the stack `make deploy-local` put on MiniStack, one SDK after
// the other:
//
//	make test-e2e-aws                        # the whole package, this test included
//	make sdk-check && AWS_ENDPOINT_URL=http://127.0.0.1:4566 AGENTAUTH_REQUIRE_EMULATOR=1 E2E_REQUIRE=1 \
//	  go test -tags e2eaws -count=1 -v -run TestDeployedSDKs ./test/e2eaws/
//
// The suites call the deployed API (runtime routes SigV4-signed for
// execute-api) and follow turns on the turn function's URL (SigV4 for
// lambda), both in MiniStack's path forms, which the test first proves
// reach the functions. It starts the demo OpenID provider where the
// deployed bundle expects it (127.0.0.1:9090), but behind a recorder that
// keeps every token the provider issues; the scripted model where
// MiniStack's bedrock-runtime forwards (a fixed script, NOT a language
// model: any message calls whoami, whose result it answers); Chromium for
// the consents; and the harness of sdk/TESTING.md, its proxy in front of
// the stream URL. There is no agent JWT, tool or webhook test here (the
// contract leaves those variables unset).
//
// After each suite the test checks, from Go, that it consented through
// the harness and followed the turn through the proxy and dropped it
// (what the drop cut is logged: MiniStack buffers a stream until its
// window ends, so this is no mid-stream cut); at the end, that no token the
// provider issued (nor an authorization code) is in the functions' log
// groups since the start, MiniStack's log since the start, the table or
// the callback pages, and none in a suite's own output.
func TestDeployedSDKs(t *testing.T) {
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	runDeployedSDKSuites(t, root, e2ekit.SDKSuites(root))
}

// runDeployedSDKSuites is TestDeployedSDKs with the suites to run.
func runDeployedSDKSuites(t *testing.T, root string, suites []e2ekit.SDKSuite) {
	st := loadStack(t)
	if st.TurnFunction == "" || st.TurnStreamURL == "" {
		skipOrFail(t, "the deployed stack has no turn function or no TurnStreamUrl (deploy it with -c turns=1; make deploy-local does)")
	}
	requireProviderAndBrowser(t)
	e2ekit.RequireSomeSDKSuite(t, root, suites) // before starting anything
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	start := time.Now()
	logFrom := st.logSize()

	forms := st.pathForms(t)
	checkPathForms(ctx, t, forms)
	be := st.backends(ctx, t)

	sm, err := scripted.New(scripted.DemoScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lnModel := listen(t, bedrockProxyPort, "the scripted model (MiniStack's MINISTACK_BEDROCK_PROXY_URL)")
	modelSrv := &http.Server{Handler: sm, ReadHeaderTimeout: 10 * time.Second}
	go modelSrv.Serve(lnModel)
	t.Cleanup(func() { modelSrv.Close() })

	// The provider on a port of its own, its issuer the recorder's
	// address, where the deployed bundle's endpoints point.
	listen(t, providerPort, "the demo provider's token recorder").Close()
	behind := e2ekit.FreePort(t)
	issuer := fmt.Sprintf("http://127.0.0.1:%d", providerPort)
	tokens := e2ekit.StartTokenRecorder(t, fmt.Sprintf("127.0.0.1:%d", providerPort), fmt.Sprintf("http://127.0.0.1:%d", behind))
	callback := st.PublicURL + "/oauth/callback/demo-user"
	e2ekit.StartProvider(t, e2ekit.ProviderOptions{Port: behind, Env: []string{"PROVIDER_ISSUER=" + issuer},
		Clients: []e2ekit.Client{demoClient(t, st, be, callback)}})
	browser := e2ekit.StartBrowserWith(t, e2ekit.BrowserOptions{LocalhostSubdomains: true})

	eu, _ := url.Parse(st.Endpoint)
	h := e2ekit.StartSDKHarness(t, e2ekit.SDKHarnessOptions{Browser: browser, Upstream: eu.Host})
	// The grants of the logins the suites consented as (each suite picks
	// its own), removed at the end; the stack stays.
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		db := dynamodb.NewFromConfig(be.Config)
		seen, removed := map[string]bool{}, 0
		for _, r := range h.Consents() {
			if seen[r.Login] {
				continue
			}
			seen[r.Login] = true
			id := oauth.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "demo-user"}, "demo:user:"+r.Login)
			out, err := db.DeleteItem(cctx, &dynamodb.DeleteItemInput{TableName: aws.String(st.TableName), ReturnValues: ddbtypes.ReturnValueAllOld,
				Key: map[string]ddbtypes.AttributeValue{dynamostore.PartitionKey: &ddbtypes.AttributeValueMemberS{Value: "grant#" + id}}})
			if err != nil {
				t.Errorf("cleanup: delete grant %s: %v", id, err)
			} else if len(out.Attributes) > 0 {
				removed++
			}
			sum := sha256.Sum256([]byte("refresh/" + id))
			deleteKey(cctx, t, db, st.TableName, "lease#"+hex.EncodeToString(sum[:]))
		}
		t.Logf("cleanup: removed %d grant(s) of the %d login(s) the suites consented as", removed, len(seen))
	})
	env := e2ekit.SDKEnv(
		"AGENTAUTH_URL="+forms.API,
		"AGENTAUTH_AUTH=sigv4",
		"AWS_REGION="+region, "AWS_ACCESS_KEY_ID="+accessKeyID, "AWS_SECRET_ACCESS_KEY="+secretAccessKey,
		// Nothing but these credentials: no profile, no instance metadata.
		"AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull, "AWS_EC2_METADATA_DISABLED=true",
		"AGENTAUTH_STREAM_URL="+forms.Stream,
		"AGENTAUTH_TEST_HARNESS="+h.URL,
		"AGENTAUTH_TEST_APP=OAuthApp/demo-user",
		"AGENTAUTH_TEST_SUBJECT_PREFIX=demo:user:",
		"AGENTAUTH_TEST_LOGIN=alice",
		"AGENTAUTH_TEST_SWARM=default",
		"AGENTAUTH_TEST_AGENT=assistant",
		`AGENTAUTH_TEST_CLAIMS={"scope":"profile.read"}`,
		"AGENTAUTH_TEST_PROXY_URL="+h.ProxyBase+forms.StreamPath,
		"AGENTAUTH_SDK_REQUIRE=1",
	)
	t.Logf("API %s, stream %s, harness %s, proxy %s", forms.API, forms.Stream, h.URL, h.ProxyBase+forms.StreamPath)
	gw := newGateway(st.Endpoint, st.APIHost, nil)
	instancesBefore := sdkInstances(ctx, t, gw)
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		n := 0
		for _, key := range sdkInstances(cctx, t, gw) {
			if slices.Contains(instancesBefore, key) {
				continue
			}
			if a, err := gw.do(cctx, http.MethodDelete, instancePath(key)+"/assistant", nil, true); err != nil || (a.Code != 200 && a.Code != 404) {
				t.Logf("cleanup: delete instance %s: %v %d", key, err, a.Code)
				continue
			}
			n++
		}
		t.Logf("cleanup: deleted %d instance(s) the suites left", n)
	})

	for _, suite := range suites {
		t.Run(suite.Name, func(t *testing.T) {
			e2ekit.RequireSDKSuite(t, root, suite)
			before, nTokens, accepted := h.Counts(), len(tokens.Tokens()), h.ProxyAccepted()
			sctx, scancel := context.WithTimeout(ctx, 3*time.Minute)
			defer scancel()
			out, err := e2ekit.RunSDKSuite(sctx, t, root, suite, env)
			if err != nil {
				t.Error(err)
			}
			after := h.Counts()
			t.Logf("the suite caused: %d consents (%d failed), %d drops cutting %d connections (%d through the proxy in all), %d new provider tokens",
				after.Consents-before.Consents, after.ConsentErrors-before.ConsentErrors, after.Drops-before.Drops, after.Dropped-before.Dropped,
				h.ProxyAccepted(), len(tokens.Tokens())-nTokens)
			connected := 0
			for _, r := range h.Consents()[before.Consents+before.ConsentErrors:] {
				if r.Err == "" && strings.Contains(r.Title, "Connected") {
					connected++
				}
			}
			if connected == 0 {
				t.Error("no POST /consent reached the deployed callback's Connected page")
			}
			// MiniStack hands a RESPONSE_STREAM answer over when the
			// function has finished it (a stream window ends 2 s before
			// the function's timeout), so the suite sees turn.parked in an
			// answer that is already complete: what /drop cuts then is an
			// idle pooled connection, or nothing when the client closed
			// it. The cut in the middle of a live stream is proven by
			// TestSDKs (test/e2e); here the suite must have followed the
			// turn through the proxy and dropped.
			if after.Drops == before.Drops {
				t.Error("the suite never called POST /drop: the turn's stream was not followed through the proxy")
			}
			if h.ProxyAccepted() == accepted {
				t.Error("no connection went through the proxy in front of the stream URL")
			}
			if len(tokens.Tokens()) == nTokens {
				t.Error("the provider issued no token to the stack during the suite: no consent reached the token exchange")
			}
			// The SDK's own redaction: what it printed holds none.
			for _, l := range tokens.Leaks(out) {
				t.Errorf("a token the provider issued (%s) is in the suite's own output", l)
			}
		})
	}

	t.Run("no provider token in the stack's logs, table or pages", func(t *testing.T) {
		h.CheckConsentPages(t, tokens)
		if len(tokens.Tokens()) == 0 {
			t.Fatal("no token to look for")
		}
		prefix := strings.TrimSuffix(st.GetToken, "-gettoken")
		var groups []string
		for _, fn := range []string{"gettoken", "callback", "turn"} {
			group := "/aws/lambda/" + prefix + "-" + fn
			text, err := st.logTextSince(ctx, group, start.Add(-time.Second))
			if err != nil {
				t.Fatalf("%s: %v", group, err)
			}
			for _, l := range tokens.Leaks(text) {
				t.Errorf("a token the provider issued (%s) is in %s", l, group)
			}
			groups = append(groups, fmt.Sprintf("%s %d lines", fn, strings.Count(text, "\n")))
		}
		// The turn function's output when the event source mapping
		// invokes it: MiniStack keeps it in its own log.
		msLog, err := st.logSince(logFrom)
		if err != nil {
			t.Errorf("read %s: %v", st.MiniStackLog, err)
		}
		for _, l := range tokens.Leaks(msLog) {
			t.Errorf("a token the provider issued (%s) is in MiniStack's log", l)
		}
		items, err := scanTable(ctx, dynamodb.NewFromConfig(be.Config), st.TableName)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(items)
		for _, l := range tokens.Leaks(string(raw)) {
			t.Errorf("a token the provider issued (%s) is in the table", l)
		}
		t.Logf("%d provider tokens and codes looked for in the log groups (%s), %d KB of MiniStack's log, %d table items",
			len(tokens.Tokens()), strings.Join(groups, ", "), len(msLog)>>10, len(items))
	})
}

// sdkInstancePrefixes start the instance keys the SDKs' suites pick
// (py-…, ts-…): the instances a run of theirs left are deleted, never
// another test's.
var sdkInstancePrefixes = []string{"py-", "ts-"}

// sdkInstances lists the keys of the default swarm's instances that an
// SDK's suite may have made.
func sdkInstances(ctx context.Context, t *testing.T, gw *gateway) []string {
	t.Helper()
	a, err := gw.do(ctx, http.MethodGet, "/v1/instances", nil, true)
	if err != nil || a.Code != http.StatusOK {
		t.Logf("list instances: %v HTTP %d", err, a.Code)
		return nil
	}
	var out struct {
		Data []struct {
			Swarm       string `json:"swarm"`
			InstanceKey string `json:"instanceKey"`
		} `json:"data"`
	}
	if err := json.Unmarshal(a.Body, &out); err != nil {
		t.Logf("list instances: %v", err)
		return nil
	}
	var keys []string
	for _, in := range out.Data {
		for _, p := range sdkInstancePrefixes {
			if in.Swarm == "default" && strings.HasPrefix(in.InstanceKey, p) {
				keys = append(keys, in.InstanceKey)
			}
		}
	}
	return keys
}

// logTextSince is the messages of a log group's events from since on,
// one a line (FilterLogEvents with a startTime, all pages).
func (s *stack) logTextSince(ctx context.Context, group string, since time.Time) (string, error) {
	var all strings.Builder
	next := ""
	for page := 0; page < 1000; page++ {
		in := map[string]any{"logGroupName": group, "startTime": since.UnixMilli()}
		if next != "" {
			in["nextToken"] = next
		}
		var out struct {
			Events    []logEvent `json:"events"`
			NextToken string     `json:"nextToken"`
		}
		if err := s.awsJSON(ctx, "logs", "Logs_20140328.FilterLogEvents", in, &out); err != nil {
			return all.String(), err
		}
		all.WriteString(logText(out.Events))
		if len(out.Events) >= 10000 && out.NextToken == "" {
			// MiniStack's cap without a next page (see logEvents).
			return all.String(), fmt.Errorf("log group %s: 10,000 events or more since %v", group, since)
		}
		if out.NextToken == "" || out.NextToken == next {
			return all.String(), nil
		}
		next = out.NextToken
	}
	return all.String(), errors.New("FilterLogEvents: more than 1000 pages")
}
