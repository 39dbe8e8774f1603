package discovery

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

// testClaims has a claim of every shape under a name that says what it is.
func testClaims() map[string]any {
	return map[string]any{
		"str":     "engineering",
		"empty":   "",
		"null":    nil,
		"int":     float64(42),
		"neg":     float64(-7),
		"frac":    2.50,
		"big":     1e21,
		"negzero": math.Copysign(0, -1),
		"jsonnum": json.Number("12345678901234567890"),
		"jsonexp": json.Number("1.5e3"),
		"t":       true,
		"f":       false,
		"roles":   []any{"admin", "viewer", float64(3), true, nil, map[string]any{"x": "admin"}},
		"nolist":  []any{},
		"strs":    []string{"a", "b"},
		"obj":     map[string]any{"a": "b"},
		"nan":     math.NaN(),
		"realm_access": map[string]any{
			"roles": []any{"pizza-staff", "cook"},
			"level": float64(3),
			"none":  nil,
			"deep":  map[string]any{"er": "yes"},
		},
		"https://example.com/tenant": "acme",
		"a.b":                        "top-level wins",
		"a":                          map[string]any{"b": "nested loses"},
		"x":                          map[string]any{"y.z": "dotted name inside"},
		"flat":                       map[string]string{"k": "v"},
	}
}

func TestMatcherOperators(t *testing.T) {
	type tc struct {
		claim, op, value string
		want             bool
	}
	tests := []tc{
		// exists: true only for a present non-null value.
		{"str", OpExists, "", true},
		{"empty", OpExists, "", true},
		{"f", OpExists, "", true},
		{"nolist", OpExists, "", true},
		{"obj", OpExists, "", true},
		{"missing", OpExists, "", false},
		{"null", OpExists, "", false},
		{"realm_access.none", OpExists, "", false},
		{"realm_access.missing", OpExists, "", false},
		{"str.below", OpExists, "", false},

		// equals / not_equals on the string form.
		{"str", OpEquals, "engineering", true},
		{"str", OpEquals, "Engineering", false},
		{"str", OpNotEquals, "sales", true},
		{"str", OpNotEquals, "engineering", false},
		{"empty", OpEquals, "", true},
		{"empty", OpNotEquals, "", false},
		{"int", OpEquals, "42", true},
		{"int", OpEquals, "42.0", false},
		{"neg", OpEquals, "-7", true},
		{"frac", OpEquals, "2.5", true},
		{"big", OpEquals, "1000000000000000000000", true},
		{"negzero", OpEquals, "0", true},
		{"jsonnum", OpEquals, "12345678901234567890", true},
		{"jsonexp", OpEquals, "1500", true},
		{"t", OpEquals, "true", true},
		{"t", OpEquals, "True", false},
		{"f", OpEquals, "false", true},
		{"f", OpNotEquals, "true", true},
		{"realm_access.level", OpEquals, "3", true},
		{"https://example.com/tenant", OpEquals, "acme", true},
		{"a.b", OpEquals, "top-level wins", true},
		{"a.b", OpEquals, "nested loses", false},
		{"flat.k", OpEquals, "v", true},
		{"x.y.z", OpExists, "", true}, // a dotted name inside an object: domain.LookupClaim
		{"x.y.z", OpEquals, "dotted name inside", true},
		// Missing and null: false, negated operators included.
		{"missing", OpEquals, "x", false},
		{"missing", OpNotEquals, "x", false},
		{"null", OpEquals, "", false},
		{"null", OpNotEquals, "x", false},
		{"realm_access.none", OpNotEquals, "x", false},
		// No string form: lists, objects, NaN.
		{"roles", OpEquals, "admin", false},
		{"roles", OpNotEquals, "admin", false},
		{"obj", OpEquals, "b", false},
		{"obj", OpNotEquals, "b", false},
		{"nan", OpEquals, "NaN", false},
		{"nan", OpNotEquals, "x", false},

		// contains / not_contains: list membership, else substring.
		{"roles", OpContains, "admin", true},
		{"roles", OpContains, "adm", false},
		{"roles", OpContains, "3", true},
		{"roles", OpContains, "true", true},
		{"roles", OpNotContains, "owner", true},
		{"roles", OpNotContains, "viewer", false},
		{"strs", OpContains, "b", true},
		{"strs", OpNotContains, "c", true},
		{"nolist", OpContains, "x", false},
		{"nolist", OpNotContains, "x", true},
		{"realm_access.roles", OpContains, "pizza-staff", true},
		{"realm_access.roles", OpContains, "pizza", false},
		{"str", OpContains, "gine", true},
		{"str", OpContains, "GINE", false},
		{"str", OpNotContains, "sales", true},
		{"str", OpNotContains, "eng", false},
		{"empty", OpNotContains, "x", true},
		{"int", OpContains, "4", true},
		{"t", OpContains, "ru", true},
		{"missing", OpContains, "x", false},
		{"missing", OpNotContains, "x", false},
		{"null", OpContains, "x", false},
		{"null", OpNotContains, "x", false},
		{"obj", OpContains, "a", false},
		{"obj", OpNotContains, "zzz", false},

		// matches: anchored at the start only, case-sensitive; any element of a list.
		{"str", OpMatches, "eng", true},
		{"str", OpMatches, "ineer", false},
		{"str", OpMatches, ".*ineer", true},
		{"str", OpMatches, "ENG", false},
		{"str", OpMatches, "eng$", false},
		{"str", OpMatches, "sales|eng", true},
		{"int", OpMatches, `\d+$`, true},
		{"t", OpMatches, "tr", true},
		{"roles", OpMatches, "view", true},
		{"roles", OpMatches, "own", false},
		{"missing", OpMatches, ".*", false},
		{"null", OpMatches, ".*", false},
		{"obj", OpMatches, ".*", false},

		// in / not_in: comma-separated, spaces trimmed.
		{"str", OpIn, "sales, engineering ,support", true},
		{"str", OpIn, "sales,support", false},
		{"str", OpIn, "engineering", true},
		{"str", OpIn, "engineer", false},
		{"str", OpNotIn, "sales , support", true},
		{"str", OpNotIn, "sales, engineering", false},
		{"int", OpIn, "41, 42", true},
		{"t", OpIn, "true,yes", true},
		{"f", OpNotIn, "true", true},
		{"missing", OpIn, "a", false},
		{"missing", OpNotIn, "a", false},
		{"null", OpIn, "a", false},
		{"null", OpNotIn, "a", false},
		{"roles", OpIn, "admin", false},
		{"roles", OpNotIn, "nobody", false},
		{"obj", OpNotIn, "x", false},
	}
	claims := testClaims()
	for _, tt := range tests {
		name := tt.claim + " " + tt.op + " " + tt.value
		t.Run(name, func(t *testing.T) {
			cm, err := Matcher{Claim: tt.claim, Operator: tt.op, Value: tt.value}.Compile()
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if got := cm.Match(claims); got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
			if cm.Match(nil) {
				t.Error("matched nil claims")
			}
		})
	}
}

