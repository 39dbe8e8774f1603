package discovery

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// explainFixture has groups of every selector kind that overlap: a tool
// can come through several policies, several groups, selectors and an
// explicit listing at once, and an exclusion in one group does not hide
// what another gives.
func explainFixture() Config {
	return Config{
		Tools: fixtureTools(),
		Groups: []Group{
			{ID: "menu-read", Active: true, Selectors: []Selector{{Source: "pizzeria", RequiredTags: []string{"read-only"}}}},
			{ID: "getters", Active: true, Selectors: []Selector{{Method: "get", ExcludedTags: []string{"deprecated"}}, {Name: "regex:(get|list)_"}}},
			{ID: "food", Active: true, Selectors: []Selector{{RequiredLabelIDs: []string{"lbl-food"}}}, ExplicitToolIDs: []string{"pizzeria:list_menu", "native:now"}},
			{ID: "api", Active: true, Selectors: []Selector{{Path: "/api/*"}}, ExcludedToolIDs: []string{"billing:refund"}},
			{ID: "secrets", Active: true, ExplicitToolIDs: []string{"pizzeria:secret_recipe", "pizzeria:old_menu"}, ExcludedToolIDs: []string{"pizzeria:old_menu"}},
			{ID: "broken", Active: true, Selectors: []Selector{{Name: "regex:("}}, ExplicitToolIDs: []string{"native:now"}},
			{ID: "dormant", Active: false, Selectors: []Selector{{}}},
		},
		Policies: []Policy{
			{ID: "staff", Active: true, Priority: 10, GroupIDs: []string{"menu-read", "getters"},
				Matchers: []Matcher{{Claim: "roles", Operator: OpContains, Value: "staff"}}},
			{ID: "cook", Active: true, Priority: 10, GroupIDs: []string{"food", "menu-read", "food"},
				Matchers: []Matcher{{Claim: "roles", Operator: OpContains, Value: "cook"}}},
			{ID: "finance", Active: true, Priority: 5, GroupIDs: []string{"api", "secrets"},
				Matchers: []Matcher{{Claim: "department", Operator: OpEquals, Value: "finance"}}},
			{ID: "anyone", Active: true, Priority: -1, GroupIDs: []string{"broken", "dormant", "ghost"},
				Matchers: []Matcher{{Claim: "sub", Operator: OpExists}}},
		},
	}
}

// grantsOf renders an explained tool's grants as "policy→group via …".
func grantsOf(t ExplainedTool) []string {
	var out []string
	for _, g := range t.Grants {
		var how []string
		for _, s := range g.Selectors {
			how = append(how, s.String())
		}
		if g.Explicit {
			how = append(how, "explicit")
		}
		out = append(out, g.PolicyID+"→"+g.GroupID+" "+strings.Join(how, " & "))
	}
	return out
}

func TestExplainSaysWhichPolicyGroupAndSelectorGaveEachTool(t *testing.T) {
	ix, err := NewIndex(explainFixture())
	if err != nil {
		t.Fatal(err)
	}
	const getters = "{method: get, excludedTags: [deprecated]} & {name: regex:(get|list)_}"
	tests := []struct {
		name   string
		claims map[string]any
		opts   Options
		want   map[string][]string
	}{
		{"staff and cook: two policies give menu-read, three groups give list_menu",
			map[string]any{"roles": []any{"cook", "staff"}}, Options{},
			map[string][]string{
				"billing:list_invoices":  {"staff→getters " + getters},
				"billing:refund":         {"cook→food {requiredLabelIds: [lbl-food]}"},
				"native:now":             {"cook→food explicit"},
				"pizzeria:get_menu_item": {"cook→menu-read {source: pizzeria, requiredTags: [read-only]}", "staff→getters " + getters, "staff→menu-read {source: pizzeria, requiredTags: [read-only]}"},
				"pizzeria:list_menu": {"cook→food {requiredLabelIds: [lbl-food]} & explicit", "cook→menu-read {source: pizzeria, requiredTags: [read-only]}",
					"staff→getters " + getters, "staff→menu-read {source: pizzeria, requiredTags: [read-only]}"},
			}},
		{"finance: an exclusion wins in its group; a bad selector leaves the explicit tool",
			map[string]any{"sub": "u", "department": "finance"}, Options{},
			map[string][]string{
				"billing:list_invoices": {"finance→api {path: /api/*}"},
				"native:now":            {"anyone→broken explicit"},
			}},
		{"finance as an admin: the explicit disabled tool, never the excluded one",
			map[string]any{"department": "finance"}, Options{IncludeDisabled: true},
			map[string][]string{
				"billing:list_invoices":  {"finance→api {path: /api/*}"},
				"pizzeria:secret_recipe": {"finance→secrets explicit"},
			}},
		{"no policy matches", map[string]any{"roles": []any{"guest"}}, Options{}, map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := ix.Explain(tt.claims, tt.opts)
			got := map[string][]string{}
			for _, tool := range e.Tools {
				got[tool.ToolID] = grantsOf(tool)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("grants =\n%s\nwant\n%s", render(got), render(tt.want))
			}
			r := ix.Resolve(tt.claims, tt.opts)
			if !reflect.DeepEqual(e.Access, r.Access) || !reflect.DeepEqual(manifestOf(e), r.Tools) {
				t.Errorf("Explain = %+v / %q; Resolve = %+v / %q", e.Access, ids(manifestOf(e)), r.Access, ids(r.Tools))
			}
		})
	}
}

