package toolsapi

import (
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
)

// TestRoutesWithRealJWTs signs ES256 JWTs with a key published by a local
// JWKS server and calls the routes through the real verifier.
func TestRoutesWithRealJWTs(t *testing.T) {
	iss := jwttest.Start(t)
	v, err := jwtauth.New(jwtauth.Config{JWKSURL: iss.URL, Issuer: jwttest.Issuer, Audience: jwttest.Audience})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, v, true).h

	alice := iss.Mint(t, map[string]any{"sub": "alice", "scope": "tools:echo", "tenant_id": "a"})
	if rec, m := call(t, h, "GET", "/v1/agents/tools", alice, ""); rec.Code != 200 || names(m) != "echo,get_menu" {
		t.Fatalf("tools: %d %v", rec.Code, m)
	}
	if rec, _ := call(t, h, "GET", "/v1/agents/skills?q=deploy", alice, ""); rec.Code != 200 {
		t.Fatalf("skills: %d", rec.Code)
	}
	if rec, m := call(t, h, "POST", "/v1/tools/invoke", alice, `{"toolName":"echo","args":{}}`); rec.Code != 200 || m["toolReturned"].(map[string]any)["status"] != "ok" {
		t.Fatalf("invoke: %d %v", rec.Code, m)
	}
	if rec, _ := call(t, h, "POST", "/v1/host/sample/toolhooks/invoke", alice, `{"principal":"p","toolName":"x"}`); rec.Code != 200 {
		t.Fatalf("seam: %d", rec.Code)
	}
	// An admin token whose tenant claim is JSON null manages no tenant.
	nullTenant := iss.Mint(t, map[string]any{"sub": "ann", "scope": "agentauth:admin", "tenant_id": nil})
	if rec, m := call(t, h, "POST", "/v1/admin/tenants/a/skills", nullTenant, `{"name":"x","description":"d","content":"c"}`); rec.Code != 403 {
		t.Fatalf("admin with tenant_id null: %d %v", rec.Code, m)
	}
	platform := iss.Mint(t, map[string]any{"sub": "root", "scope": "agentauth:platform-admin"})
	if rec, m := call(t, h, "POST", "/v1/admin/tenants/a/skills", platform, `{"name":"x","description":"d","content":"c"}`); rec.Code != 201 {
		t.Fatalf("platform admin: %d %v", rec.Code, m)
	}
	expired := iss.Mint(t, map[string]any{"sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()})
	wrongAud := iss.Mint(t, map[string]any{"sub": "alice", "aud": "someone-else"})
	for name, tok := range map[string]string{"expired": expired, "wrong audience": wrongAud, "tampered": alice[:len(alice)-4] + "AAAA"} {
		rec, m := call(t, h, "GET", "/v1/agents/tools", tok, "")
		if rec.Code != 401 || strings.Contains(rec.Body.String(), tok) {
			t.Fatalf("%s: %d %v", name, rec.Code, m)
		}
	}
}
