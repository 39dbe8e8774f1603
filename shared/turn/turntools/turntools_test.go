package turntools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
)

// The canaries: neither may appear in an outcome, an event or a log line.
const (
	tokenCanary = "ya29.turn-token-canary-0123456789"
	argCanary   = "arg-canary-5a4b3c2d1e"
)

// testBundle: the agent "assistant" selects the tools tagged menu and
// demo:echo; the policy "everyone" shows every caller with a scope the
// group "basic" (not demo:hidden) and the uploads tagged tenant.
const testBundle = `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: menu-app}
spec:
  provider: menu
  flow: authorizationCode
  subjectMode: user
  subjectVerification: {insecureSkipVerification: true}
  client:
    clientId: {value: menu-client}
    clientSecret: {value: menu-secret}
  endpoints:
    authorizationUrl: http://127.0.0.1:1/auth
    tokenUrl: http://127.0.0.1:1/token
  scopes: [menu.read]
  redirect: {callbackPath: /oauth/callback/menu}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: menu}
spec:
  id: "menu:get"
  name: get_menu
  description: the menu of a day
  inputSchema: {type: object, properties: {day: {type: string}}, required: [day], additionalProperties: false}
  sourceId: menu
  sourcePath: /menu/{day}
  method: GET
  transport: http
  url: UPSTREAM
  auth: {oauthAppRef: menu-app, scopes: [menu.read]}
  requiredScopes: [menu.read]
  tags: [menu]
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: order}
spec: {id: "menu:order", name: order, description: orders a dish, inputSchema: {type: object}, sourceId: menu, sourcePath: /orders, method: POST, transport: http, url: UPSTREAM, tags: [menu]}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: echo}
spec: {id: "demo:echo", name: echo, description: echoes, inputSchema: {type: object}, sourceId: demo, transport: native}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: hidden}
spec: {id: "demo:hidden", name: hidden, description: no policy shows it, inputSchema: {type: object}, sourceId: demo, transport: native, tags: [menu]}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: unselected}
spec: {id: "demo:unselected", name: unselected, description: no agent selects it, inputSchema: {type: object}, sourceId: demo, transport: native}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: basic}
spec: {explicitToolIds: ["menu:get", "menu:order", "demo:echo", "demo:unselected"]}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: uploads}
spec: {selectors: [{requiredTags: [tenant]}]}
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: everyone}
spec: {claimMatchers: [{claim: scope, operator: exists}], allowedGroupIds: [basic, uploads]}
---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: m}
spec: {provider: openai, model: x, endpoint: "http://127.0.0.1:9/v1"}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec:
  modelRef: Model/m
  tools: {selectors: [{requiredTags: [menu]}], explicitToolIds: ["demo:echo"]}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: bare}
spec: {modelRef: Model/m}
`

// tokens is getAccessToken: it records each request and answers res.
type tokens struct {
	mu   sync.Mutex
	res  oauth.Result
	reqs []oauth.TokenRequest
}

func (f *tokens) GetAccessToken(_ context.Context, req oauth.TokenRequest) oauth.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	return f.res
}

// TokenRefused answers as GetAccessToken: no upstream here refuses a token.
func (f *tokens) TokenRefused(ctx context.Context, req oauth.TokenRequest, _ domain.Secret) oauth.Result {
	return f.GetAccessToken(ctx, req)
}

// sink records the audit events.
type sink struct {
	mu     sync.Mutex
	events []any
}

func (s *sink) Emit(_ context.Context, e any) error {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	return nil
}

type harness struct {
	tools  *Tools
	plane  *toolplane.Plane
	tokens *tokens
	sink   *sink
	logs   *bytes.Buffer
	seen   chan *http.Request
}

// newHarness: the upstream echoes the request's Authorization header (a
// careless upstream) so the scrubbing is tested too.
func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessWith(t, harnessOptions{})
}

// harnessOptions change newHarness's parts.
type harnessOptions struct {
	// bundle edits testBundle (UPSTREAM not yet replaced).
	bundle func(string) string
	// upstream answers after the request is recorded in seen; nil: the
	// echo.
	upstream http.HandlerFunc
	// native are added to (or replace) the native tools.
	native map[string]toolhooks.Invoker
	// runnerTimeout is the http runner's own request timeout (its
	// default when 0).
	runnerTimeout time.Duration
	// tokens, when set, gives the http tools their tokens from the
	// source it builds for the bundle (nil: the fake, h.tokens).
	tokens func(*bundle.Bundle) httptool.TokenSource
}