func render(m map[string][]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "  %s: %q\n", k, m[k])
	}
	return b.String()
}

func manifestOf(e Explanation) []ToolManifestEntry {
	var out []ToolManifestEntry
	for _, t := range e.Tools {
		out = append(out, t.ToolManifestEntry)
	}
	return out
}

// TestExplainAgreesWithResolve is the property: for any claims, Explain
// gives exactly the tools Resolve gives, and each of its grants is true —
// the policy matched and grants the group, the group holds the tool, its
// selectors alone pick the tool exactly when the grant says so, and the
// tool is listed explicitly exactly when the grant says so.
func TestExplainAgreesWithResolve(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	configs := []Config{explainFixture(), policyFixture()}
	for range 30 {
		configs = append(configs, randomConfig(rng))
	}
	claimSets := []map[string]any{
		nil, {"sub": "u"},
		{"roles": []any{"staff"}}, {"roles": []any{"cook"}}, {"roles": []any{"cook", "staff"}, "department": "finance", "sub": "u"},
		{"department": "finance"}, {"department": "accounting", "realm_access": map[string]any{"roles": []any{"pizza-staff"}}},
		{"tenant_id": "acme", "realm_access": map[string]any{"roles": []any{"cook", "pizza-staff"}}},
	}
	var checked, both, selectorsOnly, explicitOnly int
	for ci, cfg := range configs {
		ix, err := NewIndex(cfg)
		if err != nil {
			t.Fatal(err)
		}
		groups := map[string]Group{}
		for _, g := range cfg.Groups {
			groups[g.ID] = g
		}
		policies := map[string]Policy{}
		for _, p := range cfg.Policies {
			policies[p.ID] = p
		}
		for _, claims := range claimSets {
			for _, opts := range []Options{{}, {IncludeDisabled: true}} {
				e := ix.Explain(claims, opts)
				r := ix.Resolve(claims, opts)
				if !reflect.DeepEqual(e.Access, r.Access) || !reflect.DeepEqual(manifestOf(e), r.Tools) {
					t.Fatalf("config %d, claims %v, %+v: Explain %q, Resolve %q", ci, claims, opts, ids(manifestOf(e)), ids(r.Tools))
				}
				for _, tool := range e.Tools {
					if len(tool.Grants) == 0 {
						t.Fatalf("config %d: %s without a grant", ci, tool.ToolID)
					}
					for _, g := range tool.Grants {
						checkGrant(t, ix, cfg, groups[g.GroupID], policies[g.PolicyID], e.Access, tool.ToolID, g, opts)
						checked++
						switch {
						case g.Explicit && g.Selectors != nil:
							both++
						case g.Explicit:
							explicitOnly++
						default:
							selectorsOnly++
						}
					}
				}
			}
		}
	}
	// Not a vacuous property: every kind of grant was checked, often.
	if checked < 500 || both < 20 || selectorsOnly < 100 || explicitOnly < 50 {
		t.Fatalf("grants checked: %d (%d both, %d selectors, %d explicit)", checked, both, selectorsOnly, explicitOnly)
	}
	t.Logf("grants checked: %d (%d both, %d selectors, %d explicit)", checked, both, selectorsOnly, explicitOnly)
}

func checkGrant(t *testing.T, ix *Index, cfg Config, g Group, p Policy, a Access, tool string, gr Grant, opts Options) {
	t.Helper()
	where := fmt.Sprintf("%s via %s→%s", tool, gr.PolicyID, gr.GroupID)
	if !slices.Contains(a.PolicyIDs, p.ID) || !slices.Contains(p.GroupIDs, g.ID) {
		t.Fatalf("%s: the policy did not match or does not grant the group", where)
	}
	if !slices.Contains(ids(ix.GroupTools(g.ID, opts.IncludeDisabled)), tool) {
		t.Fatalf("%s: the group does not hold the tool", where)
	}
	if slices.Contains(g.ExcludedToolIDs, tool) {
		t.Fatalf("%s: an excluded tool", where)
	}
	if gr.Explicit != slices.Contains(g.ExplicitToolIDs, tool) {
		t.Fatalf("%s: explicit = %v, the group's explicit ids %q", where, gr.Explicit, g.ExplicitToolIDs)
	}
	// The group's selectors alone, through the real path.
	only, err := NewIndex(Config{Tools: cfg.Tools, Groups: []Group{{ID: "only", Active: true, Selectors: g.Selectors}}})
	if err != nil {
		t.Fatal(err)
	}
	picked := slices.Contains(ids(only.GroupTools("only", false)), tool)
	if picked != (gr.Selectors != nil) || (picked && !reflect.DeepEqual(gr.Selectors, g.Selectors)) {
		t.Fatalf("%s: selectors %v, but alone they pick it: %v", where, gr.Selectors, picked)
	}
	if !picked && !gr.Explicit {
		t.Fatalf("%s: neither selectors nor explicit", where)
	}
}

