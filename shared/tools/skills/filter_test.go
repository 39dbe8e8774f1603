package skills

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// isolationCorpus has one global skill and, for tenants A and B, a skill
// each, plus a skill of B that has the same name as A's.
func isolationCorpus(t *testing.T) *Index {
	t.Helper()
	ix, err := NewIndex([]Skill{
		{Name: "report", Description: "write a report", Content: "report data", Scope: ScopeGlobal},
		{Name: "a-private", Description: "report for tenant a", Content: "report data", Scope: ScopeTenant, TenantID: "tenant-a"},
		{Name: "b-private", Description: "report for tenant b", Content: "report data", Scope: ScopeTenant, TenantID: "tenant-b"},
		{Name: "shared-name", Description: "report of b under a shared name", Content: "report data", Scope: ScopeTenant, TenantID: "tenant-b"},
		{Name: "shared-name", Description: "report of a under a shared name", Content: "report data", Scope: ScopeTenant, TenantID: "tenant-a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func names(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
		if r.Scope == ScopeTenant {
			out[i] = r.TenantID + "/" + r.Name
		}
	}
	slices.Sort(out)
	return out
}

func TestSearchTenantIsolation(t *testing.T) {
	ix := isolationCorpus(t)
	tests := []struct {
		name  string
		query Query
		want  []string
	}{
		{"no tenant sees only global", Query{Text: "report"}, []string{"report"}},
		{"no tenant, allow list ignored", Query{Text: "report", AllowedSkillNames: []string{"a-private", "b-private"}}, []string{"report"}},
		{"tenant with absent allow list", Query{Text: "report", TenantID: "tenant-a"}, []string{"report"}},
		{"tenant with empty allow list", Query{Text: "report", TenantID: "tenant-a", AllowedSkillNames: []string{}}, []string{"report"}},
		{"tenant with allow list of empty name", Query{Text: "report", TenantID: "tenant-a", AllowedSkillNames: []string{""}}, []string{"report"}},
		{"A sees its allowed skill", Query{Text: "report", TenantID: "tenant-a", AllowedSkillNames: []string{"a-private"}}, []string{"report", "tenant-a/a-private"}},
		{"A never sees B's skill, even when allowed by name", Query{Text: "report", TenantID: "tenant-a", AllowedSkillNames: []string{"a-private", "b-private"}}, []string{"report", "tenant-a/a-private"}},
		{"B never sees A's skill, even when allowed by name", Query{Text: "report", TenantID: "tenant-b", AllowedSkillNames: []string{"a-private", "b-private"}}, []string{"report", "tenant-b/b-private"}},
		{"a shared name resolves to the caller's own tenant (A)", Query{Text: "report", TenantID: "tenant-a", AllowedSkillNames: []string{"shared-name"}}, []string{"report", "tenant-a/shared-name"}},
		{"a shared name resolves to the caller's own tenant (B)", Query{Text: "report", TenantID: "tenant-b", AllowedSkillNames: []string{"shared-name"}}, []string{"report", "tenant-b/shared-name"}},
		{"names match exactly, not by case or prefix", Query{Text: "report", TenantID: "tenant-a", AllowedSkillNames: []string{"A-Private", "a-priv", "a-private "}}, []string{"report"}},
		{"unknown tenant sees only global", Query{Text: "report", TenantID: "tenant-c", AllowedSkillNames: []string{"a-private", "b-private", "shared-name"}}, []string{"report"}},
		{"empty query applies the same filter", Query{TenantID: "tenant-b", AllowedSkillNames: []string{"a-private", "b-private"}}, []string{"report", "tenant-b/b-private"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := names(ix.Search(tc.query))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Search(%+v) = %v, want %v", tc.query, got, tc.want)
			}
		})
	}
}

func TestQueryVisible(t *testing.T) {
	global := Skill{Name: "g", Scope: ScopeGlobal}
	ownA := Skill{Name: "x", Scope: ScopeTenant, TenantID: "a"}
	ownB := Skill{Name: "x", Scope: ScopeTenant, TenantID: "b"}
	odd := Skill{Name: "x", Scope: "public", TenantID: "a"}
	tests := []struct {
		name  string
		query Query
		skill Skill
		want  bool
		why   Reason
	}{
		{"global, no tenant", Query{}, global, true, ReasonGlobal},
		{"global, any tenant", Query{TenantID: "a"}, global, true, ReasonGlobal},
		{"own tenant, allowed", Query{TenantID: "a", AllowedSkillNames: []string{"x"}}, ownA, true, ReasonAllowed},
		{"own tenant, nil allow list", Query{TenantID: "a"}, ownA, false, ReasonNotAllowed},
		{"own tenant, empty allow list", Query{TenantID: "a", AllowedSkillNames: []string{}}, ownA, false, ReasonNotAllowed},
		{"own tenant, not on allow list", Query{TenantID: "a", AllowedSkillNames: []string{"y"}}, ownA, false, ReasonNotAllowed},
		{"other tenant, allowed by name", Query{TenantID: "a", AllowedSkillNames: []string{"x"}}, ownB, false, ReasonOtherTenant},
		{"no tenant, allowed by name", Query{AllowedSkillNames: []string{"x"}}, ownA, false, ReasonOtherTenant},
		{"unknown scope fails closed", Query{TenantID: "a", AllowedSkillNames: []string{"x"}}, odd, false, ReasonUnknownScope},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.query.Visible(tc.skill); got != tc.want {
				t.Fatalf("Visible = %v, want %v", got, tc.want)
			}
			if got := tc.query.Why(tc.skill); got != tc.why || got.Visible() != tc.want {
				t.Fatalf("Why = %q, want %q", got, tc.why)
			}
		})
	}
}

