package discovery

import (
	"encoding/json"
	"fmt"
	"testing"
)

// benchConfig is a deterministic deployment of the size: 10,000
// tools from 100 sources, 200 groups mixing every kind of selector, and
// 1,000 policies mixing every operator.
func benchConfig() Config {
	verbs := []string{"list", "get", "create", "update", "delete", "search", "export", "import"}
	methods := map[string]string{"list": "GET", "get": "GET", "search": "GET", "export": "GET", "create": "POST", "import": "POST", "update": "PUT", "delete": "DELETE"}
	schema := json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["id"]}`)
	var cfg Config
	for i := range 10_000 {
		src := fmt.Sprintf("src%02d", i/100)
		verb := verbs[i%len(verbs)]
		res := fmt.Sprintf("r%d", (i/8)%50)
		access := "read-only"
		if methods[verb] != "GET" {
			access = "write"
		}
		cfg.Tools = append(cfg.Tools, Tool{
			ID:          fmt.Sprintf("%s:%s_%s_%d", src, verb, res, i),
			Name:        fmt.Sprintf("%s_%s_%d", verb, res, i),
			Description: fmt.Sprintf("%s a %s of %s", verb, res, src),
			InputSchema: schema,
			SourceID:    src,
			SourcePath:  fmt.Sprintf("/api/v%d/%s/{id}/items", 1+i%2, res),
			Method:      methods[verb],
			Tags:        []string{access, fmt.Sprintf("dom-%d", i%10), fmt.Sprintf("tier-%d", i%3)},
			LabelIDs:    []string{fmt.Sprintf("lbl-%d", i%20)},
			Version:     "1.0.0",
			Enabled:     i%20 != 0,
		})
	}
	for g := range 200 {
		grp := Group{ID: fmt.Sprintf("group-%03d", g), Active: g%10 != 9}
		switch g % 4 {
		case 0:
			grp.Selectors = []Selector{{Source: fmt.Sprintf("src%02d", g%100)}}
		case 1:
			grp.Selectors = []Selector{{Source: fmt.Sprintf("src%d*", g%10), Name: "list_*", RequiredTags: []string{fmt.Sprintf("dom-%d", g%10)}}}
		case 2:
			grp.Selectors = []Selector{{Name: fmt.Sprintf("regex:(get|search)_r%d_", g%50), Method: "get"}}
		case 3:
			grp.Selectors = []Selector{
				{Path: "/api/v2/*/items", ExcludedTags: []string{"write"}},
				{RequiredLabelIDs: []string{fmt.Sprintf("lbl-%d", g%20)}, Source: fmt.Sprintf("regex:src%d", g%10)},
			}
		}
		for k := range 5 {
			grp.ExplicitToolIDs = append(grp.ExplicitToolIDs, cfg.Tools[(g*37+k*1009)%len(cfg.Tools)].ID)
		}
		grp.ExcludedToolIDs = []string{cfg.Tools[(g*53)%len(cfg.Tools)].ID, "tenant:not_uploaded_yet"}
		cfg.Groups = append(cfg.Groups, grp)
	}
	for p := range 1000 {
		pol := Policy{ID: fmt.Sprintf("policy-%04d", p), Active: p%20 != 19, Priority: p % 10}
		switch p % 5 {
		case 0:
			pol.Matchers = []Matcher{{Claim: "realm_access.roles", Operator: OpContains, Value: fmt.Sprintf("role-%d", p%60)}}
		case 1:
			pol.Matchers = []Matcher{
				{Claim: "tenant_id", Operator: OpEquals, Value: fmt.Sprintf("t%d", p%30)},
				{Claim: "department", Operator: OpIn, Value: fmt.Sprintf("d%d, d%d, d%d", p%7, (p+1)%7, (p+2)%7)},
			}
		case 2:
			pol.Matchers = []Matcher{{Claim: "email", Operator: OpMatches, Value: fmt.Sprintf(`[a-z]+@example%d\.com$`, p%10)}}
		case 3:
			pol.Matchers = []Matcher{
				{Claim: "groups", Operator: OpContains, Value: fmt.Sprintf("grp-%d", p%40)},
				{Claim: "email_verified", Operator: OpEquals, Value: "true"},
				{Claim: "tenant_id", Operator: OpNotIn, Value: "blocked-1, blocked-2"},
			}
		case 4:
			pol.Matchers = []Matcher{{Claim: "scope", Operator: OpContains, Value: fmt.Sprintf("tools:%d ", p%25)}}
		}
		for k := range 1 + p%3 {
			pol.GroupIDs = append(pol.GroupIDs, fmt.Sprintf("group-%03d", (p*7+k*61)%200))
		}
		cfg.Policies = append(cfg.Policies, pol)
	}
	return cfg
}

// benchClaims is one busy caller: several roles, groups and scopes.
func benchClaims() map[string]any {
	return map[string]any{
		"sub":            "user-123",
		"tenant_id":      "t3",
		"department":     "d4",
		"email":          "alice@example3.com",
		"email_verified": true,
		"realm_access":   map[string]any{"roles": []any{"role-5", "role-20", "role-45"}},
		"groups":         []any{"grp-3", "grp-13"},
		"scope":          "openid profile tools:4 tools:9 ",
		"exp":            float64(1893456000),
	}
}

func BenchmarkNewIndex(b *testing.B) {
	cfg := benchConfig()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewIndex(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

func benchIndex(b *testing.B) *Index {
	b.Helper()
	ix, err := NewIndex(benchConfig())
	if err != nil {
		b.Fatal(err)
	}
	return ix
}

// BenchmarkResolveUncached is one caller's manifest from scratch on a
// built index: every policy evaluated, every granted group unioned.
func BenchmarkResolveUncached(b *testing.B) {
	ix := benchIndex(b)
	claims := benchClaims()
	var r Resolution
	b.ReportAllocs()
	for b.Loop() {
		r = ix.Resolve(claims, Options{})
	}
	b.ReportMetric(float64(len(r.PolicyIDs)), "policies")
	b.ReportMetric(float64(len(r.GroupIDs)), "groups")
	b.ReportMetric(float64(len(r.Tools)), "tools")
}

func BenchmarkResolveAccess(b *testing.B) {
	ix := benchIndex(b)
	claims := benchClaims()
	b.ReportAllocs()
	for b.Loop() {
		ix.ResolveAccess(claims)
	}
}

func BenchmarkGroupTools(b *testing.B) {
	ix := benchIndex(b)
	b.ReportAllocs()
	for b.Loop() {
		ix.GroupTools("group-000", false)
	}
}

func BenchmarkGlob(b *testing.B) {
	p, _ := CompilePattern("/api/*/items*")
	v := foldRunes("/api/v2/r17/{id}/items")
	b.ReportAllocs()
	for b.Loop() {
		p.matchFolded("", v)
	}
}
