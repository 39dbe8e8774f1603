package toolsapi

import (
	"net/http"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
)

// Issue 17 item 10 on the tool routes: a field name in another case and
// a duplicate key, in the body or in a tool's arguments, are a 400 naming
// the key and where it is; the tool never runs. An upload with a
// duplicate key is refused before the plane reads it.
func TestToolRoutesRefuseMiscasedAndDuplicateKeys(t *testing.T) {
	hs := newHarness(t, defaultVerifier(), true)
	hs.tokens.res = oauth.Result{Status: oauth.StatusReady, AccessToken: domain.NewSecret(upstreamToken), TokenType: "Bearer"}
	for _, tc := range []struct {
		name, path, token, body, message string
	}{
		{"invoke: tool name in another case", "/v1/tools/invoke", "menu-reader", `{"ToolName":"get_menu","args":{"day":"monday"}}`,
			`request body: unknown field "ToolName" at $ (did you mean "toolName"?)`},
		{"invoke: duplicate tool name", "/v1/tools/invoke", "menu-reader", `{"toolName":"get_menu","toolName":"delete_everything","args":{"day":"monday"}}`,
			`request body: duplicate key "toolName" at $`},
		{"invoke: duplicate argument", "/v1/tools/invoke", "menu-reader", `{"toolName":"get_menu","args":{"day":"monday","day":"sunday"}}`,
			`request body: duplicate key "day" at $.args`},
		{"seam: duplicate principal", "/v1/host/sample/toolhooks/invoke", "menu-reader", `{"principal":"a","principal":"b","toolName":"t"}`,
			`request body: duplicate key "principal" at $`},
		{"seam: scopes in another case", "/v1/host/sample/toolhooks/invoke", "menu-reader", `{"principal":"a","toolName":"t","RequiredScopes":["x"]}`,
			`request body: unknown field "RequiredScopes" at $ (did you mean "requiredScopes"?)`},
		{"upload: duplicate name", "/v1/admin/tenants/a/skills", "platform", `{"name":"refunds","description":"d","content":"c","name":"other"}`,
			`request body: duplicate key "name" at $`},
		{"upload: duplicate nested key", "/v1/admin/tenants/a/tools", "platform", `{"id":"orders:list","name":"list_orders","description":"d","inputSchema":{"type":"object","type":"string"},"sourceId":"orders","transport":"http","method":"GET","url":"http://127.0.0.1:1","tags":["tenant"]}`,
			`request body: duplicate key "type" at $.inputSchema`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, m := call(t, hs.h, "POST", tc.path, tc.token, tc.body)
			e, _ := m["error"].(map[string]any)
			if rec.Code != http.StatusBadRequest || e["code"] != "invalidRequest" || e["message"] != tc.message || e["requestId"] != rec.Header().Get("X-Request-Id") {
				t.Fatalf("%d %v, want 400 invalidRequest %q", rec.Code, m, tc.message)
			}
		})
	}
	select {
	case r := <-hs.seen:
		t.Fatalf("the upstream was called: %s", r.URL)
	default:
	}
	if ups := hs.api.cfg.Plane.Uploads(t.Context(), "a", domain.TenantKindSkill); len(ups) != 0 {
		t.Fatalf("uploads stored: %v", ups)
	}
}
