package toolsapi

import (
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
)

func TestHTTPToolCarriesTheBrokersToken(t *testing.T) {
	hs := newHarness(t, defaultVerifier(), false)
	hs.tokens.res = oauth.Result{Status: oauth.StatusReady, AccessToken: domain.NewSecret(upstreamToken), TokenType: "Bearer"}
	rec, m := call(t, hs.h, "POST", "/v1/tools/invoke", "menu-reader", `{"toolName":"get_menu","args":{"day":"monday"}}`)
	res := m["result"].(map[string]any)
	if rec.Code != 200 || res["status"] != "ok" || res["output"].(map[string]any)["path"] != "/menu/monday" {
		t.Fatalf("get_menu: %d %v", rec.Code, m)
	}
	up := <-hs.seen
	if up.Header.Get("Authorization") != "Bearer "+upstreamToken {
		t.Fatalf("upstream Authorization = %q", up.Header.Get("Authorization"))
	}
	if got := hs.tokens.auth[0]; got.Subjects == nil || got.Subjects.User != "menu:user:mia" || got.Actor.ID != "mia" {
		t.Fatalf("turn auth = %+v: the subjects come from the verified agentauth_subjects claim", got)
	}
	if strings.Contains(rec.Body.String(), upstreamToken) {
		t.Fatal("the upstream token is in the response")
	}
	// The schema is checked before the token is fetched or the upstream called.
	n := len(hs.tokens.auth)
	_, m = call(t, hs.h, "POST", "/v1/tools/invoke", "menu-reader", `{"toolName":"get_menu","args":{"day":1}}`)
	if m["result"].(map[string]any)["error"].(map[string]any)["code"] != "E_TOOL_INVALID_ARGS" || len(hs.tokens.auth) != n {
		t.Fatalf("bad args: %v (token requests %d → %d)", m, n, len(hs.tokens.auth))
	}
	// Without menu.read the tool is forbidden and never runs.
	if rec, _ := call(t, hs.h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"get_menu","args":{"day":"monday"}}`); rec.Code != 403 || len(hs.tokens.auth) != n {
		t.Fatalf("alice without menu.read: %d", rec.Code)
	}
}

func TestHTTPToolAuthorizationRequiredIsTheResult(t *testing.T) {
	hs := newHarness(t, defaultVerifier(), false)
	hs.tokens.res = oauth.Result{Status: oauth.StatusAuthorizationRequired, AuthSessionID: "as-1", AuthorizationURL: "http://127.0.0.1:1/auth?state=s",
		SessionExpiresAt: time.Now().Add(10 * time.Minute), Message: "connect the menu"}
	rec, m := call(t, hs.h, "POST", "/v1/tools/invoke", "menu-reader", `{"toolName":"get_menu","args":{"day":"monday"}}`)
	res := m["result"].(map[string]any)
	if rec.Code != 200 || res["status"] != "authorization_required" || res["error"] != nil ||
		res["authorization"].(map[string]any)["authorizationUrl"] != "http://127.0.0.1:1/auth?state=s" || m["toolReturned"].(map[string]any)["status"] != "ok" {
		t.Fatalf("authorization_required: %d %v", rec.Code, m)
	}
	select {
	case <-hs.seen:
		t.Fatal("the upstream was called without a token")
	default:
	}
}

func TestTenantUploads(t *testing.T) {
	hs := newHarness(t, defaultVerifier(), false)
	h := hs.h
	skill := `{"name":"refunds","description":"refund a customer","content":"open the refunds console"}`
	// Platform-wide admin is the explicit agentauth:platform-admin scope,
	// never an admin token without a tenant (issue 9 item 8).
	for _, tc := range []struct {
		name, token, path string
		code              int
		mentions          string
	}{
		{"no admin scope", "no-admin-a", "/v1/admin/tenants/a/skills", 403, "agentauth:admin"},
		{"tenant admin of another tenant", "admin-a", "/v1/admin/tenants/b/skills", 403, "its own tenant"},
		{"admin without a tenant claim", "admin", "/v1/admin/tenants/a/skills", 403, "agentauth:platform-admin"},
		{"admin with a null tenant", "admin-null", "/v1/admin/tenants/a/skills", 403, "agentauth:platform-admin"},
		{"bad tenant in the path", "platform", "/v1/admin/tenants/-x/skills", 400, "tenant in the path"},
		{"platform admin in any tenant", "platform", "/v1/admin/tenants/c/skills", 201, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, m := call(t, h, "POST", tc.path, tc.token, skill)
			if rec.Code != tc.code {
				t.Fatalf("%d %v", rec.Code, m)
			}
			if tc.code >= 400 && !strings.Contains(m["error"].(map[string]any)["message"].(string), tc.mentions) {
				t.Fatalf("message %v, want it to mention %q", m["error"], tc.mentions)
			}
		})
	}
	for _, token := range []string{"admin", "admin-null"} {
		if rec, _ := call(t, h, "GET", "/v1/admin/tenants/c/skills", token, ""); rec.Code != 403 {
			t.Fatalf("%s lists tenant c's uploads: %d", token, rec.Code)
		}
		if rec, _ := call(t, h, "DELETE", "/v1/admin/tenants/c/skills/refunds", token, ""); rec.Code != 403 {
			t.Fatalf("%s deletes tenant c's upload: %d", token, rec.Code)
		}
	}
	if rec, m := call(t, h, "GET", "/v1/admin/tenants/c/skills", "platform", ""); rec.Code != 200 || len(m["data"].([]any)) != 1 {
		t.Fatalf("platform admin lists tenant c: %d %v", rec.Code, m)
	}
	if rec, m := call(t, h, "POST", "/v1/admin/tenants/a/skills", "admin-a", skill); rec.Code != 201 || m["data"].(map[string]any)["name"] != "refunds" {
		t.Fatalf("upload: %d %v", rec.Code, m)
	}
	// Tenant a's caller with refunds on its allow list sees it; tenant b's
	// caller, with the same allow list, does not.
	if _, m := call(t, h, "GET", "/v1/agents/skills?q=refund", "alice", ""); names(m) != "refunds" {
		t.Fatalf("alice sees %q", names(m))
	}
	if _, m := call(t, h, "GET", "/v1/agents/skills?q=refund", "bob", ""); names(m) != "" {
		t.Fatalf("bob (tenant b) sees %q", names(m))
	}

	// Validation problems by field; a bundle tool's name is refused.
	rec, m := call(t, h, "POST", "/v1/admin/tenants/a/tools", "platform", `{"id":"menu:x","name":"m","description":"d","inputSchema":{"type":"object"},"sourceId":"menu","transport":"http","method":"GET","url":"http://127.0.0.1:1","auth":{"oauthAppRef":"menu-app"}}`)
	if rec.Code != 400 || !strings.Contains(rec.Body.String(), `"field":"auth"`) {
		t.Fatalf("tool with auth: %d %v", rec.Code, m)
	}
	if rec, m := call(t, h, "POST", "/v1/admin/tenants/a/tools", "platform", `{"id":"x:echo","name":"echo","description":"d","inputSchema":{"type":"object"},"sourceId":"x","transport":"native","tags":["tenant"]}`); rec.Code != 409 {
		t.Fatalf("bundle name: %d %v", rec.Code, m)
	}

	tool := `{"id":"orders:list","name":"list_orders","description":"lists orders","inputSchema":{"type":"object"},"sourceId":"orders","sourcePath":"/orders","method":"GET","transport":"http","url":"` + hs.upstream.URL + `","tags":["tenant"]}`
	if rec, m := call(t, h, "POST", "/v1/admin/tenants/a/tools", "admin-a", tool); rec.Code != 201 || m["data"].(map[string]any)["name"] != "orders:list" {
		t.Fatalf("tool upload: %d %v", rec.Code, m)
	}
	if _, m := call(t, h, "GET", "/v1/agents/tools", "alice", ""); names(m) != "list_orders,echo,get_menu" {
		t.Fatalf("alice (tenant a) sees %q", names(m))
	}
	if _, m := call(t, h, "GET", "/v1/agents/tools", "bob", ""); names(m) != "echo,get_menu" {
		t.Fatalf("bob (tenant b) sees %q", names(m))
	}
	rec, m = call(t, h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"list_orders","args":{"status":"open"}}`)
	if rec.Code != 200 || m["result"].(map[string]any)["output"].(map[string]any)["path"] != "/orders" {
		t.Fatalf("tenant tool invoke: %d %v", rec.Code, m)
	}
	if up := <-hs.seen; up.URL.RawQuery != "status=open" || up.Header.Get("Authorization") != "" {
		t.Fatalf("upstream saw %s, Authorization %q", up.URL.RawQuery, up.Header.Get("Authorization"))
	}
	if _, m := call(t, h, "POST", "/v1/tools/invoke", "bob", `{"toolName":"list_orders","args":{}}`); m["result"].(map[string]any)["error"].(map[string]any)["code"] != "E_TOOL_NOT_IN_CATALOG" {
		t.Fatalf("bob invoking tenant a's tool: %v", m)
	}

	if rec, m := call(t, h, "GET", "/v1/admin/tenants/a/tools", "admin-a", ""); rec.Code != 200 || len(m["data"].([]any)) != 1 {
		t.Fatalf("list: %d %v", rec.Code, m)
	}
	if rec, _ := call(t, h, "DELETE", "/v1/admin/tenants/a/tools/orders:list", "admin-a", ""); rec.Code != 204 {
		t.Fatalf("delete: %d", rec.Code)
	}
	if _, m := call(t, h, "GET", "/v1/agents/tools", "alice", ""); names(m) != "echo,get_menu" {
		t.Fatalf("after delete alice sees %q: the cache must not keep a deleted tool", names(m))
	}
	if rec, _ := call(t, h, "DELETE", "/v1/admin/tenants/a/tools/orders:list", "admin-a", ""); rec.Code != 404 {
		t.Fatalf("second delete: %d", rec.Code)
	}
	if rec, _ := call(t, h, "POST", "/v1/admin/tenants/a/skills", "admin-a", strings.Repeat(" ", domain.MaxTenantSpecBytes+1)); rec.Code != 413 {
		t.Fatalf("oversized upload: %d", rec.Code)
	}
}

func TestResolutionMetrics(t *testing.T) {
	hs := newHarness(t, defaultVerifier(), false)
	call(t, hs.h, "GET", "/v1/agents/tools", "alice", "")
	call(t, hs.h, "GET", "/v1/agents/tools", "alice", "")
	call(t, hs.h, "GET", "/v1/agents/tools", "stranger", "")
	call(t, hs.h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"echo","args":{}}`)
	got := hs.metrics.all
	if len(got) != 4 {
		t.Fatalf("%d resolutions recorded, want 4", len(got))
	}
	if got[0].Cached || !got[1].Cached || got[0].Tools != 2 || got[0].Denied || got[0].Route != "tools" {
		t.Fatalf("alice's resolutions = %+v, %+v", got[0], got[1])
	}
	if !got[2].Denied || got[2].Tools != 0 {
		t.Fatalf("stranger's resolution = %+v: no policy matched, so denied", got[2])
	}
	if got[3].Route != "invoke" || !got[3].Cached {
		t.Fatalf("invoke's resolution = %+v", got[3])
	}
}
