package bundle

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

func TestParseTemplate(t *testing.T) {
	good := []struct {
		src          string
		placeholders []string
	}{
		{"oidc:user:{sub}", []string{"sub"}},
		{"slack:user:{https://slack.com/team_id}:{https://slack.com/user_id}", []string{"https://slack.com/team_id", "https://slack.com/user_id"}},
		{"{a.b_c-d}", []string{"a.b_c-d"}},
		{"literal only", nil},
		{"", nil},
	}
	for _, tt := range good {
		tp, err := ParseTemplate(tt.src)
		if err != nil {
			t.Errorf("ParseTemplate(%q): %v", tt.src, err)
			continue
		}
		if got := tp.Placeholders(); strings.Join(got, "|") != strings.Join(tt.placeholders, "|") {
			t.Errorf("ParseTemplate(%q).Placeholders() = %q, want %q", tt.src, got, tt.placeholders)
		}
		if tp.String() != tt.src {
			t.Errorf("String() = %q, want %q", tp.String(), tt.src)
		}
	}

	bad := []struct{ src, want string }{
		{"user:{sub", `unclosed "{" at offset 5`},
		{"user:{a{b}}", `unclosed "{" at offset 5`},
		{"user:sub}", `unbalanced "}" at offset 8`},
		{"user:{}", "empty placeholder at offset 5"},
		{"user:{a b}", "placeholder at offset 5: want claim path characters"},
		{"{a}{b}}", `unbalanced "}" at offset 6`},
		{"{é}", "placeholder at offset 0"},
		{"x:{a..b}", "placeholder at offset 2: claim path \"a..b\" has an empty segment"},
		{"{.a}", "placeholder at offset 0: claim path \".a\" has an empty segment"},
		{"{" + strings.Repeat("a", domain.MaxClaimPath+1) + "}", "placeholder at offset 0: claim path of 257 bytes"},
	}
	for _, tt := range bad {
		_, err := ParseTemplate(tt.src)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTemplate(%q) error %v, want %q", tt.src, err, tt.want)
		}
	}
}

func TestTemplateExpand(t *testing.T) {
	var fromJSON map[string]any
	dec := json.NewDecoder(strings.NewReader(`{"sub":"u1","id":12345678,"big":12345678901234567890,"exp":1.5e3,
		"https://slack.com/team_id":"T111","https://slack.com/user_id":"U234","user":{"id":42,"login":"octo","org":{"name":"acme"}},
		"ok":true,"nil":null,"obj":{"a":1},"arr":[1],"empty":"", "a.b":"exact",
		"org":{"team.id":"t1","team":{"id":"nested"}},"neg0":-0}`))
	dec.UseNumber()
	if err := dec.Decode(&fromJSON); err != nil {
		t.Fatal(err)
	}
	floats := map[string]any{"id": float64(12345678), "big": 1e21, "frac": 0.25, "neg": float64(-7), "i": 7, "i64": int64(-9)}

	tests := []struct {
		tmpl   string
		claims map[string]any
		want   string // "" means an error whose text contains wantErr
		errHas string
	}{
		{"oidc:user:{sub}", fromJSON, "oidc:user:u1", ""},
		{"slack:user:{https://slack.com/team_id}:{https://slack.com/user_id}", fromJSON, "slack:user:T111:U234", ""},
		{"github:user:{user.id}", fromJSON, "github:user:42", ""},
		{"{user.org.name}/{user.login}", fromJSON, "acme/octo", ""},
		{"{id}", fromJSON, "12345678", ""},
		{"{big}", fromJSON, "12345678901234567890", ""},
		{"{exp}", fromJSON, "1500", ""},
		{"{ok}", fromJSON, "true", ""},
		{"{a.b}", fromJSON, "exact", ""}, // exact top-level key wins over the dot path
		// domain.LookupClaim: a dotted name inside an object, and it wins
		// over a nesting that spells the same path.
		{"{org.team.id}", fromJSON, "t1", ""},
		{"{neg0}", fromJSON, "0", ""},
		{"{id}", floats, "12345678", ""},
		{"{big}", floats, "1000000000000000000000", ""},
		{"{frac}", floats, "0.25", ""},
		{"{neg}:{i}:{i64}", floats, "-7:7:-9", ""},
		{"{missing}", fromJSON, "", `claim "missing" is missing`},
		{"{user.missing}", fromJSON, "", `claim "user.missing" is missing`},
		{"{sub.x}", fromJSON, "", `claim "sub.x" is missing`},
		{"{nil}", fromJSON, "", `claim "nil" is missing`},
		{"{obj}", fromJSON, "", `claim "obj": want a string, number or boolean, got an object`},
		{"{arr}", fromJSON, "", `claim "arr": want a string, number or boolean, got an array`},
		{"{empty}", fromJSON, "", `claim "empty" is empty`},
		{"{sub}", nil, "", `claim "sub" is missing`},
	}
	for _, tt := range tests {
		tp, err := ParseTemplate(tt.tmpl)
		if err != nil {
			t.Fatalf("ParseTemplate(%q): %v", tt.tmpl, err)
		}
		got, err := tp.Expand(tt.claims)
		if tt.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("Expand(%q) = %q, %v; want error %q", tt.tmpl, got, err, tt.errHas)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Expand(%q) = %q, %v; want %q", tt.tmpl, got, err, tt.want)
		}
	}
}

func TestTemplateErrorsDoNotShowClaimValues(t *testing.T) {
	tp, err := ParseTemplate("{a}:{b}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tp.Expand(map[string]any{"a": "private-claim-value", "b": map[string]any{"x": "nested-private"}})
	if err == nil || strings.Contains(err.Error(), "private") {
		t.Errorf("err = %v", err)
	}
}

// TestTemplateReadsClaimsAsPoliciesDo: a subject template and an access
// policy's matcher see the same string for the same claim.
func TestTemplateReadsClaimsAsPoliciesDo(t *testing.T) {
	tpl, err := ParseTemplate("x:{n}")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []any{json.Number("-0"), math.Copysign(0, -1), 1.5, json.Number("12345678901234567890"), true} {
		got, err := tpl.Expand(map[string]any{"n": v})
		want, _ := domain.ClaimString(v)
		if err != nil || got != "x:"+want {
			t.Errorf("%#v: template %q (%v), policy string form %q", v, got, err, want)
		}
	}
}