func newHarnessWith(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	h := &harness{tokens: &tokens{}, sink: &sink{}, logs: &bytes.Buffer{}, seen: make(chan *http.Request, 16)}
	answer := o.upstream
	if answer == nil {
		answer = func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path, "auth": r.Header.Get("Authorization")})
		}
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.seen <- r.Clone(context.Background())
		answer(w, r)
	}))
	t.Cleanup(up.Close)
	text := testBundle
	if o.bundle != nil {
		text = o.bundle(text)
	}
	b, err := bundle.Parse([]bundle.File{{Name: "b.yaml", Data: []byte(strings.ReplaceAll(text, "UPSTREAM", up.URL))}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if h.plane, err = toolplane.New(context.Background(), toolplane.Config{Bundle: b, Tenants: toolplane.NewMemoryTenants(), AllowPrivateUpstreams: true, Log: log}); err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.NewMemory(ratelimit.Limits{Default: ratelimit.Limit{Rate: 0.001, Burst: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	native := map[string]toolhooks.Invoker{
		"demo:echo": func(_ context.Context, a json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"echoed":true}`), nil
		},
	}
	maps.Copy(native, o.native)
	var tokenSource httptool.TokenSource = h.tokens
	if o.tokens != nil {
		tokenSource = o.tokens(b)
	}
	h.tools, err = New(Config{
		Plane:  h.plane,
		Hooks:  &toolhooks.Hooks{Limiter: lim, Sink: toolhooks.MultiSink{h.sink, toolhooks.LogSink{Log: log}}, Log: log},
		Runner: httptool.New(httptool.Options{Tokens: tokenSource, AllowPrivateUpstreams: true, Timeout: o.runnerTimeout, Log: log}),
		Native: native,
		Log:    log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var alice = domain.TurnAuth{
	Actor:    &domain.Actor{Type: "user", ID: "slack:U1"},
	Subjects: &domain.Subjects{User: "menu:user:alice"},
	Claims:   map[string]any{"sub": "alice", "scope": "menu.read", "tenant_id": "a", "agentauth_subjects": map[string]any{"user": "menu:user:from-claim"}},
}

var bob = domain.TurnAuth{
	Actor:  &domain.Actor{Type: "user", ID: "slack:U2"},
	Claims: map[string]any{"sub": "bob", "scope": "other", "tenant_id": "b"},
}

func turnOf(agent string, auth domain.TurnAuth) turn.Turn {
	return turn.Turn{ID: "turn-1", Instance: turn.InstanceKey{Swarm: "support", Key: "thread-1", Agent: agent}, Auth: auth, TraceID: "trace-1",
		Origin: map[string]any{"channel": "C1"}}
}

// invocation is what the engine hands Invoke for a call (its resume
// target built as the engine builds it).
func invocation(t turn.Turn, callID, tool, args string, catalog ...string) engine.Invocation {
	return engine.Invocation{Turn: t, Call: turn.Call{ID: callID, TurnID: t.ID, Step: 2, Tool: tool, Args: json.RawMessage(args)}, Catalog: catalog,
		IdempotencyKey: "agentauth-" + t.ID + "-" + callID,
		Resume: domain.ResumeInfo{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: t.Instance.Swarm}, InstanceKey: t.Instance.Key, AgentName: t.Instance.Agent,
			Origin: t.Origin, Auth: t.Auth, TurnID: t.ID, Step: 2, CallID: callID}}
}

func catalogNames(t *testing.T, h *harness, tt turn.Turn) string {
	t.Helper()
	tools, err := h.tools.Catalog(context.Background(), tt)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range tools {
		names = append(names, x.Spec.Name)
	}
	return strings.Join(names, ",")
}

// TestCatalogIsSelectionAndPolicy: a tool is in a step's catalog only if
// the agent selects it and the turn's principal may see it.
func TestCatalogIsSelectionAndPolicy(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name string
		turn turn.Turn
		want string
	}{
		// demo:hidden: selected, no policy shows it. demo:unselected:
		// shown, not selected.
		{"selection ∩ policy", turnOf("assistant", alice), "echo,get_menu,order"},
		{"a scope the tool requires is checked at the call, not here", turnOf("assistant", bob), "echo,get_menu,order"},
		{"an agent without tools", turnOf("bare", alice), ""},
		{"claims no policy matches", turnOf("assistant", domain.TurnAuth{Claims: map[string]any{"sub": "carl"}}), ""},
		{"no claims: an actor only", turnOf("assistant", domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "dan"}}), ""},
		{"nobody: claims but no subject", turnOf("assistant", domain.TurnAuth{Claims: map[string]any{"scope": "menu.read"}}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := catalogNames(t, h, tc.turn); got != tc.want {
				t.Fatalf("catalog = %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("specs and idempotency", func(t *testing.T) {
		tools, _ := h.tools.Catalog(context.Background(), turnOf("assistant", alice))
		got := map[string]engine.Tool{}
		for _, x := range tools {
			got[x.Spec.Name] = x
		}
		if g := got["get_menu"]; !g.Idempotent || g.Spec.Description != "the menu of a day" ||
			string(g.Spec.InputSchema) != `{"additionalProperties":false,"properties":{"day":{"type":"string"}},"required":["day"],"type":"object"}` {
			t.Errorf("get_menu = %+v (schema %s)", g, g.Spec.InputSchema)
		}
		if got["order"].Idempotent || got["echo"].Idempotent {
			t.Errorf("POST and native tools idempotent by default: %+v", got)
		}
	})
	t.Run("an agent the bundle lacks", func(t *testing.T) {
		if _, err := h.tools.Catalog(context.Background(), turnOf("ghost", alice)); err == nil || !strings.Contains(err.Error(), `"ghost"`) {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestTenantToolsOnlyForTheirTenant: an upload the agent selects reaches
// only turns of the uploading tenant.
func TestTenantToolsOnlyForTheirTenant(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for tenant, name := range map[string]string{"a": "a_specials", "b": "b_specials"} {
		spec := `{"id":"specials:list","name":"` + name + `","description":"d","inputSchema":{"type":"object"},"sourceId":"specials","transport":"native","tags":["menu","tenant"]}`
		if _, err := h.plane.Upload(ctx, tenant, domain.TenantKindTool, []byte(spec)); err != nil {
			t.Fatal(err)
		}
	}
	if got := catalogNames(t, h, turnOf("assistant", alice)); got != "a_specials,echo,get_menu,order" {
		t.Errorf("tenant a's turn: %q", got)
	}
	if got := catalogNames(t, h, turnOf("assistant", bob)); got != "b_specials,echo,get_menu,order" {
		t.Errorf("tenant b's turn: %q", got)
	}
	// Even when the engine's catalog names it, another tenant's tool is
	// not callable.
	out := h.tools.Invoke(ctx, invocation(turnOf("assistant", bob), "c1", "a_specials", `{}`, "a_specials", "echo"))
	if code := errorCode(t, out); out.Kind != engine.OutcomeError || code != toolhooks.CodeNotInCatalog {
		t.Fatalf("outcome %s %s", out.Kind, out.Result)
	}
}

func errorCode(t *testing.T, o engine.Outcome) string {
	t.Helper()
	var r struct {
		Status string `json:"status"`
		Error  *struct {
			Code, Name, Message string
			RetryAfterSeconds   int `json:"retryAfterSeconds"`
		} `json:"error"`
	}
	if err := json.Unmarshal(o.Result, &r); err != nil {
		t.Fatalf("result %s: %v", o.Result, err)
	}
	if r.Error == nil {
		return ""
	}
	if r.Status != "error" || r.Error.Name == "" || r.Error.Message == "" {
		t.Fatalf("error result %s: want {status: error, error: {code, name, message}}", o.Result)
	}
	return r.Error.Code
}

func TestInvoke(t *testing.T) {
	steps := []string{"echo", "get_menu", "order"} // the step's catalog, as the engine keeps it
	ready := oauth.Result{Status: oauth.StatusReady, AccessToken: domain.NewSecret(tokenCanary), TokenType: "bearer"}
	consent := oauth.Result{Status: oauth.StatusAuthorizationRequired, AuthSessionID: "as-42", AuthorizationURL: "https://idp.example/authorize?a=1&b=2", Message: "connect menu"}
	for _, tc := range []struct {
		name     string
		auth     domain.TurnAuth
		token    oauth.Result
		tool     string
		args     string
		catalog  []string
		wantKind string
		wantCode string
		upstream bool // the upstream must be called (else it must not)
	}{
		{"ok: a native tool's result passes through", alice, ready, "echo", `{"x":"` + argCanary + `"}`, steps, engine.OutcomeOK, "", false},
		{"ok: an http tool with the turn's token", alice, ready, "get_menu", `{"day":"mon"}`, steps, engine.OutcomeOK, "", true},
		{"a tool the agent does not select", alice, ready, "unselected", `{}`, append(steps, "unselected"), engine.OutcomeError, toolhooks.CodeNotInCatalog, false},
		{"a tool outside the step's catalog", alice, ready, "order", `{}`, []string{"echo"}, engine.OutcomeError, toolhooks.CodeNotInCatalog, false},
		{"a tool no policy shows", alice, ready, "hidden", `{}`, append(steps, "hidden"), engine.OutcomeError, toolhooks.CodeNotInCatalog, false},
		{"an empty step catalog", alice, ready, "echo", `{}`, nil, engine.OutcomeError, toolhooks.CodeNotInCatalog, false},
		{"a missing scope", bob, ready, "get_menu", `{"day":"mon"}`, steps, engine.OutcomeError, toolhooks.CodeForbidden, false},
		{"invalid arguments", alice, ready, "get_menu", `{"day":3}`, steps, engine.OutcomeError, toolhooks.CodeInvalidArgs, false},
		{"consent needed: the call parks", alice, consent, "get_menu", `{"day":"mon"}`, steps, engine.OutcomeAuthorizationRequired, "", false},
		{"the broker fails: an error result", alice, oauth.Result{Status: oauth.StatusError, Error: &oauth.ResultError{Code: "refreshFailed", Message: "no"}}, "get_menu", `{"day":"mon"}`, steps, engine.OutcomeError, httptool.CodeAuth, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.tokens.res = tc.token
			in := invocation(turnOf("assistant", tc.auth), "call-7", tc.tool, tc.args, tc.catalog...)
			out := h.tools.Invoke(context.Background(), in)
			if out.Kind != tc.wantKind {
				t.Fatalf("kind %s, want %s (result %s)", out.Kind, tc.wantKind, out.Result)
			}
			if code := errorCode(t, out); code != tc.wantCode {
				t.Fatalf("code %q, want %q (result %s)", code, tc.wantCode, out.Result)
			}
			var req *http.Request
			select {
			case req = <-h.seen:
			default:
			}
			if (req != nil) != tc.upstream {
				t.Fatalf("upstream called: %v, want %v", req != nil, tc.upstream)
			}
			if req != nil {
				if got := req.Header.Get("Idempotency-Key"); got != in.IdempotencyKey {
					t.Errorf("Idempotency-Key = %q, want %q", got, in.IdempotencyKey)
				}
				if req.Header.Get("Authorization") != "Bearer "+tokenCanary {
					t.Errorf("the upstream got no token")
				}
			}
			switch tc.wantKind {
			case engine.OutcomeAuthorizationRequired:
				if out.AuthSession != "as-42" || out.AuthorizationURL != consent.AuthorizationURL {
					t.Fatalf("parked on %q at %q", out.AuthSession, out.AuthorizationURL)
				}
				if !strings.Contains(string(out.Result), `"status":"authorization_required"`) || !strings.Contains(string(out.Result), consent.AuthorizationURL) {
					t.Fatalf("result %s", out.Result)
				}
			case engine.OutcomeOK:
				if !strings.HasPrefix(string(out.Result), `{"status":"ok","output":`) {
					t.Fatalf("result %s", out.Result)
				}
			}
			if tc.tool == "get_menu" && tc.wantCode != toolhooks.CodeForbidden && tc.wantCode != toolhooks.CodeInvalidArgs {
				// getAccessToken had the turn's auth (its subjects over
				// the claim's) and this call's resume target.
				if len(h.tokens.reqs) != 1 {
					t.Fatalf("%d token requests", len(h.tokens.reqs))
				}
				r := h.tokens.reqs[0]
				if r.Resume == nil || !reflect.DeepEqual(*r.Resume, in.Resume) || r.Auth.Subjects == nil || r.Auth.Subjects.User != "menu:user:alice" {
					t.Fatalf("token request resume %+v auth subjects %+v", r.Resume, r.Auth.Subjects)
				}
			} else if len(h.tokens.reqs) != 0 {
				t.Fatalf("a token was fetched for a call that did not run: %+v", h.tokens.reqs)
			}
			h.checkAudit(t, in)
			h.checkNoSecret(t, out)
		})
	}
}

// checkAudit: one toolCalled and one toolReturned for the call, via turn,
// the tool's transport, the turn's principal and agent.
func (h *harness) checkAudit(t *testing.T, in engine.Invocation) {
	t.Helper()
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	if len(h.sink.events) != 2 {
		t.Fatalf("%d audit events, want 2", len(h.sink.events))
	}
	called, ok := h.sink.events[0].(toolhooks.ToolCalled)
	ret, ok2 := h.sink.events[1].(toolhooks.ToolReturned)
	if !ok || !ok2 {
		t.Fatalf("events %T %T", h.sink.events[0], h.sink.events[1])
	}
	wantPrincipal, _ := in.Turn.Auth.Claims["sub"].(string)
	if called.Via != toolhooks.ViaTurn || called.Principal != wantPrincipal || called.AgentID != "assistant" || called.CallID != in.Call.ID ||
		called.ToolName != in.Call.Tool || called.ArgsHash == "" || ret.CallID != in.Call.ID {
		t.Fatalf("toolCalled %+v toolReturned %+v", called, ret)
	}
	if called.Transport != "" && called.Transport != bundle.TransportHTTP && called.Transport != bundle.TransportNative {
		t.Fatalf("transport %q is none of RFC 0064's", called.Transport)
	}
	if !strings.Contains(h.logs.String(), `"via":"turn"`) {
		t.Fatalf("the audit log line has no via")
	}
}

// checkNoSecret: neither the token nor an argument's content in the
// outcome, the events or the logs.
func (h *harness) checkNoSecret(t *testing.T, out engine.Outcome) {
	t.Helper()
	h.sink.mu.Lock()
	events, _ := json.Marshal(h.sink.events)
	h.sink.mu.Unlock()
	all, _ := json.Marshal(out)
	for _, where := range []struct{ name, text string }{{"outcome", string(all)}, {"events", string(events)}, {"logs", h.logs.String()}} {
		for _, c := range []string{tokenCanary, argCanary} {
			if strings.Contains(where.text, c) {
				t.Fatalf("%s holds the canary %q:\n%s", where.name, c, where.text)
			}
		}
	}
}

// TestTokenEchoedUpstreamIsScrubbed: a careless upstream that echoes the
// bearer token does not hand it to the model.
func TestTokenEchoedUpstreamIsScrubbed(t *testing.T) {
	h := newHarness(t)
	h.tokens.res = oauth.Result{Status: oauth.StatusReady, AccessToken: domain.NewSecret(tokenCanary), TokenType: "bearer"}
	out := h.tools.Invoke(context.Background(), invocation(turnOf("assistant", alice), "c1", "get_menu", `{"day":"mon"}`, "get_menu"))
	if out.Kind != engine.OutcomeOK || !strings.Contains(string(out.Result), `"auth":"Bearer [REDACTED]"`) {
		t.Fatalf("outcome %s %s", out.Kind, out.Result)
	}
	h.checkNoSecret(t, out)
}

// TestRateLimit: the per-(principal, tool) limit answers the model with
// a structured result it can wait on, and the tool does not run.
func TestRateLimit(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	var last engine.Outcome
	for i := range 3 { // burst 2
		last = h.tools.Invoke(ctx, invocation(turnOf("assistant", alice), fmt.Sprintf("c%d", i), "echo", `{}`, "echo"))
	}
	if last.Kind != engine.OutcomeError || errorCode(t, last) != toolhooks.CodeRateLimited {
		t.Fatalf("third call: %s %s", last.Kind, last.Result)
	}
	var r struct {
		Error struct {
			RetryAfterSeconds int `json:"retryAfterSeconds"`
		} `json:"error"`
	}
	_ = json.Unmarshal(last.Result, &r)
	if r.Error.RetryAfterSeconds < 1 {
		t.Fatalf("retryAfterSeconds %d in %s", r.Error.RetryAfterSeconds, last.Result)
	}
	// Another principal has its own bucket.
	if out := h.tools.Invoke(ctx, invocation(turnOf("assistant", bob), "c9", "echo", `{}`, "echo")); out.Kind != engine.OutcomeOK {
		t.Fatalf("bob's first call: %s %s", out.Kind, out.Result)
	}
}

// TestOutcomeMapping: every verdict becomes a result the model can read;
// one the mapping does not know is an error result, never a pass.
func TestOutcomeMapping(t *testing.T) {
	ok := &toolhooks.Result{Status: toolhooks.StatusOK, Output: json.RawMessage(`{"a":"x&y"}`)}
	for _, tc := range []struct {
		name     string
		out      toolhooks.Outcome
		wantKind string
		want     string
	}{
		{"ok keeps the output as is", toolhooks.Outcome{Verdict: toolhooks.VerdictOK, Result: ok}, engine.OutcomeOK, `{"status":"ok","output":{"a":"x&y"}}`},
		{"unavailable is the hooks' error result", toolhooks.Outcome{Verdict: toolhooks.VerdictUnavailable, Result: &toolhooks.Result{Status: "error", Error: &toolhooks.ToolError{Code: "E_TOOL_RATE_LIMIT_UNAVAILABLE", Name: "RateLimitUnavailable", Message: "m"}}},
			engine.OutcomeError, `{"status":"error","error":{"message":"m","name":"RateLimitUnavailable","code":"E_TOOL_RATE_LIMIT_UNAVAILABLE"}}`},
		{"forbidden names the scopes", toolhooks.Outcome{Verdict: toolhooks.VerdictForbidden, RequiredScopes: []string{"a", "b"}},
			engine.OutcomeError, `{"status":"error","error":{"message":"the user this turn acts for lacks a scope this tool requires (a b); the tool was not run","name":"ToolForbidden","code":"E_TOOL_FORBIDDEN"}}`},
		{"rate limited rounds the wait up", toolhooks.Outcome{Verdict: toolhooks.VerdictRateLimited, RetryAfter: 1500 * 1e6},
			engine.OutcomeError, `{"status":"error","error":{"message":"too many calls of this tool; retry in 2 seconds; the tool was not run","name":"ToolRateLimited","code":"E_TOOL_RATE_LIMITED","retryAfterSeconds":2}}`},
		{"consent without a session cannot park", toolhooks.Outcome{Verdict: toolhooks.VerdictOK, Result: &toolhooks.Result{Status: toolhooks.ResultAuthorizationRequired, Authorization: json.RawMessage(`{"authorizationUrl":"https://x"}`)}},
			engine.OutcomeError, `{"status":"error","error":{"message":"the tool needs the user's consent but named no auth session","name":"AuthError","code":"E_TOOL_AUTH"}}`},
		{"an unknown verdict", toolhooks.Outcome{Verdict: "maybe", Result: ok}, engine.OutcomeError, `{"status":"error","error":{"message":"the tool hooks ended the call without a result","name":"Internal","code":"E_TOOL"}}`},
		{"ok without a result", toolhooks.Outcome{Verdict: toolhooks.VerdictOK}, engine.OutcomeError, `{"status":"error","error":{"message":"the tool hooks ended the call without a result","name":"Internal","code":"E_TOOL"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := outcome(tc.out, 0)
			if got.Kind != tc.wantKind || string(got.Result) != tc.want {
				t.Fatalf("outcome %s %s\nwant %s %s", got.Kind, got.Result, tc.wantKind, tc.want)
			}
		})
	}
}

// TestNoToolsWithoutAnAgent: a call of a turn whose agent the bundle
// lacks is refused as outside the catalog, and logged.
func TestNoToolsWithoutAnAgent(t *testing.T) {
	h := newHarness(t)
	out := h.tools.Invoke(context.Background(), invocation(turnOf("ghost", alice), "c1", "echo", `{}`, "echo"))
	if out.Kind != engine.OutcomeError || errorCode(t, out) != toolhooks.CodeNotInCatalog {
		t.Fatalf("outcome %s %s", out.Kind, out.Result)
	}
	if !strings.Contains(h.logs.String(), `agent \"ghost\" is not in the bundle`) {
		t.Fatalf("logs:\n%s", h.logs.String())
	}
}

// TestNotInCatalogSuggests: the model's result for a tool outside the
// step's catalog says what to do instead and names step.tools (Goondan's
// ToolError.suggestion, a SHOULD).
func TestNotInCatalogSuggests(t *testing.T) {
	h := newHarness(t)
	out := h.tools.Invoke(context.Background(), invocation(turnOf("assistant", alice), "c1", "order", `{}`, "echo"))
	var r struct {
		Error struct{ Code, Suggestion string } `json:"error"`
	}
	if err := json.Unmarshal(out.Result, &r); err != nil || r.Error.Code != toolhooks.CodeNotInCatalog || !strings.Contains(r.Error.Suggestion, "step.tools") {
		t.Fatalf("result %s: want %s with a suggestion naming step.tools", out.Result, toolhooks.CodeNotInCatalog)
	}
}
