package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/shared/turn/origin"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// sdkConnector is the Connector whose deliveries go to the harness.
const sdkConnector = "sdk-webhook"

// sdkBundle is turnsBundle (the e2e-user app, the whoami http tool that
// needs its consent, the scripted model's Agent and Swarm) with the app's
// token endpoint behind the harness's token recorder, and a Connector
// delivering to the harness.
func sdkBundle(t *testing.T, p *e2ekit.Provider, tokens *e2ekit.TokenRecorder, modelURL, hookURL string) string {
	t.Helper()
	b := turnsBundle(p, modelURL)
	u, err := url.Parse(p.TokenURL)
	if err != nil {
		t.Fatal(err)
	}
	old, recorded := "tokenUrl: "+p.TokenURL+"\n", "tokenUrl: "+tokens.URL+u.Path+"\n"
	if strings.Count(b, old) != 1 {
		t.Fatalf("the tools bundle has %d lines %q, want one", strings.Count(b, old), strings.TrimSpace(old))
	}
	return strings.Replace(b, old, recorded, 1) + fmt.Sprintf(`---
apiVersion: agents.example.io/v1alpha1
kind: Connector
metadata: {name: %s}
spec:
  type: webhook
  url: %s
  secret: {valueFrom: {env: E2E_WEBHOOK_SECRET}}
  events: [turn.started, turn.parked, turn.completed, turn.failed]
`, sdkConnector, hookURL)
}

// TestSDKs runs each client SDK's integration suite (sdk/TESTING.md)
// against a real `agentauth serve`, one SDK after the other:
//
//	make test-sdk
//	# which is: make e2e-deps sdk-check && E2E_REQUIRE=1 go test -count=1 -v -timeout 20m -run TestSDKs ./test/e2e
//
// It starts the demo OpenID provider (its token endpoint behind a
// recorder that keeps every token it issues), the scripted model (a
// fixed script, NOT a language model: any message calls whoami, whose
// result it answers), serve with the whoami tool that needs the user's
// consent, the turn engine, the tool routes (the provider's JWTs) and a
// Connector to the harness; then the harness of sdk/TESTING.md — the
// control server (consent in Chromium on the provider's real pages,
// /drop, /deliveries), the webhook receiver and a TCP proxy in front of
// serve — and runs sdk/python/integration.sh .tools/sdk-python (subtest
// python) and sdk/typescript/integration.sh (subtest typescript) with the
// contract's environment, their output in the test log. A suite whose
// environment `make sdk-check` has not installed is skipped (a failure
// under E2E_REQUIRE=1).
//
// After each suite the test checks, from Go, what the suite must have
// caused: a consent given through the harness, a /drop that cut a live
// connection, webhook deliveries of a parked and a completed turn that
// verify with the Connector's secret; and that no token the provider
// issued (nor the agent's JWT, nor an authorization code) is in serve's
// logs, the deliveries, the callback pages or the suite's own output — and
// at the end, in no file of serve's home. It takes about 30 s (each suite 10-20 s).
func TestSDKs(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	runSDKSuites(t, root, e2ekit.SDKSuites(root))
}