func TestMatcherCompile(t *testing.T) {
	tests := []struct {
		m       Matcher
		wantErr string // "" means it compiles
	}{
		{Matcher{"roles", OpExists, ""}, ""},
		{Matcher{"roles", OpExists, "x"}, "takes no value"},
		{Matcher{"roles", OpEquals, ""}, ""},
		{Matcher{"roles", OpNotEquals, ""}, ""},
		{Matcher{"roles", OpContains, ""}, "non-empty value"},
		{Matcher{"roles", OpNotContains, ""}, "non-empty value"},
		{Matcher{"roles", OpMatches, ""}, "non-empty regular expression"},
		{Matcher{"roles", OpMatches, "(a"}, "invalid regular expression: missing closing )"},
		{Matcher{"roles", OpMatches, "a)|(b"}, "invalid regular expression"},
		{Matcher{"roles", OpIn, "a,,b"}, "item 2 of the comma-separated value is empty"},
		{Matcher{"roles", OpNotIn, " "}, "item 1"},
		{Matcher{"roles", OpIn, "a, b"}, ""},
		{Matcher{"roles", "", "x"}, "operator is required"},
		{Matcher{"roles", "EQUALS", "x"}, `unknown operator "EQUALS"; one of equals, not_equals, contains, not_contains, matches, in, not_in, exists`},
		{Matcher{"", OpExists, ""}, "claim path is required"},
		{Matcher{"a..b", OpExists, ""}, "empty segment"},
		{Matcher{".a", OpExists, ""}, "empty segment"},
		{Matcher{"a.", OpExists, ""}, "empty segment"},
		{Matcher{"https://x.example/roles", OpExists, ""}, ""},
	}
	for _, tt := range tests {
		cm, err := tt.m.Compile()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%+v: %v", tt.m, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%+v: err = %v, want %q", tt.m, err, tt.wantErr)
		case err == nil && cm.Matcher() != tt.m:
			t.Errorf("Matcher() = %+v", cm.Matcher())
		}
	}
}

// TestMatcherReadsClaimsByTheOneRule: a matcher finds the claim that
// domain.LookupClaim finds and compares its domain.ClaimString, so a policy
// and the caller's tenant never read one path differently (issue 8: with
// {"org":{"a.b":"t1"}}, "org.a.b" found the tenant but matched no policy).
func TestMatcherReadsClaimsByTheOneRule(t *testing.T) {
	for _, tc := range []struct {
		claims, path string
	}{
		{`{"org":{"a.b":"t1"}}`, "org.a.b"},
		{`{"org":{"a.b":"dotted","a":{"b":"nested"}}}`, "org.a.b"},
		{`{"a":{"b":{"c":"short"}},"a.b":{"c":"long"}}`, "a.b.c"},
		{`{"a.b":"x","a":{"b":{"c":"deep"}}}`, "a.b.c"},
		{`{"a.b":null,"a":{"b":"nested"}}`, "a.b"},
		{`{"n":-0}`, "n"},
		{`{"n":12345678901234567890}`, "n"},
		{`{"n":1e3}`, "n"},
		{`{"b":true}`, "b"},
		{`{"s":""}`, "s"},
		{`{"l":["t1"]}`, "l"},
		{`{"o":{"t":"t1"}}`, "o"},
	} {
		t.Run(tc.claims, func(t *testing.T) {
			var claims map[string]any
			dec := json.NewDecoder(strings.NewReader(tc.claims))
			dec.UseNumber()
			if err := dec.Decode(&claims); err != nil {
				t.Fatal(err)
			}
			v, found := domain.LookupClaim(claims, tc.path)
			s, hasString := domain.ClaimString(v)
			exists, err := Matcher{Claim: tc.path, Operator: OpExists}.Compile()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := exists.Match(claims), found && v != nil; got != want {
				t.Errorf("exists = %v, want %v", got, want)
			}
			equals, err := Matcher{Claim: tc.path, Operator: OpEquals, Value: s}.Compile()
			if err != nil {
				t.Fatal(err)
			}
			if got, want := equals.Match(claims), found && hasString; got != want {
				t.Errorf("equals %q = %v, want %v", s, got, want)
			}
		})
	}
}
