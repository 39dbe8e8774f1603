package httpapi

import (
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/oauth"
)

// Issue 17 item 10 on the runtime routes: a field name in another case
// and a duplicate key are refused (400 naming the key and where), where
// encoding/json filled "auth" from "Auth" and kept the last duplicate.
func TestRuntimeRoutesRefuseMiscasedAndDuplicateKeys(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, path, body, message string
	}{
		{"token: turn auth in another case", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","turn":{"Auth":{"subjects":{"global":"demo:team:T1"}}}}`,
			`request body: unknown field "Auth" at $.turn (did you mean "auth"?)`},
		{"token: subjects in another case", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","turn":{"auth":{"subjects":{"GLOBAL":"demo:team:T1"}}}}`,
			`request body: unknown field "GLOBAL" at $.turn.auth.subjects (did you mean "global"?)`},
		{"token: duplicate auth", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","turn":{"auth":{"subjects":{"global":"demo:team:T1"}},"auth":{"subjects":{"global":"demo:team:T2"}}}}`,
			`request body: duplicate key "auth" at $.turn`},
		{"token: duplicate ref", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","oauthAppRef":"OAuthApp/other"}`,
			`request body: duplicate key "oauthAppRef" at $`},
		{"token: duplicate in the ref object", "/v1/oauth/token", `{"oauthAppRef":{"kind":"OAuthApp","name":"team","name":"other"}}`,
			`request body: duplicate key "name" at $.oauthAppRef`},
		{"token: resume swarmRef in another case", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","turn":{"resume":{"swarmRef":{"kind":"Swarm","Name":"s"},"instanceKey":"i","agentName":"a"}}}`,
			`request body: unknown field "Name" at $.turn.resume.swarmRef (did you mean "name"?)`},
		{"revoke: subject in another case", "/v1/oauth/revoke", `{"oauthAppRef":"OAuthApp/team","Subject":"demo:team:T1"}`,
			`request body: unknown field "Subject" at $ (did you mean "subject"?)`},
		{"revoke: duplicate subject", "/v1/oauth/revoke", `{"oauthAppRef":"OAuthApp/team","subject":"demo:team:T1","subject":"demo:team:T2"}`,
			`request body: duplicate key "subject" at $`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do("POST", tc.path, tc.body, nil)
			if rec.Code != 400 {
				t.Fatalf("status %d, want 400: %s", rec.Code, rec.Body)
			}
			e := decode(t, rec)["error"].(map[string]any)
			if e["code"] != "invalidRequest" || e["message"] != tc.message || e["requestId"] != rec.Header().Get("X-Request-Id") {
				t.Fatalf("error %v, want invalidRequest %q and the request id", e, tc.message)
			}
		})
	}
	// The reference held as raw JSON is read by the same decoder: its
	// object form in another case is the token result's
	// oauthAppNotFound, as every other bad reference is.
	rec := f.do("POST", "/v1/oauth/token", `{"oauthAppRef":{"Kind":"OAuthApp","name":"team"},"turn":{"auth":{"subjects":{"global":"demo:team:T1"}}}}`, nil)
	m := decode(t, rec)
	e, _ := m["error"].(map[string]any)
	if rec.Code != 200 || m["status"] != "error" || e["code"] != oauth.CodeOAuthAppNotFound ||
		!strings.Contains(e["message"].(string), `oauthAppRef: unknown field "Kind" at $ (did you mean "kind"?)`) {
		t.Fatalf("%d %v, want an oauthAppNotFound result naming the key", rec.Code, m)
	}
}