// TestSearchAgreesWithVisible checks, on random corpora and callers, that
// Search returns exactly the visible skills (an empty query lists them all)
// and never one that Query.Visible rejects, and that Explain lists the
// same ones as visible, plus the caller's tenant's hidden ones.
func TestSearchAgreesWithVisible(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	tenants := []string{"", "t1", "t2", "t3"}
	for round := range 200 {
		var corpus []Skill
		for i := range 30 {
			s := Skill{Name: fmt.Sprintf("s%d", rng.IntN(12)), Description: "common words", Content: fmt.Sprintf("body %d", i)}
			if tn := tenants[rng.IntN(len(tenants))]; tn == "" {
				s.Scope = ScopeGlobal
			} else {
				s.Scope, s.TenantID = ScopeTenant, tn
			}
			corpus = append(corpus, s)
		}
		corpus = dedupe(corpus)
		ix, err := NewIndex(corpus)
		if err != nil {
			t.Fatal(err)
		}
		q := Query{TenantID: tenants[rng.IntN(len(tenants))], TopK: MaxTopK}
		if rng.IntN(3) > 0 {
			for range rng.IntN(6) {
				q.AllowedSkillNames = append(q.AllowedSkillNames, fmt.Sprintf("s%d", rng.IntN(14)))
			}
		}
		var want, hidden []string
		for _, s := range corpus {
			switch {
			case q.Visible(s):
				want = append(want, names([]Result{{Skill: s}})...)
			case s.Scope == ScopeTenant && s.TenantID == q.TenantID && q.TenantID != "":
				hidden = append(hidden, names([]Result{{Skill: s}})...)
			}
		}
		slices.Sort(want)
		slices.Sort(hidden)
		var explained, explainedHidden []string
		for _, v := range ix.Explain(q) {
			n := names([]Result{{Skill: v.Skill}})
			if v.Reason != q.Why(v.Skill) {
				t.Fatalf("round %d: %v: reason %q, Why %q", round, n, v.Reason, q.Why(v.Skill))
			}
			if v.Reason.Visible() {
				explained = append(explained, n...)
			} else {
				explainedHidden = append(explainedHidden, n...)
			}
		}
		slices.Sort(explained)
		slices.Sort(explainedHidden)
		if !slices.Equal(explained, want) || !slices.Equal(explainedHidden, hidden) {
			t.Fatalf("round %d, query %+v: Explain %v hidden %v, want %v hidden %v", round, q, explained, explainedHidden, want, hidden)
		}
		for _, text := range []string{"", "common", "words body"} {
			q.Text = text
			got := names(ix.Search(q))
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, query %+v: got %v, want %v", round, q, got, want)
			}
		}
	}
}

func dedupe(in []Skill) []Skill {
	seen := map[string]bool{}
	var out []Skill
	for _, s := range in {
		k := string(s.Scope) + "\x00" + s.TenantID + "\x00" + s.Name
		if !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	return out
}

func TestNewIndexRejects(t *testing.T) {
	tests := []struct {
		name   string
		skills []Skill
		want   string
	}{
		{"empty name", []Skill{{Scope: ScopeGlobal}}, "name is empty"},
		{"unknown scope", []Skill{{Name: "x", Scope: "public"}}, `scope "public"`},
		{"missing scope", []Skill{{Name: "x"}}, `scope ""`},
		{"tenant skill without tenant", []Skill{{Name: "x", Scope: ScopeTenant}}, "no tenant id"},
		{"global skill with tenant", []Skill{{Name: "x", Scope: ScopeGlobal, TenantID: "a"}}, "global skill has tenant id"},
		{"duplicate global", []Skill{{Name: "x", Scope: ScopeGlobal}, {Name: "x", Scope: ScopeGlobal}}, "duplicate global skill"},
		{"duplicate within tenant", []Skill{{Name: "x", Scope: ScopeTenant, TenantID: "a"}, {Name: "x", Scope: ScopeTenant, TenantID: "a"}}, `duplicate skill "x" for tenant "a"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewIndex(tc.skills)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewIndex error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	// The same name in different tenants, and in global and a tenant, is fine.
	if _, err := NewIndex([]Skill{
		{Name: "x", Scope: ScopeGlobal},
		{Name: "x", Scope: ScopeTenant, TenantID: "a"},
		{Name: "x", Scope: ScopeTenant, TenantID: "b"},
	}); err != nil {
		t.Fatalf("NewIndex: %v", err)
	}
}

func TestExplainInNameOrder(t *testing.T) {
	ix := isolationCorpus(t)
	got := []string{}
	for _, v := range ix.Explain(Query{TenantID: "tenant-a", AllowedSkillNames: []string{"shared-name", "b-private"}}) {
		got = append(got, v.TenantID+"/"+v.Name+" "+string(v.Reason))
	}
	want := []string{"tenant-a/a-private not_allowed", "/report global", "tenant-a/shared-name allowed"}
	if !slices.Equal(got, want) {
		t.Fatalf("Explain = %q, want %q", got, want)
	}
}
