package jwtauth

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

func mustClaims(t testing.TB, s string) Claims {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var c Claims
	must(t, dec.Decode(&c))
	return c
}

func TestScopes(t *testing.T) {
	tests := []struct {
		name   string
		claims string
		want   []string
		admin  bool
	}{
		{"scope string", `{"scope":"a b  agentauth:admin"}`, []string{"a", "b", "agentauth:admin"}, true},
		{"scp list", `{"scp":["a","agentauth:admin"]}`, []string{"a", "agentauth:admin"}, true},
		{"scp string", `{"scp":"a b"}`, []string{"a", "b"}, false},
		{"scope wins over scp", `{"scope":"a","scp":["agentauth:admin"]}`, []string{"a"}, false},
		{"duplicates dropped", `{"scope":"a a b"}`, []string{"a", "b"}, false},
		{"scp list with non-strings", `{"scp":["a",1,null]}`, []string{"a"}, false},
		{"admin is exact", `{"scope":"agentauth:admin2 AGENTAUTH:ADMIN"}`, []string{"agentauth:admin2", "AGENTAUTH:ADMIN"}, false},
		{"none", `{}`, []string{}, false},
		{"scope not a string", `{"scope":["agentauth:admin"]}`, []string{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustClaims(t, tt.claims)
			got := c.Scopes()
			if len(got) != 0 || len(tt.want) != 0 {
				if !reflect.DeepEqual(got, tt.want) {
					t.Fatalf("Scopes = %q, want %q", got, tt.want)
				}
			}
			if c.IsAdmin() != tt.admin {
				t.Fatalf("IsAdmin = %v, want %v", c.IsAdmin(), tt.admin)
			}
		})
	}
}

func TestSubject(t *testing.T) {
	if got := mustClaims(t, `{"sub":"agent-1"}`).Subject(); got != "agent-1" {
		t.Fatalf("Subject = %q", got)
	}
	if got := mustClaims(t, `{"sub":1}`).Subject(); got != "" {
		t.Fatalf("numeric sub: Subject = %q, want empty", got)
	}
}

func TestStringAt(t *testing.T) {
	c := mustClaims(t, `{
		"tenant_id": "t-1",
		"org": {"tenant": {"id": "t-nested"}, "num": 42, "empty": "", "null": null},
		"https://example.com/tenant": "t-url",
		"a.b": {"c": "dotted-key"},
		"list": ["x"],
		"team": {"a.b": "t1", "x": {"y.z": "deep-dotted"}},
		"p": {"q": {"r": "shorter names"}},
		"p.q": {"r": "longer name"},
		"flags": {"on": true, "zero": -0, "thousand": 1e3, "big": 12345678901234567890}
	}`)
	tests := []struct {
		path string
		want string
		ok   bool
	}{
		{"tenant_id", "t-1", true},
		{"org.tenant.id", "t-nested", true},
		{"https://example.com/tenant", "t-url", true},
		{"a.b.c", "dotted-key", true},
		{"org.num", "42", true},
		// domain.LookupClaim: dotted names inside objects, the longer name first.
		{"team.a.b", "t1", true},
		{"team.x.y.z", "deep-dotted", true},
		{"p.q.r", "longer name", true},
		// domain.ClaimString: the string form policies compare.
		{"flags.on", "true", true},
		{"flags.zero", "0", true},
		{"flags.thousand", "1000", true},
		{"flags.big", "12345678901234567890", true},
		{"org.empty", "", false},
		{"org.null", "", false},
		{"org.tenant", "", false},
		{"org.missing", "", false},
		{"list", "", false},
		{"tenant_id.x", "", false},
		{"", "", false},
		{".", "", false},
		{"org.", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, ok := c.StringAt(tt.path)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("StringAt(%q) = %q, %v; want %q, %v", tt.path, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestAtNullIsPresent: a null claim is there, with no value, as
// domain.LookupClaim says; an absent one is not.
func TestAtNullIsPresent(t *testing.T) {
	c := mustClaims(t, `{"tenant_id": null, "org": {"id": null}}`)
	for _, path := range []string{"tenant_id", "org.id"} {
		if v, ok := c.At(path); !ok || v != nil {
			t.Errorf("At(%q) = %v, %v; want nil, true", path, v, ok)
		}
		if s, ok := c.StringAt(path); ok {
			t.Errorf("StringAt(%q) = %q, true; null has no string form", path, s)
		}
	}
	if v, ok := c.At("missing"); ok || v != nil {
		t.Errorf("At(missing) = %v, %v", v, ok)
	}
}

func TestListAt(t *testing.T) {
	c := mustClaims(t, `{
		"skills": ["search", " summarize ", ""],
		"csv": "search, summarize,,",
		"one": "search",
		"emptylist": [],
		"emptystr": "",
		"mixed": ["search", 1],
		"nested": {"skills": ["deep"]},
		"null": null,
		"num": 3
	}`)
	tests := []struct {
		path string
		want []string
		ok   bool
	}{
		{"skills", []string{"search", "summarize"}, true},
		{"csv", []string{"search", "summarize"}, true},
		{"one", []string{"search"}, true},
		{"emptylist", []string{}, true},
		{"emptystr", []string{}, true},
		{"nested.skills", []string{"deep"}, true},
		{"mixed", nil, false},
		{"null", nil, false},
		{"num", nil, false},
		{"absent", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			got, ok := c.ListAt(tt.path)
			if !reflect.DeepEqual(got, tt.want) || ok != tt.ok {
				t.Fatalf("ListAt(%q) = %#v, %v; want %#v, %v", tt.path, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// FuzzClaimPath: the dot-path walk never panics on any claims or path.
func FuzzClaimPath(f *testing.F) {
	f.Add(`{"a":{"b":"c"}}`, "a.b")
	f.Add(`{"a.b":{"c":["x","y"]}}`, "a.b.c")
	f.Add(`{"a":{"":{"":"z"}}}`, "a..")
	f.Fuzz(func(t *testing.T, claims, path string) {
		dec := json.NewDecoder(bytes.NewReader([]byte(claims)))
		dec.UseNumber()
		var c Claims
		if dec.Decode(&c) != nil {
			return
		}
		if s, ok := c.StringAt(path); ok && s == "" {
			t.Fatal("StringAt reported an empty string as present")
		}
		if l, ok := c.ListAt(path); ok && l == nil {
			t.Fatal("ListAt reported a nil list as present")
		}
		_ = c.Scopes()
		_ = c.IsAdmin()
		_ = c.Subject()
	})
}
