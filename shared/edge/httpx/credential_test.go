package httpx

import (
	"encoding/base64"
	"net/http/httptest"
	"strings"
	"testing"
)

// Issue 18: a runtime token sent to a tool route, or a JWT to a runtime
// route, is told which credential the route takes — by the token's shape,
// never echoing it.
func TestCredentialRefusal(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	jwt := b64([]byte(`{"alg":"RS256","kid":"k1"}`)) + "." + b64([]byte(`{"sub":"agentauth-agent"}`)) + "." + b64([]byte("signature-bytes"))
	runtime := "aat_" + strings.Repeat("Qx-_9", 8) + "abc"
	for _, tc := range []struct {
		name, header string
		route        Credential
		want         string // in the message; "" for no message
	}{
		{"JWT to a runtime route", "Bearer " + jwt, RuntimeToken, "this route takes the runtime token (Authorization: Bearer <runtime token>, printed by `agentauth runtime-token`); the token sent looks like a JWT"},
		{"JWT, scheme in lower case", "bearer " + jwt, RuntimeToken, "looks like a JWT"},
		{"runtime token to a tool route", "Bearer " + runtime, AgentJWT, "this route takes an agent JWT (Authorization: Bearer <JWT from your identity provider>); the token sent looks like agentauth's runtime token"},
		{"runtime token to a runtime route", "Bearer " + runtime, RuntimeToken, ""},
		{"JWT to a tool route", "Bearer " + jwt, AgentJWT, ""},
		{"two parts", "Bearer " + jwt[:strings.LastIndex(jwt, ".")], RuntimeToken, ""},
		{"header not JSON", "Bearer " + b64([]byte("nope")) + ".e30.c2ln", RuntimeToken, ""},
		{"not base64url", "Bearer a+b.c.d", RuntimeToken, ""},
		{"some other token", "Bearer opaque-token-1", AgentJWT, ""},
		{"basic", "Basic " + runtime, AgentJWT, ""},
		{"none", "", RuntimeToken, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			got := tc.route.Refusal(r)
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("Refusal = %q, want %q", got, tc.want)
			}
			for _, part := range strings.FieldsFunc(strings.TrimPrefix(tc.header, "Bearer "), func(r rune) bool { return r == '.' }) {
				if len(part) > 8 && strings.Contains(got, part) {
					t.Fatalf("the message holds part of the token: %q", got)
				}
			}
		})
	}
}
