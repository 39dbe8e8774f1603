package toolsapi

import (
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
)

// Issue 18: agentauth's runtime token sent to a tool route is a 401 that
// says the route takes an agent JWT and that the token sent looks like
// the runtime token; the reason code stays malformed (what clients
// branch on) and the token is never echoed.
func TestToolRouteNamesItsCredential(t *testing.T) {
	iss := jwttest.Start(t)
	v, err := jwtauth.New(jwtauth.Config{JWKSURL: iss.URL, Issuer: jwttest.Issuer, Audience: jwttest.Audience})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, v, false).h
	runtime := "aat_" + strings.Repeat("x7-_Q", 8) + "abc"
	for _, route := range []struct{ method, path, body string }{
		{"GET", "/v1/agents/tools", ""},
		{"POST", "/v1/tools/invoke", `{"toolName":"echo","args":{}}`},
	} {
		rec, m := call(t, h, route.method, route.path, runtime, route.body)
		e, _ := m["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if rec.Code != 401 || e["details"].(map[string]any)["reason"] != jwtauth.ReasonMalformed ||
			msg != "this route takes an agent JWT (Authorization: Bearer <JWT from your identity provider>); the token sent looks like agentauth's runtime token, which the runtime routes take (/v1/oauth/…, /v1/instances/…)" {
			t.Fatalf("%s %s: %d %s", route.method, route.path, rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), runtime[4:]) {
			t.Fatalf("the token is in the answer")
		}
	}
	if rec, m := call(t, h, "GET", "/v1/agents/tools", "opaque", ""); rec.Code != 401 || m["error"].(map[string]any)["message"] != "a valid bearer JWT is required" {
		t.Fatalf("another token: %d %v", rec.Code, m)
	}
}
