package discovery

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
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
		"x":                          map[string]any{"y.z": "not reachable by dots"},
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
		{"x.y.z", OpExists, "", false},
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

func TestStringForm(t *testing.T) {
	tests := []struct {
		v    any
		want string
		ok   bool
	}{
		{"x", "x", true}, {"", "", true},
		{true, "true", true}, {false, "false", true},
		{float64(1), "1", true}, {1.5, "1.5", true}, {-0.25, "-0.25", true},
		{1e21, "1000000000000000000000", true}, {1e-7, "0.0000001", true},
		{math.Copysign(0, -1), "0", true},
		{float32(0.1), "0.1", true},
		{json.Number("10"), "10", true}, {json.Number("-0"), "0", true},
		{json.Number("1e2"), "100", true}, {json.Number("2.50"), "2.5", true},
		{json.Number("x"), "", false},
		{int(-3), "-3", true}, {int64(1 << 60), "1152921504606846976", true}, {uint8(7), "7", true},
		{uint64(math.MaxUint64), "18446744073709551615", true},
		{nil, "", false}, {[]any{"a"}, "", false}, {map[string]any{}, "", false},
		{math.Inf(1), "", false}, {math.NaN(), "", false}, {struct{}{}, "", false},
	}
	for _, tt := range tests {
		got, ok := StringForm(tt.v)
		if got != tt.want || ok != tt.ok {
			t.Errorf("StringForm(%#v) = %q, %v; want %q, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestLookupClaim(t *testing.T) {
	c := testClaims()
	tests := []struct {
		path  string
		want  any
		found bool
	}{
		{"str", "engineering", true},
		{"null", nil, true},
		{"missing", nil, false},
		{"realm_access.level", float64(3), true},
		{"realm_access.deep.er", "yes", true},
		{"realm_access.none", nil, true},
		{"realm_access.none.x", nil, false},
		{"realm_access.roles.0", nil, false}, // no list indexing
		{"str.x", nil, false},
		{"a.b", "top-level wins", true},
		{"https://example.com/tenant", "acme", true},
		{"flat.k", "v", true},
		{"", nil, false},
	}
	for _, tt := range tests {
		got, found := LookupClaim(c, tt.path)
		if found != tt.found || got != tt.want {
			t.Errorf("LookupClaim(%q) = %#v, %v; want %#v, %v", tt.path, got, found, tt.want, tt.found)
		}
	}
	if _, found := LookupClaim(nil, "a"); found {
		t.Error("found a claim in nil claims")
	}
}
