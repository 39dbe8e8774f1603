package oauth

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
)

func claims(t *testing.T, s string) map[string]any {
	t.Helper()
	c, err := decodeClaims([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBuiltInSubjectBuilders(t *testing.T) {
	for _, tc := range []struct {
		provider, mode, claims, want, errHas string
	}{
		{"slack", "user", `{"sub":"U234567","https://slack.com/team_id":"T111","https://slack.com/user_id":"U234567"}`, "slack:user:T111:U234567", ""},
		{"slack", "user", `{"sub":"U9","https://slack.com/team_id":"T1"}`, "slack:user:T1:U9", ""},
		{"slack", "global", `{"https://slack.com/team_id":"T111"}`, "slack:team:T111", ""},
		{"slack", "user", `{"sub":"U9"}`, "", "lack"},
		{"github", "user", `{"id":12345678901,"login":"octocat"}`, "github:user:12345678901", ""},
		{"github", "user", `{"id":1e3}`, "github:user:1000", ""}, // domain.ClaimString, as a template writes it
		{"github", "user", `{"login":"octocat"}`, "", "lack"},
		{"github", "global", `{"id":1}`, "", "no built-in"},
		{"google", "user", `{"sub":"1098765"}`, "google:user:1098765", ""},
		{"google", "global", `{"sub":"1","hd":"example.com"}`, "google:domain:example.com", ""},
		{"demo", "user", `{"sub":"alice"}`, "", "no built-in"},
	} {
		t.Run(tc.provider+"/"+tc.mode+"/"+tc.want, func(t *testing.T) {
			rt := &appRuntime{app: &bundle.OAuthApp{Provider: tc.provider}}
			got, err := buildSubject(rt, tc.mode, claims(t, tc.claims))
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) {
					t.Fatalf("got %q, %v; want an error with %q", got, err, tc.errHas)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestTemplateSubject(t *testing.T) {
	tpl, err := bundle.ParseTemplate("oidc:user:{sub}:{org.id}")
	if err != nil {
		t.Fatal(err)
	}
	rt := &appRuntime{app: &bundle.OAuthApp{Provider: "github"}, template: tpl}
	got, err := buildSubject(rt, domain.SubjectModeUser, claims(t, `{"sub":"alice","org":{"id":42},"id":7}`))
	if err != nil || got != "oidc:user:alice:42" {
		t.Fatalf("template wins over the built-in builder: %q %v", got, err)
	}
	if _, err := buildSubject(rt, domain.SubjectModeUser, claims(t, `{"sub":"alice"}`)); err == nil {
		t.Fatal("missing claim accepted")
	}
}

func TestDecodeClaimsKeepsLargeIntegers(t *testing.T) {
	c := claims(t, `{"id": 12345678901234567}`)
	if n, ok := c["id"].(json.Number); !ok || n.String() != "12345678901234567" {
		t.Fatalf("id = %#v", c["id"])
	}
	for _, bad := range []string{`[]`, `null`, `"x"`, `{`} {
		if _, err := decodeClaims([]byte(bad)); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
