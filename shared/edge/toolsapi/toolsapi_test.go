package toolsapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/observe/metrics"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
)

// fakeVerifier maps a token to claims (the real verifier has its own tests).
type fakeVerifier map[string]jwtauth.Claims

func (f fakeVerifier) Verify(_ context.Context, raw string) (jwtauth.Claims, error) {
	if c, ok := f[raw]; ok {
		return c, nil
	}
	return nil, &jwtauth.Error{Reason: "bad_signature"}
}

const canary = "canary-9c8b7a6f5e4d3c2b1a"

const upstreamToken = "upstream-token-5f4e3d2c1b0a"

// testBundle is the bundle of these tests; UPSTREAM is the menu server.
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
metadata: {name: echo}
spec: {id: "demo:echo", name: echo, description: echoes, inputSchema: {type: object}, sourceId: demo, transport: native, requiredScopes: ["tools:echo"]}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: delete}
spec: {id: "demo:delete", name: delete, description: deletes, inputSchema: {type: object}, sourceId: demo, transport: native, requiredScopes: ["tools:delete"]}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: old}
spec: {id: "demo:old", name: old, description: retired, inputSchema: {type: object}, sourceId: demo, transport: native, enabled: false}
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
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: basic}
spec: {explicitToolIds: ["demo:echo", "demo:old", "menu:get"]}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: danger}
spec: {explicitToolIds: ["demo:delete"]}
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
kind: AccessPolicy
metadata: {name: ops}
spec: {claimMatchers: [{claim: team, operator: equals, value: ops}], allowedGroupIds: [danger]}
---
apiVersion: agents.example.io/v1alpha1
kind: Skill
metadata: {name: deploy}
spec: {description: deploy a service, content: steps, scope: global}
---
apiVersion: agents.example.io/v1alpha1
kind: Skill
metadata: {name: secret-runbook}
spec: {description: deploy runbook, content: tenant b only, scope: tenant, tenantId: b}
`

// tokens is getAccessToken for the menu tool.
type tokens struct {
	mu   sync.Mutex
	res  oauth.Result
	auth []domain.TurnAuth
}

func (f *tokens) GetAccessToken(_ context.Context, req oauth.TokenRequest) oauth.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.auth = append(f.auth, req.Auth)
	return f.res
}

// TokenRefused answers as GetAccessToken: no upstream here refuses a token.
func (f *tokens) TokenRefused(ctx context.Context, req oauth.TokenRequest, _ domain.Secret) oauth.Result {
	return f.GetAccessToken(ctx, req)
}

// recorder counts resolutions.
type recorder struct {
	mu  sync.Mutex
	all []metrics.Resolution
}

func (r *recorder) Resolution(_ context.Context, x metrics.Resolution) {
	r.mu.Lock()
	r.all = append(r.all, x)
	r.mu.Unlock()
}

type harness struct {
	h        http.Handler
	api      *API
	tokens   *tokens
	metrics  *recorder
	upstream *httptest.Server
	seen     chan *http.Request
}

func newAPI(t *testing.T, seam bool) http.Handler {
	t.Helper()
	return newHarness(t, defaultVerifier(), seam).h
}

func defaultVerifier() fakeVerifier {
	return fakeVerifier{
		"alice":       {"sub": "alice", "scope": "tools:echo", "tenant_id": "a", "skills": []any{"secret-runbook", "refunds"}, "agentauth_subjects": map[string]any{"user": "menu:user:alice"}},
		"bob":         {"sub": "bob", "scope": "tools:echo", "tenant_id": "b", "skills": []any{"secret-runbook", "refunds"}},
		"ops":         {"sub": "olga", "team": "ops", "scope": "tools:echo"},
		"admin":       {"sub": "root", "scope": "agentauth:admin"},
		"admin-null":  {"sub": "nil", "scope": "agentauth:admin", "tenant_id": nil},
		"platform":    {"sub": "plat", "scope": "agentauth:platform-admin"},
		"stranger":    {"sub": "x"},
		"admin-a":     {"sub": "ann", "scope": "agentauth:admin", "tenant_id": "a"},
		"no-admin-a":  {"sub": "al", "scope": "tools:echo", "tenant_id": "a"},
		"menu-reader": {"sub": "mia", "scope": "menu.read", "tenant_id": "a", "agentauth_subjects": map[string]any{"user": "menu:user:mia"}},
	}
}

func newHarness(t testing.TB, verifier Verifier, seam bool) *harness {
	t.Helper()
	return newHarnessWith(t, verifier, seam, nil)
}

// newHarnessWith is newHarness whose http tools get their tokens from src
// (nil: the harness's fake, tokens).
func newHarnessWith(t testing.TB, verifier Verifier, seam bool, src func(*bundle.Bundle) httptool.TokenSource) *harness {
	t.Helper()
	hs := &harness{tokens: &tokens{}, metrics: &recorder{}, seen: make(chan *http.Request, 16)}
	hs.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.seen <- r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"path":"`+r.URL.Path+`"}`)
	}))
	t.Cleanup(hs.upstream.Close)
	b, err := bundle.Parse([]bundle.File{{Name: "tools.yaml", Data: []byte(strings.ReplaceAll(testBundle, "UPSTREAM", hs.upstream.URL))}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	plane, err := toolplane.New(context.Background(), toolplane.Config{Bundle: b, Tenants: toolplane.NewMemoryTenants(), AllowPrivateUpstreams: true})
	if err != nil {
		t.Fatal(err)
	}
	var tokenSource httptool.TokenSource = hs.tokens
	if src != nil {
		tokenSource = src(b)
	}
	lim, err := ratelimit.NewMemory(ratelimit.Limits{Default: ratelimit.Limit{Rate: 0.001, Burst: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{
		Verifier: verifier,
		Plane:    plane,
		Runner:   httptool.New(httptool.Options{Tokens: tokenSource, AllowPrivateUpstreams: true}),
		Native: map[string]toolhooks.Invoker{
			"demo:echo": func(_ context.Context, a json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`{"echoed":true}`), nil
			},
			"demo:delete": func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return nil, errors.New("must not run")
			},
		},
		Hooks:   &toolhooks.Hooks{Limiter: lim},
		Seam:    seam,
		Metrics: hs.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	hs.h, hs.api = api.Handler(), api
	return hs
}

func call(t *testing.T, h http.Handler, method, path, token, body string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var m map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &m)
	return rec, m
}

func names(m map[string]any) string {
	var out []string
	for _, e := range m["data"].([]any) {
		out = append(out, e.(map[string]any)["name"].(string))
	}
	return strings.Join(out, ",")
}

func TestDiscoveryRoutes(t *testing.T) {
	h := newAPI(t, false)
	if rec, m := call(t, h, "GET", "/v1/agents/tools", "", ""); rec.Code != 401 || m["error"].(map[string]any)["details"].(map[string]any)["reason"] != "missing_token" {
		t.Fatalf("no token: %d %v", rec.Code, m)
	}
	if rec, m := call(t, h, "GET", "/v1/agents/tools", "forged", ""); rec.Code != 401 || m["error"].(map[string]any)["details"].(map[string]any)["reason"] != "bad_signature" {
		t.Fatalf("forged: %d %v", rec.Code, m)
	}
	if _, m := call(t, h, "GET", "/v1/agents/tools", "alice", ""); names(m) != "echo,get_menu" {
		t.Fatalf("alice sees %s", names(m))
	}
	if _, m := call(t, h, "GET", "/v1/agents/tools", "ops", ""); names(m) != "delete,echo,get_menu" {
		t.Fatalf("ops sees %s", names(m))
	}
	// The admin flags, each alone, are refused to a caller without an
	// admin scope (issue 9 item 22: skip_cache was untested).
	for _, flags := range []string{"include_disabled=true", "skip_cache=true", "include_disabled=true&skip_cache=true"} {
		if rec, m := call(t, h, "GET", "/v1/agents/tools?"+flags, "alice", ""); rec.Code != 403 || m["error"].(map[string]any)["code"] != "forbidden" {
			t.Fatalf("non-admin %s: %d %v", flags, rec.Code, m)
		}
	}
	for _, admin := range []string{"admin", "admin-a", "platform"} {
		if rec, m := call(t, h, "GET", "/v1/agents/tools?include_disabled=true&skip_cache=true", admin, ""); rec.Code != 200 || m["data"] == nil {
			t.Fatalf("%s: %d %v", admin, rec.Code, m)
		}
	}
}

func TestSkillsComeFromClaimsNotQuery(t *testing.T) {
	h := newAPI(t, false)
	_, m := call(t, h, "GET", "/v1/agents/skills?q=deploy&tenant_id=b&skills=secret-runbook", "alice", "")
	if names(m) != "deploy" {
		t.Fatalf("alice (tenant a) sees %s: query parameters must not widen the tenant", names(m))
	}
	if rec, _ := call(t, h, "GET", "/v1/agents/skills?top_k=0", "alice", ""); rec.Code != 400 {
		t.Fatalf("top_k=0: %d", rec.Code)
	}
}

func TestInvokeThroughHooks(t *testing.T) {
	h := newAPI(t, false)
	rec, m := call(t, h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"echo","args":{"q":"`+canary+`"}}`)
	if rec.Code != 200 || m["toolReturned"].(map[string]any)["status"] != "ok" || m["result"].(map[string]any)["output"] == nil {
		t.Fatalf("echo: %d %v", rec.Code, m)
	}
	// ops sees delete but lacks its scope: forbidden, never runs.
	rec, m = call(t, h, "POST", "/v1/tools/invoke", "ops", `{"toolName":"delete","args":{}}`)
	e := m["error"].(map[string]any)
	details := e["details"].(map[string]any)
	if rec.Code != 403 || details["scope"] != "tool" || details["toolName"] != "delete" || m["toolReturned"].(map[string]any)["durationMs"] != nil ||
		e["code"] != "forbidden" || e["message"] == "" || e["requestId"] != rec.Header().Get("X-Request-Id") {
		t.Fatalf("delete: %d %v", rec.Code, m)
	}
	// alice cannot see delete: not in her catalog.
	rec, m = call(t, h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"delete","args":{}}`)
	if e := m["result"].(map[string]any)["error"].(map[string]any); e["code"] != toolhooks.CodeNotInCatalog ||
		e["message"] != `tool "delete" is not among the tools this caller may see` || e["suggestion"] != toolhooks.SuggestionNotVisible {
		t.Fatalf("outside the catalog: %d %v", rec.Code, m)
	}
	// A near miss of a tool she may see is named; one she may not see
	// (delete, for "delet") never is.
	_, m = call(t, h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"ecoh","args":{}}`)
	if e := m["result"].(map[string]any)["error"].(map[string]any); e["message"] != `tool "ecoh" is not among the tools this caller may see (did you mean "echo"?)` {
		t.Fatalf("a near miss: %v", m)
	}
	_, m = call(t, h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"delet","args":{}}`)
	if e := m["result"].(map[string]any)["error"].(map[string]any); strings.Contains(e["message"].(string), "did you mean") {
		t.Fatalf("a near miss of a tool alice may not see was suggested: %v", m)
	}
	// Burst 2 per (principal, tool): the third echo is rate limited, the
	// limit of another principal is untouched.
	call(t, h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"echo","args":{}}`)
	rec, m = call(t, h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"echo","args":{}}`)
	if rec.Code != 429 || rec.Header().Get("Retry-After") == "" || m["error"].(map[string]any)["code"] != "rate_limited" {
		t.Fatalf("third call: %d %v", rec.Code, m)
	}
	if rec, _ := call(t, h, "POST", "/v1/tools/invoke", "ops", `{"toolName":"echo","args":{}}`); rec.Code != 200 {
		t.Fatalf("another principal: %d", rec.Code)
	}
	if rec, _ := call(t, h, "POST", "/v1/tools/invoke", "alice", `{"tool":"echo"}`); rec.Code != 400 {
		t.Fatalf("bad body: %d", rec.Code)
	}
}

