package httpapi

import (
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/testkit/jwttest"
)

// Issue 18: an agent JWT sent to a runtime route is a 401 that says the
// route takes the runtime token and that a JWT was sent — never the token.
func TestRuntimeRouteNamesItsCredential(t *testing.T) {
	f := newFixture(t)
	jwt := jwttest.Start(t).Mint(t, map[string]any{"sub": "agentauth-agent", "scope": "profile.read"})
	for _, path := range []string{"/v1/oauth/token", "/v1/oauth/revoke"} {
		rec := f.do("POST", path, `{}`, map[string]string{"Authorization": "Bearer " + jwt})
		msg, _ := decode(t, rec)["error"].(map[string]any)["message"].(string)
		if rec.Code != 401 || !strings.HasPrefix(msg, "this route takes the runtime token (Authorization: Bearer <runtime token>") ||
			!strings.Contains(msg, "the token sent looks like a JWT") {
			t.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		for _, part := range strings.Split(jwt, ".") {
			if strings.Contains(rec.Body.String(), part) || strings.Contains(f.logs.String(), part) {
				t.Fatalf("%s: part of the JWT is in the answer or the log", path)
			}
		}
	}
	// Any other bearer token is not this server's: the answer says where
	// the right one is, and never echoes the one sent.
	rec := f.do("POST", "/v1/oauth/token", `{}`, map[string]string{"Authorization": "Bearer aat_stale-export-value"})
	if msg, _ := decode(t, rec)["error"].(map[string]any)["message"].(string); rec.Code != 401 ||
		!strings.HasPrefix(msg, "the bearer token sent is not this server's runtime token: `agentauth runtime-token` prints the one it takes") ||
		strings.Contains(rec.Body.String(), "stale-export-value") || strings.Contains(f.logs.String(), "stale-export-value") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	// No credential at all keeps the plain message.
	for _, h := range []map[string]string{{"Authorization": ""}, {"Authorization": "Basic dXNlcjpwdw=="}, {"Authorization": "Bearer"}} {
		rec := f.do("POST", "/v1/oauth/token", `{}`, h)
		if msg := decode(t, rec)["error"].(map[string]any)["message"]; rec.Code != 401 || msg != "a valid runtime credential is required (Authorization: Bearer <runtime token>)" {
			t.Fatalf("%v: %d %s", h, rec.Code, rec.Body)
		}
	}
}
