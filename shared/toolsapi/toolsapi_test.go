package toolsapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/discovery"
	"github.com/agentauth/agentauth/shared/jwtauth"
	"github.com/agentauth/agentauth/shared/ratelimit"
	"github.com/agentauth/agentauth/shared/skills"
	"github.com/agentauth/agentauth/shared/toolcatalog"
	"github.com/agentauth/agentauth/shared/toolhooks"
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

func newAPI(t *testing.T, seam bool) http.Handler {
	t.Helper()
	return newAPIWith(t, fakeVerifier{
		"alice": {"sub": "alice", "scope": "tools:echo", "tenant_id": "a", "skills": []any{"secret-runbook"}},
		"ops":   {"sub": "olga", "team": "ops", "scope": "tools:echo"},
		"admin": {"sub": "root", "scope": "agentauth:admin"},
	}, seam)
}

func newAPIWith(t *testing.T, verifier Verifier, seam bool) http.Handler {
	t.Helper()
	tool := func(id, name string, enabled bool) discovery.Tool {
		return discovery.Tool{ID: id, Name: name, Description: name, InputSchema: json.RawMessage(`{"type":"object"}`), SourceID: "demo", Enabled: enabled}
	}
	ix, err := discovery.NewIndex(discovery.Config{
		Tools: []discovery.Tool{tool("demo:echo", "echo", true), tool("demo:delete", "delete", true), tool("demo:old", "old", false)},
		Groups: []discovery.Group{{ID: "basic", Active: true, ExplicitToolIDs: []string{"demo:echo", "demo:old"}},
			{ID: "danger", Active: true, ExplicitToolIDs: []string{"demo:delete"}}},
		Policies: []discovery.Policy{
			{ID: "everyone", Active: true, Matchers: []discovery.Matcher{{Claim: "sub", Operator: "exists"}}, GroupIDs: []string{"basic"}},
			{ID: "ops", Active: true, Matchers: []discovery.Matcher{{Claim: "team", Operator: "equals", Value: "ops"}}, GroupIDs: []string{"danger"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sk, err := skills.NewIndex([]skills.Skill{
		{Name: "deploy", Description: "deploy a service", Content: "steps", Scope: skills.ScopeGlobal},
		{Name: "secret-runbook", Description: "deploy runbook", Content: "tenant b only", Scope: skills.ScopeTenant, TenantID: "b"},
	})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.NewMemory(ratelimit.Limits{Default: ratelimit.Limit{Rate: 0.001, Burst: 2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{
		Verifier: verifier,
		Catalog:  toolcatalog.New(ix, "rev", toolcatalog.Settings{}),
		Skills:   sk,
		Tools: map[string]Tool{
			"echo": {Tool: toolhooks.Tool{Name: "echo", RequiredScopes: []string{"tools:echo"}, Transport: "native"}, Run: func(_ context.Context, a json.RawMessage) (json.RawMessage, error) {
				return json.RawMessage(`{"echoed":true}`), nil
			}},
			"delete": {Tool: toolhooks.Tool{Name: "delete", RequiredScopes: []string{"tools:delete"}, Transport: "native"}, Run: func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return nil, errors.New("must not run")
			}},
		},
		Hooks: &toolhooks.Hooks{Limiter: lim},
		Seam:  seam,
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	return mux
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
	if _, m := call(t, h, "GET", "/v1/agents/tools", "alice", ""); names(m) != "echo" {
		t.Fatalf("alice sees %s", names(m))
	}
	if _, m := call(t, h, "GET", "/v1/agents/tools", "ops", ""); names(m) != "delete,echo" {
		t.Fatalf("ops sees %s", names(m))
	}
	if rec, _ := call(t, h, "GET", "/v1/agents/tools?include_disabled=true", "alice", ""); rec.Code != 403 {
		t.Fatalf("non-admin include_disabled: %d", rec.Code)
	}
	if _, m := call(t, h, "GET", "/v1/agents/tools?include_disabled=true&skip_cache=true", "admin", ""); m["data"] == nil {
		t.Fatalf("admin: %v", m)
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
	details := m["error"].(map[string]any)["details"].(map[string]any)
	if rec.Code != 403 || details["scope"] != "tool" || details["toolName"] != "delete" || m["toolReturned"].(map[string]any)["durationMs"] != nil {
		t.Fatalf("delete: %d %v", rec.Code, m)
	}
	// alice cannot see delete: not in her catalog.
	rec, m = call(t, h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"delete","args":{}}`)
	if m["result"].(map[string]any)["error"].(map[string]any)["code"] != toolhooks.CodeNotInCatalog {
		t.Fatalf("outside the catalog: %d %v", rec.Code, m)
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
	}
}