// runSDKSuites is TestSDKs with the suites to run.
func runSDKSuites(t *testing.T, root string, suites []e2ekit.SDKSuite) {
	e2ekit.RequireSomeSDKSuite(t, root, suites) // before starting anything
	ctx, cancel := context.WithTimeout(context.Background(), 14*time.Minute)
	defer cancel()

	sm, err := scripted.New(scripted.DemoScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	modelURL, err := sm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{Clients: []e2ekit.Client{
		{ClientID: clientID, ClientSecret: clientSecret, RedirectURIs: []string{base + "/oauth/callback/e2e-user"},
			GrantTypes: []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken}},
		{ClientID: "agentauth-agent", ClientSecret: "agent-secret", RedirectURIs: []string{base + "/unused"},
			GrantTypes: []string{e2ekit.GrantClientCredentials, e2ekit.GrantAuthorizationCode}, Scope: "profile.read agentauth:admin"},
	}})
	tokens := e2ekit.StartTokenRecorder(t, "127.0.0.1:0", p.Issuer)
	browser := e2ekit.StartBrowser(t)
	h := e2ekit.StartSDKHarness(t, e2ekit.SDKHarnessOptions{Browser: browser, Upstream: fmt.Sprintf("127.0.0.1:%d", port)})
	webhookSecret := randomHex(t, 32)

	home := t.TempDir()
	srv := startServer(t, port, home, map[string]string{"sdk.yaml": sdkBundle(t, p, tokens, modelURL+"/v1", h.HookURL(sdkConnector))},
		"E2E_CLIENT_SECRET="+clientSecret, "E2E_WEBHOOK_SECRET="+webhookSecret,
		// The Connector delivers to the harness on loopback.
		"AGENTAUTH_TOOLS_ALLOW_PRIVATE_UPSTREAMS=1",
		"AGENTAUTH_JWKS_URL="+p.JWKSURL, "AGENTAUTH_JWT_ISSUER="+p.Issuer, "AGENTAUTH_JWT_AUDIENCE=urn:agentauth:tools")
	// The demo agent's JWT acts for alice (the provider's agentauth-agent
	// client carries agentauth_subjects.user "demo:user:alice").
	jwt := agentJWT(t, p, "urn:agentauth:tools")
	tokens.Keep("agent JWT", jwt)

	env := e2ekit.SDKEnv(
		"AGENTAUTH_URL="+srv.URL,
		"AGENTAUTH_RUNTIME_TOKEN="+srv.Token,
		"AGENTAUTH_AGENT_TOKEN="+jwt,
		"AGENTAUTH_TEST_HARNESS="+h.URL,
		"AGENTAUTH_TEST_APP=OAuthApp/e2e-user",
		"AGENTAUTH_TEST_SUBJECT_PREFIX=demo:user:",
		"AGENTAUTH_TEST_LOGIN=alice",
		"AGENTAUTH_TEST_TOOL=whoami",
		"AGENTAUTH_TEST_SWARM=default",
		"AGENTAUTH_TEST_AGENT=assistant",
		`AGENTAUTH_TEST_CLAIMS={"scope":"profile.read"}`,
		"AGENTAUTH_TEST_CONNECTOR="+sdkConnector,
		"AGENTAUTH_TEST_WEBHOOK_SECRET="+webhookSecret,
		"AGENTAUTH_TEST_PROXY_URL="+h.ProxyBase,
		"AGENTAUTH_SDK_REQUIRE=1",
	)
	t.Logf("agentauth serve %s, harness %s, proxy %s, provider %s", srv.URL, h.URL, h.ProxyBase, p.Issuer)

	for _, suite := range suites {
		t.Run(suite.Name, func(t *testing.T) {
			e2ekit.RequireSDKSuite(t, root, suite)
			before, nTokens, nDeliveries := h.Counts(), len(tokens.Tokens()), len(h.Deliveries(sdkConnector))
			sctx, scancel := context.WithTimeout(ctx, 5*time.Minute)
			defer scancel()
			out, err := e2ekit.RunSDKSuite(sctx, t, root, suite, env)
			if err != nil {
				t.Error(err)
			}
			after := h.Counts()
			t.Logf("the suite caused: %d consents (%d failed), %d drops cutting %d connections (%d through the proxy in all), %d webhook deliveries, %d new provider tokens",
				after.Consents-before.Consents, after.ConsentErrors-before.ConsentErrors, after.Drops-before.Drops, after.Dropped-before.Dropped,
				h.ProxyAccepted(), after.Deliveries-before.Deliveries, len(tokens.Tokens())-nTokens)
			checkConsents(t, h.Consents()[before.Consents+before.ConsentErrors:])
			if after.Drops == before.Drops || after.Dropped == before.Dropped {
				t.Errorf("no POST /drop cut a connection (%d drops, %d connections cut): the turn's stream was not followed through the proxy and resumed",
					after.Drops-before.Drops, after.Dropped-before.Dropped)
			}
			if len(tokens.Tokens()) == nTokens {
				t.Error("the provider issued no token to agentauth during the suite: no consent reached the token exchange")
			}
			checkDeliveries(t, func() []e2ekit.Delivery { return h.Deliveries(sdkConnector)[nDeliveries:] }, webhookSecret)
			leakScan(t, tokens, h, srv.Stdout.String()+srv.Stderr.String())
			// The SDK's own redaction: what it printed holds none either.
			for _, l := range tokens.Leaks(out) {
				t.Errorf("a token the provider issued (%s) is in the suite's own output", l)
			}
		})
	}

	// Serve's home, once it has stopped: no token in any file.
	srv.stop()
	logs := srv.Stdout.String() + srv.Stderr.String()
	leakScan(t, tokens, h, logs)
	// A file the scan cannot read fails it: an unread file was not scanned.
	files := 0
	err = filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		for _, l := range tokens.Leaks(string(b)) {
			t.Errorf("a token the provider issued (%s) is in %s", l, path)
		}
		return nil
	})
	if err != nil {
		t.Errorf("scan serve's home for tokens: %v", err)
	}
	t.Logf("scanned serve's output and the %d file(s) of its home for the provider's tokens", files)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// checkConsents wants at least one consent that reached agentauth's
