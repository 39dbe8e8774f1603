package domain

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// decodeClaims decodes JSON claims as the JWT verifier does (UseNumber),
// or with float64 numbers when useNumber is false.
func decodeClaims(t testing.TB, s string, useNumber bool) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	if useNumber {
		dec.UseNumber()
	}
	var c map[string]any
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("claims %s: %v", s, err)
	}
	return c
}

// seen says what a lookup found: "missing", "null", "=<string form>",
// "object" or "list".
func seen(v any, found bool) string {
	if !found {
		return "missing"
	}
	if v == nil {
		return "null"
	}
	if s, ok := ClaimString(v); ok {
		return "=" + s
	}
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "list"
	}
	return "other"
}

// claimPathCases are the edge cases of the one claim-path rule. Every
// reader of claims (tenant, policy matchers, subject templates) must see
// exactly these answers.
var claimPathCases = []struct {
	name, claims, path, want string
}{
	// Names with dots.
	{"dotted top-level name", `{"https://example.com/tenant":"acme"}`, "https://example.com/tenant", "=acme"},
	{"dotted name inside an object", `{"org":{"a.b":"t1"}}`, "org.a.b", "=t1"},
	{"dotted name under a dotted name", `{"https://x.example/claims":{"tenant.id":"t9"}}`, "https://x.example/claims.tenant.id", "=t9"},
	{"plain nesting", `{"org":{"tenant":{"id":"t"}}}`, "org.tenant.id", "=t"},
	// Nested and dotted spellings of one path.
	{"whole name beats nesting at the top", `{"a.b":"top","a":{"b":"nested"}}`, "a.b", "=top"},
	{"whole name beats nesting inside an object", `{"org":{"a.b":"dotted","a":{"b":"nested"}}}`, "org.a.b", "=dotted"},
	{"longer name first", `{"a":{"b":{"c":"short"}},"a.b":{"c":"long"}}`, "a.b.c", "=long"},
	{"longer name that leads nowhere is passed over", `{"a.b":"x","a":{"b":{"c":"deep"}}}`, "a.b.c", "=deep"},
	{"null whole name still wins", `{"a.b":null,"a":{"b":"nested"}}`, "a.b", "null"},
	// Null and missing.
	{"null", `{"t":null}`, "t", "null"},
	{"nested null", `{"org":{"t":null}}`, "org.t", "null"},
	{"through null", `{"org":null}`, "org.t", "missing"},
	{"missing", `{"a":"x"}`, "b", "missing"},
	{"missing inside an object", `{"org":{"x":"y"}}`, "org.t", "missing"},
	{"into a string", `{"a":"s"}`, "a.b", "missing"},
	{"no list indexing", `{"l":["x"]}`, "l.0", "missing"},
	{"case matters", `{"Tenant":"t"}`, "tenant", "missing"},
	// Values.
	{"list", `{"l":["x",1]}`, "l", "list"},
	{"object", `{"o":{"a":1}}`, "o", "object"},
	{"empty string is present", `{"s":""}`, "s", "="},
	{"true", `{"b":true}`, "b", "=true"},
	{"false", `{"b":false}`, "b", "=false"},
	{"integer", `{"n":42}`, "n", "=42"},
	{"minus zero", `{"n":-0}`, "n", "=0"},
	{"minus zero point zero", `{"n":-0.0}`, "n", "=0"},
	{"exponent", `{"n":1e3}`, "n", "=1000"},
	{"trailing zero", `{"n":2.50}`, "n", "=2.5"},
	{"beyond float64 precision", `{"n":9007199254740993}`, "n", "=9007199254740993"},
	{"beyond int64", `{"n":12345678901234567890}`, "n", "=12345678901234567890"},
	{"huge exponent", `{"n":1e400}`, "n", "other"},
	// Paths.
	{"empty path", `{"":"v"}`, "", "missing"},
	{"leading dot", `{".a":"v"}`, ".a", "missing"},
	{"trailing dot", `{"a.":"v"}`, "a.", "missing"},
	{"empty segment", `{"a":{"":{"b":"v"}}}`, "a..b", "missing"},
	{"longest path", `{"` + strings.Repeat("a", MaxClaimPath) + `":"v"}`, strings.Repeat("a", MaxClaimPath), "=v"},
	{"over-long path", `{"` + strings.Repeat("a", MaxClaimPath+1) + `":"v"}`, strings.Repeat("a", MaxClaimPath+1), "missing"},
}

