package bundle

import (
	"strings"
	"testing"
)

func TestBuiltInBuildersDependOnMode(t *testing.T) {
	app := func(provider, mode string) string {
		return `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: a}
spec:
  provider: ` + provider + `
  flow: authorizationCode
  subjectMode: ` + mode + `
  client: {clientId: {value: c}, clientSecret: {valueFrom: {env: S}}}
  endpoints: {authorizationUrl: "https://p.example/a", tokenUrl: "https://p.example/t", userInfoUrl: "https://p.example/u"}
  scopes: [read]
  redirect: {callbackPath: /cb}
  subjectVerification: {source: userinfo}
`
	}
	env := func(string) (string, bool) { return "x", true }
	for _, tc := range []struct {
		provider, mode string
		ok             bool
	}{
		{"github", "user", true}, {"github", "global", false},
		{"slack", "user", true}, {"slack", "global", true},
		{"google", "global", true}, {"acme", "user", false},
	} {
		_, err := Parse([]File{{Name: "a.yaml", Data: []byte(app(tc.provider, tc.mode))}}, Options{LookupEnv: env})
		if (err == nil) != tc.ok {
			t.Errorf("%s/%s: %v", tc.provider, tc.mode, err)
		}
		if err != nil && !strings.Contains(err.Error(), "spec.subjectVerification.template") {
			t.Errorf("%s/%s: error does not name the field: %v", tc.provider, tc.mode, err)
		}
	}
}