func TestSeamAndCapabilities(t *testing.T) {
	if rec, _ := call(t, newAPI(t, false), "GET", "/.well-known/openwop", "", ""); rec.Code != 404 {
		t.Fatalf("capability document without the flag: %d", rec.Code)
	}
	h := newAPI(t, true)
	_, caps := call(t, h, "GET", "/.well-known/openwop", "", "")
	th := caps["capabilities"].(map[string]any)["toolHooks"].(map[string]any)
	if th["supported"] != true || th["perToolRateLimit"] != true {
		t.Fatalf("capabilities %v", caps)
	}
	for _, tc := range []struct {
		body   string
		code   int
		status string
	}{
		{`{"principal":"p","toolName":"web.search","requiredScopes":["web:read"],"grantedScopes":["web:read"],"args":{"k":"` + canary + `"}}`, 200, "ok"},
		{`{"principal":"p","toolName":"db.delete","requiredScopes":["db:write"],"grantedScopes":["web:read"]}`, 403, "forbidden"},
		{`{"principal":"p","toolName":"web.search","simulateRateLimitExhausted":true}`, 429, "rate_limited"},
		{`{"principal":"p","toolName":"web.search","simulateToolError":true}`, 200, "error"},
	} {
		rec, m := call(t, h, "POST", "/v1/host/sample/toolhooks/invoke", "alice", tc.body)
		if rec.Code != tc.code || m["toolReturned"].(map[string]any)["status"] != tc.status || m["toolCalled"].(map[string]any)["argsHash"] == "" {
			t.Fatalf("%s: %d %v", tc.body, rec.Code, m)
		}
		if strings.Contains(rec.Body.String(), canary) {
			t.Fatal("canary in a seam response")
		}
		// Failure honesty: an error's toolReturned carries {code, message}.
		if e, has := m["toolReturned"].(map[string]any)["error"].(map[string]any); (tc.status == "error") != has || has && (e["code"] == "" || e["message"] == "") {
			t.Fatalf("%s: toolReturned.error %v", tc.body, m["toolReturned"])
		}
	}
}