func TestLookupClaim(t *testing.T) {
	for _, tc := range claimPathCases {
		t.Run(tc.name, func(t *testing.T) {
			v, found := LookupClaim(decodeClaims(t, tc.claims, true), tc.path)
			if got := seen(v, found); got != tc.want {
				t.Fatalf("LookupClaim(%s, %q) is %s, want %s", tc.claims, tc.path, got, tc.want)
			}
		})
	}
	t.Run("nil claims", func(t *testing.T) {
		if v, found := LookupClaim(nil, "a"); found || v != nil {
			t.Fatalf("LookupClaim(nil) = %v, %v", v, found)
		}
	})
	t.Run("maps of strings", func(t *testing.T) {
		c := map[string]any{"org": map[string]string{"a.b": "t1"}}
		if got := seen(LookupClaim(c, "org.a.b")); got != "=t1" {
			t.Fatalf("got %s", got)
		}
	})
}

func TestClaimString(t *testing.T) {
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
		{json.Number("10"), "10", true}, {json.Number("-0"), "0", true}, {json.Number("-0.0"), "0", true},
		{json.Number("1e2"), "100", true}, {json.Number("2.50"), "2.5", true},
		{json.Number("-12345678901234567890"), "-12345678901234567890", true},
		{json.Number("x"), "", false}, {json.Number("1e400"), "", false},
		{int(-3), "-3", true}, {int64(1 << 60), "1152921504606846976", true}, {uint8(7), "7", true},
		{uint64(math.MaxUint64), "18446744073709551615", true},
		{nil, "", false}, {[]any{"a"}, "", false}, {map[string]any{}, "", false},
		{math.Inf(1), "", false}, {math.NaN(), "", false}, {struct{}{}, "", false},
	}
	for _, tt := range tests {
		got, ok := ClaimString(tt.v)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ClaimString(%#v) = %q, %v; want %q, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

// TestClaimStringWithoutUseNumber: claims decoded with float64 numbers read
// the same as with json.Number wherever float64 is exact.
func TestClaimStringWithoutUseNumber(t *testing.T) {
	for _, s := range []string{`-0`, `-0.0`, `1e3`, `2.50`, `42`, `-7`, `0.25`} {
		a, _ := ClaimString(decodeClaims(t, `{"n":`+s+`}`, true)["n"])
		b, _ := ClaimString(decodeClaims(t, `{"n":`+s+`}`, false)["n"])
		if a != b {
			t.Errorf("%s: json.Number %q, float64 %q", s, a, b)
		}
	}
}

func TestCheckClaimPath(t *testing.T) {
	for _, tc := range []struct {
		path, err string
	}{
		{"tenant_id", ""},
		{"https://example.com/tenant", ""},
		{"org.tenant.id", ""},
		{strings.Repeat("a", MaxClaimPath), ""},
		{"", "required"},
		{".a", "empty segment"},
		{"a.", "empty segment"},
		{"a..b", "empty segment"},
		{".", "empty segment"},
		{strings.Repeat("a", MaxClaimPath+1), "at most 256"},
	} {
		err := CheckClaimPath(tc.path)
		if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("CheckClaimPath(%.20q) = %v, want %q", tc.path, err, tc.err)
		}
	}
}

// FuzzLookupClaim: the lookup never panics, an exact top-level name is
// always what it finds, and it finds nothing at a path CheckClaimPath
// refuses.
func FuzzLookupClaim(f *testing.F) {
	f.Add(`{"org":{"a.b":"t1"}}`, "org.a.b")
	f.Add(`{"a.b":null,"a":{"b":1}}`, "a.b")
	f.Add(`{"a":{"b":{"c":1}},"a.b":{"c":2}}`, "a.b.c")
	f.Add(`{"a":{"":{"":"z"}}}`, "a..")
	f.Add(`{"l":[[1],{"a":1},null,1.5]}`, "l")
	f.Fuzz(func(t *testing.T, claimsJSON, path string) {
		var claims map[string]any
		dec := json.NewDecoder(strings.NewReader(claimsJSON))
		dec.UseNumber()
		if dec.Decode(&claims) != nil {
			return
		}
		v, found := LookupClaim(claims, path)
		if !found && v != nil {
			t.Fatalf("not found but returned %v", v)
		}
		if CheckClaimPath(path) != nil {
			if found {
				t.Fatalf("found %v at refused path %q", v, path)
			}
			return
		}
		if direct, ok := claims[path]; ok {
			a, _ := json.Marshal(direct)
			b, _ := json.Marshal(v)
			if !found || !bytes.Equal(a, b) {
				t.Fatalf("LookupClaim(%q) = %s, %v; the top-level claim is %s", path, b, found, a)
			}
		}
		_, _ = ClaimString(v)
	})
}
