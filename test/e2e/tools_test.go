package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/jwttest"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// toolsBundle: an http tool on the provider's userinfo endpoint that needs
// the user's consent (e2e-user), an http tool on a local orders service
// without auth, the groups and policies that show them, a global skill.
func toolsBundle(p *e2ekit.Provider, orders string) string {
	return appYAML(p, "e2e-user", "user", "  subjectVerification: {template: \"demo:user:{sub}\"}\n") + fmt.Sprintf(`---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: whoami}
spec:
  id: "demo:whoami"
  name: whoami
  description: The signed-in user's profile at the demo provider
  inputSchema: {type: object, additionalProperties: false}
  sourceId: demo
  sourcePath: /me
  method: GET
  transport: http
  url: %s
  auth: {oauthAppRef: e2e-user}
  requiredScopes: [profile.read]
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: orders}
spec:
  id: "orders:list"
  name: list_orders
  description: Lists orders
  inputSchema: {type: object, properties: {note: {type: string}, key: {type: string}}}
  sourceId: orders
  sourcePath: /orders
  method: GET
  transport: http
  url: %s
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: basic}
spec: {selectors: [{source: "regex:(demo|orders)$", requiredTags: []}]}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: uploads}
spec: {selectors: [{requiredTags: [tenant]}]}
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: staff}
spec: {claimMatchers: [{claim: scope, operator: exists}], allowedGroupIds: [basic, uploads]}
---
apiVersion: agents.example.io/v1alpha1
kind: Skill
metadata: {name: deploy}
spec: {description: How to deploy a service, content: "Run the pipeline, then watch the canary.", scope: global}
`, p.Issuer, orders)
}

// jwtCall calls a tool route with a bearer JWT.
func (s *server) jwtCall(t *testing.T, method, path, jwt string, body any) (int, http.Header, map[string]any) {
	t.Helper()
	code, h, raw, out := s.request(t, method, path, jwt, body, 30*time.Second)
	s.record(method+" "+path, raw)
	return code, h, out
}

func manifestNames(m map[string]any) string {
	var out []string
	for _, e := range m["data"].([]any) {
		out = append(out, e.(map[string]any)["name"].(string))
	}
	return strings.Join(out, ",")
}

