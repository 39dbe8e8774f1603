package app

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/shared/turn/origin"
)

const teamApp = `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: team}
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: global
  client: {clientId: {value: c1}, clientSecret: {valueFrom: {secretRef: {ref: Secret/demo, key: clientSecret}}}}
  endpoints: {authorizationUrl: "https://provider.example/authorize", tokenUrl: "https://provider.example/token"}
  scopes: [read]
  redirect: {callbackPath: /oauth/callback/team}
`

const deviceApp = `---
apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: cli}
spec:
  provider: demo
  flow: deviceCode
  subjectMode: global
  client: {clientId: {value: c2}, clientSecret: {value: x}}
  endpoints: {deviceAuthorizationUrl: "https://provider.example/device", tokenUrl: "https://provider.example/token"}
  scopes: [read]
`

// setup writes a bundle and a secrets directory into a fresh home and
// returns the local configuration for it.
func setup(t testing.TB, bundleYAML string) config.Config {
	t.Helper()
	home := t.TempDir()
	cfg, err := config.FromEnv(func(string) string { return "" }, config.Local)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Home, cfg.BundleDir, cfg.PublicURL = home, filepath.Join(home, "bundle"), "https://auth.example"
	for path, data := range map[string]string{
		filepath.Join(cfg.BundleDir, "app.yaml"):                  bundleYAML,
		filepath.Join(cfg.LocalSecrets(), "demo", "clientSecret"): "s3cret\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

func build(t *testing.T, cfg config.Config, opts Options) (*App, error) {
	t.Helper()
	be, err := OpenBackends(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Build(context.Background(), cfg, be, nil, opts)
}

func status(h http.Handler, method, path, token string) int {
	req := httptest.NewRequest(method, path, strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

func TestBuildServesEachFunctionsRoutes(t *testing.T) {
	cfg := setup(t, teamApp)
	a, err := build(t, cfg, Options{RuntimeAuth: httpapi.BearerToken{Token: domain.NewSecret("tok")}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Bundle.OAuthApps["team"].ClientSecret.Reveal() != "s3cret" {
		t.Fatal("the secretRef was not resolved from the home's secrets directory")
	}
	for _, tc := range []struct {
		name    string
		h       http.Handler
		method  string
		path    string
		token   string
		want    int
		comment string
	}{
		{"all: runtime route, no token", a.Handler(), "POST", "/v1/oauth/token", "", 401, ""},
		{"all: runtime route, token", a.Handler(), "POST", "/v1/oauth/token", "tok", 400, "an empty body is a bad request, past auth"},
		{"all: callback", a.Handler(), "GET", "/oauth/callback/team", "", 400, "no state"},
		{"runtime: callback absent", a.RuntimeHandler(), "GET", "/oauth/callback/team", "", 404, ""},
		{"callback: runtime absent", a.CallbackHandler(), "POST", "/v1/oauth/token", "tok", 404, ""},
		{"callback: callback", a.CallbackHandler(), "GET", "/oauth/callback/team", "", 400, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := status(tc.h, tc.method, tc.path, tc.token); got != tc.want {
				t.Fatalf("%s %s = %d, want %d %s", tc.method, tc.path, got, tc.want, tc.comment)
			}
		})
	}
	if _, err := a.ToolsHandler(); err == nil || !strings.Contains(err.Error(), config.JWKSURL) {
		t.Fatalf("tools off: %v", err)
	}
	if _, err := a.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestBuildWithoutRuntimeAuthRefusesRuntimeCallers(t *testing.T) {
	a, err := build(t, setup(t, teamApp), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := status(a.Handler(), "POST", "/v1/oauth/token", ""); got != 401 {
		t.Fatalf("no token: %d", got)
	}
	if got := status(a.Handler(), "POST", "/v1/oauth/token", "anything"); got != 401 {
		t.Fatalf("any token: %d", got)
	}
}

func TestBuildRefusesDeviceCodeInLambda(t *testing.T) {
	cfg := setup(t, teamApp+deviceApp)
	if _, err := build(t, cfg, Options{Lambda: true}); err == nil || !strings.Contains(err.Error(), "OAuthApp/cli: flow deviceCode") {
		t.Fatalf("Lambda: %v", err)
	}
	if _, err := build(t, cfg, Options{}); err != nil {
		t.Fatalf("local: %v", err)
	}
}

func TestBuildNamesTheBundle(t *testing.T) {
	cfg := setup(t, strings.Replace(teamApp, "scopes: [read]", "scopes: read", 1))
	_, err := build(t, cfg, Options{})
	if err == nil || !strings.Contains(err.Error(), "bundle "+cfg.BundleDir) || !strings.Contains(err.Error(), "app.yaml:") {
		t.Fatalf("%v", err)
	}
}

func TestBuildMountsTheToolRoutes(t *testing.T) {
	iss := jwttest.Start(t)
	env := iss.Env()
	cfg := setup(t, teamApp)
	withTools, err := config.FromEnv(func(k string) string { return env[k] }, config.Local)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tools = withTools.Tools
	cfg.Tools.Metrics = "emf"
	if _, err := build(t, cfg, Options{}); err == nil || !strings.Contains(err.Error(), "emf") {
		t.Fatalf("emf without an output: %v", err)
	}
	a, err := build(t, cfg, Options{Function: "test", MetricsOut: new(strings.Builder)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.ToolsHandler()
	if err != nil {
		t.Fatal(err)
	}
	if a.limiter == nil {
		t.Fatal("the home's file rate limiter is not swept")
	}
	tok := iss.Mint(t, map[string]any{"sub": "alice"})
	if got := status(h, "GET", "/v1/agents/tools", tok); got != 200 {
		t.Fatalf("tools with a JWT: %d", got)
	}
	if got := status(h, "GET", "/v1/agents/tools", ""); got != 401 {
		t.Fatalf("tools without a JWT: %d", got)
	}
	if got := status(h, "POST", "/v1/oauth/token", "x"); got != 404 {
		t.Fatalf("the tools function serves runtime routes: %d", got)
	}
	if got := status(a.Handler(), "GET", "/v1/agents/tools", tok); got != 200 {
		t.Fatalf("the local server does not serve the tool routes: %d", got)
	}
}

// TestBuildRunsTurns: a bundle with a Swarm gets a turn plane on the
// embedded backends: a posted message is routed, queued, and a worker's
// Handle runs the turn against the scripted model (a fixed script, not a
// language model) to its answer.
func TestBuildRunsTurns(t *testing.T) {
	sm, err := scripted.New(scripted.DemoScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	url, err := sm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	cfg := setup(t, teamApp+`---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: scripted}
spec: {provider: openai, model: scripted, endpoint: "`+url+`/v1"}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec: {modelRef: Model/scripted, systemPrompt: Answer briefly.}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: default}
spec: {agents: [Agent/assistant], entrypoint: Agent/assistant}
`)
	be, err := OpenBackends(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Build(context.Background(), cfg, be, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Turns == nil || a.Tools != nil {
		t.Fatalf("turns %v, tool routes %v: want turns without the REST tool routes", a.Turns != nil, a.Tools != nil)
	}
	// The turn routes go with the runtime routes (their credential), never
	// with the public callback routes.
	for _, tc := range []struct {
		name string
		h    http.Handler
		want int
	}{{"all", a.Handler(), 401}, {"runtime", a.RuntimeHandler(), 401}, {"callback", a.CallbackHandler(), 404}} {
		if got := status(tc.h, "GET", "/v1/instances", ""); got != tc.want {
			t.Errorf("%s handler: GET /v1/instances = %d, want %d", tc.name, got, tc.want)
		}
	}
	ctx := context.Background()
	ev, err := a.Turns.Post(ctx, "default", "thread-1", Incoming{Text: "who am I?", Auth: domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "alice"}}})
	if err != nil || ev.AgentName != "assistant" {
		t.Fatalf("post: %+v %v", ev, err)
	}
	if _, err := a.Turns.Post(ctx, "nope", "thread-1", Incoming{Text: "x"}); !errors.Is(err, ErrUnknownSwarm) {
		t.Fatalf("unknown swarm: %v", err)
	}
	if err := a.Turns.Engine.Handle(ctx, ev); err != nil {
		t.Fatal(err)
	}
	st, err := be.TurnStore.Load(ctx, engine.KeyOf(ev))
	if err != nil {
		t.Fatal(err)
	}
	var final string
	for _, tr := range st.Turns {
		if tr.Status != turn.TurnCompleted {
			t.Fatalf("turn %s: %s %+v", tr.ID, tr.Status, tr.Error)
		}
		final = tr.Final
	}
	// The agent has no tools, so the scripted model's whoami call is
	// refused as outside the catalog, and its second rule answers.
	if !strings.Contains(final, "scripted model") || len(sm.Requests()) != 2 {
		t.Fatalf("final %q after %d model requests", final, len(sm.Requests()))
	}
}

// TestBuildDeliversToTheOrigin: with a Connector in the bundle, a turn
// whose origin names it has its final answer POSTed there, signed with the
// connector's secret — on the upstream guard, so a loopback receiver gets
// it only with AllowPrivateUpstreams.
func TestBuildDeliversToTheOrigin(t *testing.T) {
	const secret = "app-test-hmac-key-0123456789abcdef0123"
	sm, err := scripted.New(scripted.DemoScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	modelURL, err := sm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	for _, tc := range []struct {
		name         string
		allowPrivate bool
		origin       map[string]any
		want         int
	}{
		{"delivered", true, map[string]any{"connector": "chat", "channel": "C1"}, 1},
		{"the guard refuses loopback", false, map[string]any{"connector": "chat"}, 0},
		{"no connector in the origin", true, map[string]any{"channel": "C1"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			type got struct {
				header http.Header
				body   string
			}
			deliveries := make(chan got, 10)
			rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				deliveries <- got{r.Header.Clone(), string(b)}
			}))
			t.Cleanup(rv.Close)
			cfg := setup(t, teamApp+`---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: scripted}
spec: {provider: openai, model: scripted, endpoint: "`+modelURL+`/v1"}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec: {modelRef: Model/scripted}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: default}
spec: {agents: [Agent/assistant], entrypoint: Agent/assistant}
---
apiVersion: agents.example.io/v1alpha1
kind: Connector
metadata: {name: chat}
spec: {type: webhook, url: "`+rv.URL+`/hook", secret: {value: `+secret+`}}
`)
			cfg.Tools.AllowPrivateUpstreams = tc.allowPrivate
			a, err := build(t, cfg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			ev, err := a.Turns.Post(ctx, "default", "thread-1", Incoming{Text: "who am I?", Origin: tc.origin, Auth: domain.TurnAuth{}})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Turns.Engine.Handle(ctx, ev); err != nil {
				t.Fatal(err)
			}
			// Close sends what is queued.
			if err := a.Close(ctx); err != nil {
				t.Fatal(err)
			}
			close(deliveries)
			n := 0
			for d := range deliveries {
				n++
				if err := origin.Verify(secret, d.header.Get(origin.HeaderTimestamp), d.body, d.header.Get(origin.HeaderSignature), time.Now(), time.Minute); err != nil {
					t.Errorf("delivery does not verify: %v", err)
				}
				var b origin.Body
				if err := json.Unmarshal([]byte(d.body), &b); err != nil || b.Event.Type != turn.EvTurnCompleted || b.Origin["channel"] != "C1" ||
					!strings.Contains(string(b.Event.Data), "scripted model") {
					t.Errorf("body %s (%v)", d.body, err)
				}
			}
			if n != tc.want {
				t.Errorf("%d deliveries, want %d", n, tc.want)
			}
		})
	}
}