// randomConfig draws groups and policies over the fixture tools from
// small alphabets, so that selectors, explicit and excluded ids and
// policies overlap often.
func randomConfig(rng *rand.Rand) Config {
	tools := fixtureTools()
	var toolIDs []string
	for _, tl := range tools {
		toolIDs = append(toolIDs, tl.ID)
	}
	pick := func(from []string, max int) []string {
		var out []string
		for range rng.IntN(max + 1) {
			out = append(out, from[rng.IntN(len(from))])
		}
		return out
	}
	selector := func() Selector {
		var s Selector
		switch rng.IntN(7) {
		case 0:
			s.Source = []string{"pizzeria", "billing", "PIZZ*", "regex:(native|billing)$"}[rng.IntN(4)]
		case 1:
			s.Name = []string{"list_*", "*menu*", "regex:(get|list)_"}[rng.IntN(3)]
		case 2:
			s.Path = []string{"/menu*", "/api/*", "*"}[rng.IntN(3)]
		case 3:
			s.Method = []string{"GET", "put", "regex:(post|delete)$"}[rng.IntN(3)]
		case 4:
			s.RequiredTags = pick([]string{"menu", "read-only", "write", "billing"}, 2)
		case 5:
			s.ExcludedTags = pick([]string{"deprecated", "dangerous", "write"}, 2)
		case 6:
			s.RequiredLabelIDs = pick([]string{"lbl-food", "lbl-finance"}, 1)
		}
		return s
	}
	var cfg Config
	cfg.Tools = tools
	var groupIDs []string
	for i := range 5 {
		g := Group{ID: fmt.Sprintf("g%d", i), Active: rng.IntN(6) > 0,
			ExplicitToolIDs: pick(toolIDs, 2), ExcludedToolIDs: pick(toolIDs, 1)}
		for range rng.IntN(3) {
			g.Selectors = append(g.Selectors, selector())
		}
		cfg.Groups = append(cfg.Groups, g)
		groupIDs = append(groupIDs, g.ID)
	}
	matchers := []Matcher{
		{Claim: "sub", Operator: OpExists},
		{Claim: "roles", Operator: OpContains, Value: "staff"},
		{Claim: "roles", Operator: OpContains, Value: "cook"},
		{Claim: "department", Operator: OpEquals, Value: "finance"},
	}
	for i := range 4 {
		cfg.Policies = append(cfg.Policies, Policy{ID: fmt.Sprintf("p%d", i), Active: true, Priority: rng.IntN(3),
			Matchers: []Matcher{matchers[rng.IntN(len(matchers))]}, GroupIDs: pick(append(groupIDs, "ghost"), 3)})
	}
	return cfg
}

func TestSelectorString(t *testing.T) {
	for _, tt := range []struct {
		s    Selector
		want string
	}{
		{Selector{}, "{}"},
		{Selector{Source: "slack", Name: "post_*", Path: "/chat/*", Method: "POST"}, "{source: slack, name: post_*, path: /chat/*, method: POST}"},
		{Selector{RequiredTags: []string{"a", "b"}, ExcludedTags: []string{"c"}, RequiredLabelIDs: []string{"l"}}, "{requiredTags: [a, b], excludedTags: [c], requiredLabelIds: [l]}"},
		{Selector{Name: "regex:(get|list)_", RequiredTags: []string{}}, "{name: regex:(get|list)_}"},
	} {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("%#v: %q, want %q", tt.s, got, tt.want)
		}
	}
}

func TestExplainIsIndependentOfItsConfig(t *testing.T) {
	cfg := explainFixture()
	ix, err := NewIndex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"roles": []any{"staff", "cook"}}
	before := fmt.Sprint(ix.Explain(claims, Options{}).Tools[0].Grants)
	for _, g := range cfg.Groups {
		for i := range g.Selectors {
			g.Selectors[i].Method = "changed"
			for _, l := range [][]string{g.Selectors[i].RequiredTags, g.Selectors[i].ExcludedTags, g.Selectors[i].RequiredLabelIDs} {
				for j := range l {
					l[j] = "changed"
				}
			}
		}
	}
	if after := fmt.Sprint(ix.Explain(claims, Options{}).Tools[0].Grants); after != before || strings.Contains(after, "changed") {
		t.Errorf("changing the config changed the explanation:\n%s\n%s", before, after)
	}
}
