package bundle

import (
	"errors"
	"strings"
	"testing"
)

func TestParseTenantSkill(t *testing.T) {
	s, err := ParseTenantSkill("acme", []byte(`{"name":"Refunds","description":"how to refund","content":"Step 1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.SkillName != "Refunds" || s.Scope != SkillScopeTenant || s.TenantID != "acme" || s.Content != "Step 1" {
		t.Fatalf("skill = %+v", s)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"not an object", `[1]`, "request body: want one JSON object"},
		{"two objects", `{} {}`, "want one JSON object"},
		{"no name", `{"description":"d","content":"c"}`, "request body: name: required"},
		{"global scope", `{"name":"n","description":"d","content":"c","scope":"global"}`, `scope: an uploaded skill is always scope "tenant"`},
		{"other tenant", `{"name":"n","description":"d","content":"c","tenantId":"globex"}`, "tenantId: must be the tenant of the route"},
		{"unknown field", `{"name":"n","description":"d","content":"c","contnet":"x"}`, `contnet`},
		{"missing content", `{"name":"n","description":"d"}`, "request body: content: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTenantSkill("acme", []byte(tc.body))
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a ValidationError containing %q", err, tc.want)
			}
		})
	}
}

func TestParseTenantTool(t *testing.T) {
	tool, err := ParseTenantTool([]byte(`{"id":"menu:list","name":"list_menu","description":"lists the menu",
		"inputSchema":{"type":"object","properties":{"day":{"type":"string"}}},"sourceId":"menu","sourcePath":"/menu/{day}",
		"method":"GET","transport":"http","url":"https://menu.example.com","requiredScopes":["menu:read"],"errorMessageLimit":200}`))
	if err != nil {
		t.Fatal(err)
	}
	if tool.ID != "menu:list" || tool.ToolName != "list_menu" || tool.ErrorMessageLimit != 200 || tool.Schema == nil || tool.URL != "https://menu.example.com" {
		t.Fatalf("tool = %+v", tool)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"auth refused", `{"id":"menu:list","name":"m","description":"d","inputSchema":{"type":"object"},"sourceId":"menu","transport":"native","auth":{"oauthAppRef":"slack"}}`, "auth: not allowed on an uploaded tool"},
		{"bad id", `{"id":"menu","name":"m","description":"d","inputSchema":{"type":"object"},"sourceId":"menu","transport":"native"}`, `id: "menu" is not a tool id`},
		{"bad schema", `{"id":"menu:list","name":"m","description":"d","inputSchema":{"type":"array"},"sourceId":"menu","transport":"native"}`, "inputSchema"},
		{"http without url", `{"id":"menu:list","name":"m","description":"d","inputSchema":{"type":"object"},"sourceId":"menu","transport":"http","method":"GET"}`, "url: required when transport is http"},
		{"env value source", `{"id":"menu:list","name":"m","description":"d","inputSchema":{"type":"object"},"sourceId":"menu","transport":"mcp","version":{"valueFrom":{"env":"HOME"}}}`, "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseTenantTool([]byte(tc.body))
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "spec.") {
				t.Fatalf("err = %v, want it to contain %q (and field paths relative to the spec)", err, tc.want)
			}
		})
	}
}