// TestToolPlaneEndToEnd runs two `agentauth serve` processes on one home
// with JWTs signed by a local JWKS server, and calls every tool route:
// discovery, skills, invocation of an http tool that needs a user's
// consent (given in Chromium on the provider's pages), the per-(principal,
// tool) rate limit across both processes, tenant uploads seen by the other
// process, the RFC 0064 seam and the capability document — then scans
// every response and log for the canary and the JWTs.
func TestToolPlaneEndToEnd(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const canary = "canary-e2e-7f3a9c1d5b"
	var ordersMu sync.Mutex
	var ordersSeen []string
	orders := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ordersMu.Lock()
		ordersSeen = append(ordersSeen, r.URL.Path)
		ordersMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"orders":[{"id":1}],"path":"`+r.URL.Path+`"}`)
	}))
	defer orders.Close()

	iss := jwttest.Start(t)
	portA, portB := freePort(t), freePort(t)
	baseA := fmt.Sprintf("http://127.0.0.1:%d", portA)
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{Clients: []e2ekit.Client{{
		ClientID: clientID, ClientSecret: clientSecret,
		RedirectURIs: []string{baseA + "/oauth/callback/e2e-user"},
		GrantTypes:   []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken},
	}}})
	env := []string{"E2E_CLIENT_SECRET=" + clientSecret, "AGENTAUTH_TOOLHOOKS_SEAM=1",
		"AGENTAUTH_TOOL_RATE_LIMITS=list_orders=3/h", "AGENTAUTH_TOOLS_ALLOW_PRIVATE_UPSTREAMS=1", "AGENTAUTH_UPLOADS_CHECK_SECONDS=1"}
	for k, v := range iss.Env() {
		env = append(env, k+"="+v)
	}
	home := t.TempDir()
	files := map[string]string{"tools.yaml": toolsBundle(p, orders.URL)}
	a := startServer(t, portA, home, files, env...)
	b := startServer(t, portB, home, files, env...)
	browser := e2ekit.StartBrowser(t)

	alice := iss.Mint(t, map[string]any{"sub": "alice", "scope": "profile.read", "tenant_id": "acme", "skills": []string{"refunds"},
		"agentauth_subjects": map[string]any{"user": "demo:user:alice"}})
	bob := iss.Mint(t, map[string]any{"sub": "bob", "scope": "orders.read", "tenant_id": "globex", "skills": "refunds"})
	admin := iss.Mint(t, map[string]any{"sub": "ann", "scope": "agentauth:admin", "tenant_id": "acme"})
	expired := iss.Mint(t, map[string]any{"sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()})
	jwts := []string{alice, bob, admin, expired}

	t.Run("unauthenticated callers get 401 with a reason", func(t *testing.T) {
		for name, tok := range map[string]string{"no token": "", "expired": expired, "garbage": "a.b.c"} {
			code, _, out := a.jwtCall(t, "GET", "/v1/agents/tools", tok, nil)
			if code != 401 || out["error"].(map[string]any)["details"].(map[string]any)["reason"] == "" {
				t.Fatalf("%s: %d %v", name, code, out)
			}
		}
	})

	t.Run("discovery and skills", func(t *testing.T) {
		code, _, out := a.jwtCall(t, "GET", "/v1/agents/tools", alice, nil)
		if code != 200 || manifestNames(out) != "whoami,list_orders" {
			t.Fatalf("alice's tools: %d %v", code, out)
		}
		code, _, out = b.jwtCall(t, "GET", "/v1/agents/skills?q=deploy%20canary&top_k=5", alice, nil)
		data := out["data"].([]any)
		if code != 200 || len(data) != 1 || data[0].(map[string]any)["relevance_score"].(float64) <= 0 {
			t.Fatalf("skills: %d %v", code, out)
		}
		if code, _, _ := a.jwtCall(t, "GET", "/v1/agents/tools?include_disabled=true", alice, nil); code != 403 {
			t.Fatalf("include_disabled without admin: %d", code)
		}
	})

	t.Run("http tool with the user's consent", func(t *testing.T) {
		code, _, out := a.jwtCall(t, "POST", "/v1/tools/invoke", alice, map[string]any{"toolName": "whoami", "args": map[string]any{}})
		res := out["result"].(map[string]any)
		if code != 200 || res["status"] != "authorization_required" {
			t.Fatalf("first call: %d %v", code, out)
		}
		r, err := browser.Authorize(ctx, res["authorization"].(map[string]any)["authorizationUrl"].(string), "alice")
		if err != nil || !strings.Contains(r.BodyText, "Connected") {
			t.Fatalf("consent: %v %+v", err, r)
		}
		// The other process uses the stored grant.
		code, _, out = b.jwtCall(t, "POST", "/v1/tools/invoke", alice, map[string]any{"toolName": "whoami", "args": map[string]any{}})
		res = out["result"].(map[string]any)
		if code != 200 || res["status"] != "ok" || res["output"].(map[string]any)["sub"] != "alice" {
			t.Fatalf("second call: %d %v", code, out)
		}
		// bob may see whoami (policy) but lacks profile.read: 403, never run.
		code, _, out = a.jwtCall(t, "POST", "/v1/tools/invoke", bob, map[string]any{"toolName": "whoami", "args": map[string]any{}})
		if code != 403 || out["error"].(map[string]any)["details"].(map[string]any)["requiredScopes"].([]any)[0] != "profile.read" {
			t.Fatalf("bob: %d %v", code, out)
		}
	})

	t.Run("rate limit holds across both processes", func(t *testing.T) {
		ordersMu.Lock()
		before := len(ordersSeen)
		ordersMu.Unlock()
		servers := []*server{a, b, a, b, a}
		var codes []int
		for _, s := range servers {
			code, h, out := s.jwtCall(t, "POST", "/v1/tools/invoke", alice, map[string]any{"toolName": "list_orders",
				"args": map[string]any{"note": canary, "key": "sk-live-4f3e2d1c0b9a8f7e6d5c4b3a"}})
			codes = append(codes, code)
			if code == 429 && (h.Get("Retry-After") == "" || out["error"].(map[string]any)["code"] != "rate_limited" || out["toolReturned"].(map[string]any)["durationMs"] != nil) {
				t.Fatalf("429 answer: %v %v", h, out)
			}
		}
		if fmt.Sprint(codes) != "[200 200 200 429 429]" {
			t.Fatalf("codes = %v, want three allowed then 429 from either process", codes)
		}
		ordersMu.Lock()
		got := len(ordersSeen) - before
		ordersMu.Unlock()
		if got != 3 {
			t.Fatalf("upstream called %d times, want 3", got)
		}
		// Another principal has its own budget.
		if code, _, out := b.jwtCall(t, "POST", "/v1/tools/invoke", bob, map[string]any{"toolName": "list_orders", "args": map[string]any{}}); code != 200 || out["result"].(map[string]any)["status"] != "ok" {
			t.Fatalf("bob: %d %v", code, out)
		}
	})

	t.Run("tenant uploads reach the other process and stay in the tenant", func(t *testing.T) {
		code, _, out := a.jwtCall(t, "POST", "/v1/admin/tenants/acme/skills", admin, map[string]any{"name": "refunds", "description": "Refund an order", "content": "Open the refunds console."})
		if code != 201 {
			t.Fatalf("skill upload: %d %v", code, out)
		}
		code, _, out = a.jwtCall(t, "POST", "/v1/admin/tenants/acme/tools", admin, map[string]any{"id": "acme:open", "name": "open_orders",
			"description": "acme's open orders", "inputSchema": map[string]any{"type": "object"}, "sourceId": "acme", "sourcePath": "/acme/open",
			"method": "GET", "transport": "http", "url": orders.URL, "tags": []string{"tenant"}})
		if code != 201 {
			t.Fatalf("tool upload: %d %v", code, out)
		}
		if code, _, _ := a.jwtCall(t, "POST", "/v1/admin/tenants/globex/skills", admin, map[string]any{"name": "x", "description": "d", "content": "c"}); code != 403 {
			t.Fatalf("acme's admin uploading for globex: %d", code)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, _, out = b.jwtCall(t, "GET", "/v1/agents/skills?q=refund", alice, nil)
			if strings.Contains(fmt.Sprint(out["data"]), "refunds") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process B never saw the upload: %v", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
		_, _, out = b.jwtCall(t, "GET", "/v1/agents/tools", alice, nil)
		if manifestNames(out) != "open_orders,whoami,list_orders" {
			t.Fatalf("alice on B sees %s", manifestNames(out))
		}
		_, _, out = b.jwtCall(t, "GET", "/v1/agents/tools", bob, nil)
		if manifestNames(out) != "whoami,list_orders" {
			t.Fatalf("bob (globex) sees %s", manifestNames(out))
		}
		if _, _, out = b.jwtCall(t, "GET", "/v1/agents/skills?q=refund", bob, nil); strings.Contains(fmt.Sprint(out["data"]), "refunds") {
			t.Fatalf("bob (globex) sees acme's skill: %v", out)
		}
		code, _, out = b.jwtCall(t, "POST", "/v1/tools/invoke", alice, map[string]any{"toolName": "open_orders", "args": map[string]any{}})
		if code != 200 || out["result"].(map[string]any)["output"].(map[string]any)["path"] != "/acme/open" {
			t.Fatalf("tenant tool: %d %v", code, out)
		}
	})

	t.Run("RFC 0064 seam and capability document", func(t *testing.T) {
		code, _, caps := a.jwtCall(t, "GET", "/.well-known/openwop", "", nil)
		th := caps["capabilities"].(map[string]any)["toolHooks"].(map[string]any)
		if code != 200 || th["supported"] != true || th["prePostEvents"] != true || th["perToolAuthorization"] != true || th["perToolRateLimit"] != true {
			t.Fatalf("capabilities: %d %v", code, caps)
		}
		for _, tc := range []struct {
			body   map[string]any
			code   int
			status string
		}{
			{map[string]any{"principal": "p", "toolName": "web.search", "requiredScopes": []string{"web:read"}, "grantedScopes": []string{"web:read"}, "args": map[string]any{"q": canary, "auth": "Bearer " + canary}}, 200, "ok"},
			{map[string]any{"principal": "p", "toolName": "db.delete", "requiredScopes": []string{"db:write"}, "grantedScopes": []string{}}, 403, "forbidden"},
			{map[string]any{"principal": "p", "toolName": "web.search", "simulateRateLimitExhausted": true}, 429, "rate_limited"},
			{map[string]any{"principal": "p", "toolName": "web.search", "simulateToolError": true}, 200, "error"},
		} {
			code, _, out := b.jwtCall(t, "POST", "/v1/host/sample/toolhooks/invoke", alice, tc.body)
			if code != tc.code || out["toolReturned"].(map[string]any)["status"] != tc.status || len(out["toolCalled"].(map[string]any)["argsHash"].(string)) != 64 {
				t.Fatalf("seam %v: %d %v", tc.body, code, out)
			}
		}
	})

	// Content-free: the canary and the secret-shaped argument appear in no
	// response and no log of either process; the JWTs appear in no log.
	a.stop()
	b.stop()
	for _, s := range []*server{a, b} {
		logs := s.Stdout.String() + s.Stderr.String()
		for _, secret := range append([]string{canary, "sk-live-4f3e2d1c0b9a8f7e6d5c4b3a"}, jwts...) {
			if strings.Contains(logs, secret) {
				t.Errorf("a secret (%.12s…) is in the server log", secret)
			}
		}
		for _, r := range s.responses {
			if bytes.Contains(r.body, []byte(canary)) {
				t.Errorf("the canary is in the response to %s", r.what)
			}
		}
		if !strings.Contains(logs, `"agent.toolCalled"`) || !strings.Contains(logs, `"agent.toolReturned"`) || !strings.Contains(logs, `"agent_access_resolutions"`) {
			t.Errorf("audit events or metrics missing from the log of %s", s.URL)
		}
	}
}

// agentJWT gets the demo agent's JWT for the tool routes from the
// provider: the client_credentials grant for urn:agentauth:tools.
func agentJWT(t *testing.T, p *e2ekit.Provider, resource string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "scope": {"profile.read"}}
	if resource != "" {
		form.Set("resource", resource)
	}
	req, _ := http.NewRequest("POST", p.TokenURL, strings.NewReader(form.Encode()))
	req.SetBasicAuth("agentauth-agent", "agent-secret")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || out.AccessToken == "" {
		t.Fatalf("client_credentials at the provider: %d %v", resp.StatusCode, err)
	}
	return out.AccessToken
}

// TestProviderIssuedJWTs is the `make run` setup: the demo OpenID provider
// issues the agent's JWT (client credentials, RS256 from its JWKS) and
// agentauth serve checks it against that JWKS — the README's tool plane
// walkthrough, with the consent given in Chromium.
func TestProviderIssuedJWTs(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{Clients: []e2ekit.Client{
		{ClientID: clientID, ClientSecret: clientSecret, RedirectURIs: []string{base + "/oauth/callback/e2e-user"},
			GrantTypes: []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken}},
		{ClientID: "agentauth-agent", ClientSecret: "agent-secret", RedirectURIs: []string{base + "/unused"},
			GrantTypes: []string{e2ekit.GrantClientCredentials, e2ekit.GrantAuthorizationCode}, Scope: "profile.read agentauth:admin"},
	}})
	srv := startServer(t, port, t.TempDir(), map[string]string{"tools.yaml": toolsBundle(p, "http://127.0.0.1:1")},
		"E2E_CLIENT_SECRET="+clientSecret, "AGENTAUTH_JWKS_URL="+p.JWKSURL, "AGENTAUTH_JWT_ISSUER="+p.Issuer, "AGENTAUTH_JWT_AUDIENCE=urn:agentauth:tools")
	browser := e2ekit.StartBrowser(t)

	jwt := agentJWT(t, p, "urn:agentauth:tools")
	code, _, out := srv.jwtCall(t, "GET", "/v1/agents/tools", jwt, nil)
	if code != 200 || manifestNames(out) != "whoami,list_orders" {
		t.Fatalf("tools with the provider's JWT: %d %v", code, out)
	}
	// An opaque token of the same provider (no resource) is not a JWT.
	if code, _, out := srv.jwtCall(t, "GET", "/v1/agents/tools", agentJWT(t, p, ""), nil); code != 401 || out["error"].(map[string]any)["details"].(map[string]any)["reason"] != "malformed" {
		t.Fatalf("opaque token: %d %v", code, out)
	}
	_, _, out = srv.jwtCall(t, "POST", "/v1/tools/invoke", jwt, map[string]any{"toolName": "whoami", "args": map[string]any{}})
	res := out["result"].(map[string]any)
	if res["status"] != "authorization_required" {
		t.Fatalf("first whoami: %v", out)
	}
	if r, err := browser.Authorize(ctx, res["authorization"].(map[string]any)["authorizationUrl"].(string), "alice"); err != nil || !strings.Contains(r.BodyText, "Connected") {
		t.Fatalf("consent: %v %+v", err, r)
	}
	_, _, out = srv.jwtCall(t, "POST", "/v1/tools/invoke", jwt, map[string]any{"toolName": "whoami", "args": map[string]any{}})
	if res := out["result"].(map[string]any); res["status"] != "ok" || res["output"].(map[string]any)["sub"] != "alice" {
		t.Fatalf("whoami after consent: %v", out)
	}
	if logs := srv.Stdout.String() + srv.Stderr.String(); strings.Contains(logs, jwt) {
		t.Fatal("the agent JWT is in the server log")
	}
}
