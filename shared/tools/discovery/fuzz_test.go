package discovery

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/domain"
)

func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"*", ""}, {"list_*", "list_menu"}, {"a*b*c", "abcbc"}, {"a*a", "a"}, {"?*?", "ab"},
		{"/api/*/users", "/api/v1/users"}, {"\u212a*", "kilo"}, {"*ß*", "SS"}, {"regex:(a", "a"},
		{"regex:a|b", "b"}, {"[a]", "[A]"}, {"**?**", "é"}, {"a\xffb", "A\xffB"}, {"*" + strings.Repeat("ab?", 30) + "*", strings.Repeat("abc", 31)},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, value string) {
		p, err := CompilePattern(pattern)
		if err != nil {
			if !strings.HasPrefix(pattern, RegexPrefix) {
				t.Fatalf("glob %q failed to compile: %v", pattern, err)
			}
			return
		}
		got := p.Match(value)
		if strings.HasPrefix(pattern, RegexPrefix) {
			return
		}
		if pattern == "" {
			if !got {
				t.Fatal("empty pattern did not match")
			}
			return
		}
		// The reference is quadratic: keep it to small inputs.
		if utf8.RuneCountInString(pattern) > 40 || utf8.RuneCountInString(value) > 80 {
			return
		}
		// Invalid UTF-8 decodes to U+FFFD on both sides.
		if want := refGlob(pattern, value); got != want {
			t.Fatalf("glob %q on %q = %v, reference says %v", pattern, value, got, want)
		}
	})
}

func FuzzClaimPath(f *testing.F) {
	f.Add("realm_access.roles", `{"realm_access":{"roles":["a","b"]}}`, "a")
	f.Add("a.b", `{"a.b":null,"a":{"b":1}}`, "1")
	f.Add("x", `{"x":1e400}`, "")
	f.Add("n", `{"n":-0.0}`, "0")
	f.Add("a..b", `{"a":{"":{"b":true}}}`, "true")
	f.Add("l", `{"l":[[1],{"a":1},null,1.5]}`, "1.5")
	f.Add("s", `{"s":"x, y"}`, "x, y,")
	f.Fuzz(func(t *testing.T, path, claimsJSON, value string) {
		for _, useNumber := range []bool{false, true} {
			var claims map[string]any
			dec := json.NewDecoder(bytes.NewReader([]byte(claimsJSON)))
			if useNumber {
				dec.UseNumber()
			}
			if dec.Decode(&claims) != nil {
				claims = map[string]any{path: value}
			}
			// domain.FuzzLookupClaim checks the lookup itself; this checks
			// that every operator agrees with it.
			v, found := domain.LookupClaim(claims, path)
			present := found && v != nil
			for _, op := range Operators() {
				val := value
				if op == OpExists {
					val = ""
				}
				cm, err := Matcher{Claim: path, Operator: op, Value: val}.Compile()
				if err != nil {
					continue
				}
				got := cm.Match(claims)
				if !present && got {
					t.Fatalf("%s on a missing or null claim %q matched", op, path)
				}
				if op == OpExists && got != present {
					t.Fatalf("exists(%q) = %v, claim present: %v", path, got, present)
				}
				if s, ok := domain.ClaimString(v); present && ok {
					if op == OpEquals && got != (s == val) {
						t.Fatalf("equals(%q, %q) = %v with string form %q", path, val, got, s)
					}
					if op == OpNotEquals && got != (s != val) {
						t.Fatalf("not_equals(%q, %q) = %v with string form %q", path, val, got, s)
					}
				}
			}
		}
	})
}
