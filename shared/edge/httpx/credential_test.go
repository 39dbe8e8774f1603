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

// FuzzCredentialRefusal: any Authorization header is judged without a
// panic, and the message is one of two fixed texts (or none): nothing of
// the token gets into it.
func FuzzCredentialRefusal(f *testing.F) {
	for _, s := range []string{"Bearer aat_x", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.c2ln", "bearer a.b.c", "Bearer ..", "Basic x", ""} {
		f.Add(s)
	}
	fixed := func(c Credential, header string) string {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", header)
		return c.Refusal(r)
	}
	toRuntime, toTools := fixed(RuntimeToken, "Bearer eyJ9.e30.c2ln"), fixed(AgentJWT, "Bearer aat_abc")
	if toRuntime == "" || toTools == "" {
		f.Fatal("no message for the known shapes")
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Authorization"] = []string{header}
		if msg := RuntimeToken.Refusal(r); msg != "" && msg != toRuntime {
			t.Fatalf("%q: %q", header, msg)
		}
		if msg := AgentJWT.Refusal(r); msg != "" && msg != toTools {
			t.Fatalf("%q: %q", header, msg)
		}
	})
}