// Connected page.
func checkConsents(t *testing.T, recs []e2ekit.ConsentRecord) {
	t.Helper()
	connected := 0
	for _, r := range recs {
		if r.Err != "" {
			t.Logf("a consent (login %s) did not reach the callback: %s", r.Login, r.Err)
		}
		if r.Err == "" && strings.Contains(r.Title+" "+r.Text, "Connected") {
			connected++
		}
	}
	if connected == 0 {
		t.Errorf("no POST /consent reached agentauth's Connected page (%d consents)", len(recs))
	}
}

// checkDeliveries wants the suite's webhook deliveries (what deliveries
// returns) to verify with the Connector's secret as they were received,
// and a parked and a completed turn among them, waiting up to 10 s for
// those two: a delivery is sent after its event is stored.
func checkDeliveries(t *testing.T, deliveries func() []e2ekit.Delivery, secret string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		got := map[string]bool{}
		for _, d := range deliveries() {
			if b, err := origin.VerifyBody(secret, d.Headers[origin.HeaderTimestamp], d.Body, d.Headers[origin.HeaderSignature], d.ReceivedAt, 0); err == nil {
				got[b.Event.Type] = true
			}
		}
		if got["turn.parked"] && got["turn.completed"] {
			break
		}
	}
	seen := map[string]int{}
	for _, d := range deliveries() {
		body, err := origin.VerifyBody(secret, d.Headers[origin.HeaderTimestamp], d.Body, d.Headers[origin.HeaderSignature], d.ReceivedAt, 0)
		if err != nil {
			t.Errorf("a delivery to %s does not verify with its secret: %v", d.Connector, err)
			continue
		}
		if body.Connector != sdkConnector {
			t.Errorf("a delivery to %s names connector %q", d.Connector, body.Connector)
		}
		seen[body.Event.Type]++
	}
	if seen["turn.parked"] == 0 || seen["turn.completed"] == 0 {
		t.Errorf("the suite's webhook deliveries: %v; want a turn.parked and a turn.completed (a turn posted with origin.connector %q)", seen, sdkConnector)
	}
}

// leakScan looks for every token the provider issued (and every
// authorization code the consents carried) in serve's output, the
// webhook deliveries and the callback pages.
func leakScan(t *testing.T, tokens *e2ekit.TokenRecorder, h *e2ekit.SDKHarness, logs string) {
	t.Helper()
	h.CheckConsentPages(t, tokens)
	for _, l := range tokens.Leaks(logs) {
		t.Errorf("a token the provider issued (%s) is in serve's output", l)
	}
	for _, d := range h.Deliveries("") {
		var hdrs strings.Builder
		for k, v := range d.Headers {
			hdrs.WriteString(k + ": " + v + "\n")
		}
		for _, l := range tokens.Leaks(hdrs.String() + d.Body) {
			t.Errorf("a token the provider issued (%s) is in a webhook delivery", l)
		}
	}
}