// TestBodiesFollowTheEdgeRules: the tool routes read bodies by the same
// rules as the runtime routes (shared/edge/httpx), with their own size
// limits, and answer with the one error body.
func TestBodiesFollowTheEdgeRules(t *testing.T) {
	h := newAPI(t, true)
	bigArgs := `{"toolName":"echo","args":{"q":"` + strings.Repeat("a", MaxToolBody) + `"}}`
	for _, tc := range []struct {
		name, path, token, body, contentType string
		status                               int
		code, mentions                       string
	}{
		{"invoke over 256 KiB", "/v1/tools/invoke", "alice", bigArgs, "application/json", 413, "payloadTooLarge", "larger than 262144 bytes"},
		{"invoke as a form post", "/v1/tools/invoke", "alice", `{"toolName":"echo"}`, "application/x-www-form-urlencoded", 415, "unsupportedMediaType", "application/json"},
		{"invoke with an unknown field", "/v1/tools/invoke", "alice", `{"toolName":"echo","arguments":{}}`, "application/json", 400, "invalidRequest", `unknown field "arguments"`},
		{"invoke with data after the object", "/v1/tools/invoke", "alice", `{"toolName":"echo"}{}`, "", 400, "invalidRequest", "after the JSON object"},
		{"invoke with a wrong type", "/v1/tools/invoke", "alice", `{"toolName":7}`, "", 400, "invalidRequest", "field toolName"},
		{"seam with an unknown field", "/v1/host/sample/toolhooks/invoke", "alice", `{"principal":"p","toolName":"x","scopes":[]}`, "", 400, "invalidRequest", `unknown field "scopes"`},
		{"upload as text", "/v1/admin/tenants/a/skills", "admin-a", `{"name":"x","description":"d","content":"c"}`, "text/plain", 415, "unsupportedMediaType", "application/json"},
		{"upload over 256 KiB", "/v1/admin/tenants/a/skills", "admin-a", strings.Repeat(" ", domain.MaxTenantSpecBytes+1), "", 413, "payloadTooLarge", "larger than"},
		{"no token", "/v1/tools/invoke", "", `{"toolName":"echo"}`, "", 401, "unauthenticated", "bearer JWT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var b struct {
				Error struct {
					Code, Message, RequestID string
					Details                  map[string]any
				}
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &b)
			if rec.Code != tc.status || b.Error.Code != tc.code || !strings.Contains(b.Error.Message, tc.mentions) {
				t.Fatalf("%d %.300s, want %d %s mentioning %q", rec.Code, rec.Body, tc.status, tc.code, tc.mentions)
			}
			if b.Error.RequestID == "" || b.Error.RequestID != rec.Header().Get("X-Request-Id") {
				t.Fatalf("request id %q, header %q", b.Error.RequestID, rec.Header().Get("X-Request-Id"))
			}
			if tc.status == 401 && b.Error.Details["reason"] != "missing_token" {
				t.Fatalf("401 without details.reason: %s", rec.Body)
			}
		})
	}
}
