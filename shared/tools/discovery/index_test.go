package discovery

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func fixtureTools() []Tool {
	tool := func(id, path, method string, tags []string, labels []string) Tool {
		src, op, _ := SplitToolID(id)
		return Tool{ID: id, Name: op, Description: "does " + op, SourceID: src, SourcePath: path, Method: method,
			Tags: tags, LabelIDs: labels, Enabled: true, InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}
	}
	secret := tool("pizzeria:secret_recipe", "/recipe", "GET", []string{"menu"}, nil)
	secret.Enabled = false
	return []Tool{
		tool("pizzeria:list_menu", "/menu", "GET", []string{"menu", "read-only"}, []string{"lbl-food"}),
		tool("pizzeria:get_menu_item", "/menu/{id}", "GET", []string{"menu", "read-only"}, nil),
		tool("pizzeria:update_menu", "/menu/{id}", "PUT", []string{"menu", "write"}, nil),
		tool("pizzeria:delete_menu", "/menu/{id}", "DELETE", []string{"menu", "write", "dangerous"}, nil),
		tool("pizzeria:old_menu", "/v0/menu", "GET", []string{"menu", "deprecated"}, nil),
		secret,
		tool("billing:list_invoices", "/api/v1/invoices", "GET", []string{"billing", "read-only"}, []string{"lbl-finance"}),
		tool("billing:refund", "/api/v1/invoices/{id}/refund", "POST", []string{"billing", "write"}, []string{"lbl-finance", "lbl-food"}),
		tool("native:now", "", "", nil, nil),
	}
}

// groupToolIDs builds an index with the fixture tools and one group g and
// returns the group's tool ids.
func groupToolIDs(t *testing.T, g Group, includeDisabled bool) ([]string, *Index) {
	t.Helper()
	g.ID = "g"
	ix, err := NewIndex(Config{Tools: fixtureTools(), Groups: []Group{g}})
	if err != nil {
		t.Fatal(err)
	}
	return ids(ix.GroupTools("g", includeDisabled)), ix
}

func ids(es []ToolManifestEntry) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, e.ToolID)
	}
	return out
}

func TestSelectors(t *testing.T) {
	allEnabled := []string{"billing:list_invoices", "billing:refund", "native:now", "pizzeria:delete_menu", "pizzeria:get_menu_item", "pizzeria:list_menu", "pizzeria:old_menu", "pizzeria:update_menu"}
	pizzeria := []string{"pizzeria:delete_menu", "pizzeria:get_menu_item", "pizzeria:list_menu", "pizzeria:old_menu", "pizzeria:update_menu"}
	tests := []struct {
		name string
		sels []Selector
		want []string
	}{
		{"empty selector matches every enabled tool", []Selector{{}}, allEnabled},
		{"star patterns", []Selector{{Source: "*", Name: "*", Path: "*", Method: "*"}}, allEnabled},
		{"source exact", []Selector{{Source: "pizzeria"}}, pizzeria},
		{"source glob case-insensitive", []Selector{{Source: "PIZZ*"}}, pizzeria},
		{"source glob whole value", []Selector{{Source: "pizz"}}, []string{}},
		{"name glob", []Selector{{Name: "list_*"}}, []string{"billing:list_invoices", "pizzeria:list_menu"}},
		{"name ?", []Selector{{Name: "?et_menu_item"}}, []string{"pizzeria:get_menu_item"}},
		{"name regex", []Selector{{Name: "regex:(get|list)_"}}, []string{"billing:list_invoices", "pizzeria:get_menu_item", "pizzeria:list_menu"}},
		{"name regex anchored at start", []Selector{{Name: "regex:menu"}}, []string{}},
		{"name regex case-insensitive", []Selector{{Name: "regex:LIST_MENU$"}}, []string{"pizzeria:list_menu"}},
		{"path star crosses slashes", []Selector{{Path: "/api/*"}}, []string{"billing:list_invoices", "billing:refund"}},
		{"path suffix", []Selector{{Path: "*/refund"}}, []string{"billing:refund"}},
		{"path prefix", []Selector{{Path: "/menu*"}}, []string{"pizzeria:delete_menu", "pizzeria:get_menu_item", "pizzeria:list_menu", "pizzeria:update_menu"}},
		{"path glob against an empty path", []Selector{{Source: "native", Path: "/*"}}, []string{}},
		{"path star against an empty path", []Selector{{Source: "native", Path: "*"}}, []string{"native:now"}},
		{"empty path and method not checked", []Selector{{Source: "native", Path: "", Method: ""}}, []string{"native:now"}},
		{"method case-insensitive", []Selector{{Method: "get"}}, []string{"billing:list_invoices", "pizzeria:get_menu_item", "pizzeria:list_menu", "pizzeria:old_menu"}},
		{"method regex", []Selector{{Method: "regex:(put|delete)$"}}, []string{"pizzeria:delete_menu", "pizzeria:update_menu"}},
		{"required tags all present", []Selector{{RequiredTags: []string{"menu", "read-only"}}}, []string{"pizzeria:get_menu_item", "pizzeria:list_menu"}},
		{"required tags exact", []Selector{{RequiredTags: []string{"Menu"}}}, []string{}},
		{"excluded tags none present", []Selector{{Source: "pizzeria", ExcludedTags: []string{"write", "deprecated"}}}, []string{"pizzeria:get_menu_item", "pizzeria:list_menu"}},
		{"required label", []Selector{{RequiredLabelIDs: []string{"lbl-food"}}}, []string{"billing:refund", "pizzeria:list_menu"}},
		{"required labels all present", []Selector{{RequiredLabelIDs: []string{"lbl-food", "lbl-finance"}}}, []string{"billing:refund"}},
		{"criteria of one selector AND", []Selector{{Source: "pizzeria", Method: "GET", ExcludedTags: []string{"deprecated"}}}, []string{"pizzeria:get_menu_item", "pizzeria:list_menu"}},
		{"selectors AND", []Selector{{Source: "pizzeria"}, {RequiredTags: []string{"write"}}}, []string{"pizzeria:delete_menu", "pizzeria:update_menu"}},
		{"selectors AND to nothing", []Selector{{Source: "pizzeria"}, {Source: "billing"}}, []string{}},
		{"no selectors select nothing", nil, []string{}},
		{"a selector that does not compile matches nothing", []Selector{{Source: "pizzeria"}, {Name: "regex:(", Source: "*"}}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, incl := range []bool{false, true} {
				got, _ := groupToolIDs(t, Group{Active: true, Selectors: tt.sels}, incl)
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("includeDisabled=%v: tools = %q, want %q", incl, got, tt.want)
				}
			}
		})
	}
}

func TestGroupMembership(t *testing.T) {
	tests := []struct {
		name          string
		g             Group
		want, wantAll []string // without and with disabled tools
		warning       string
	}{
		{"explicit only",
			Group{Active: true, ExplicitToolIDs: []string{"billing:refund", "native:now"}},
			[]string{"billing:refund", "native:now"}, []string{"billing:refund", "native:now"}, ""},
		{"selectors plus explicit",
			Group{Active: true, Selectors: []Selector{{Source: "billing"}}, ExplicitToolIDs: []string{"native:now"}},
			[]string{"billing:list_invoices", "billing:refund", "native:now"}, []string{"billing:list_invoices", "billing:refund", "native:now"}, ""},
		{"excluded removes selector matches",
			Group{Active: true, Selectors: []Selector{{Source: "billing"}}, ExcludedToolIDs: []string{"billing:refund"}},
			[]string{"billing:list_invoices"}, []string{"billing:list_invoices"}, ""},
		{"exclusion wins over explicit",
			Group{Active: true, ExplicitToolIDs: []string{"billing:refund", "native:now"}, ExcludedToolIDs: []string{"billing:refund"}},
			[]string{"native:now"}, []string{"native:now"}, ""},
		{"explicit disabled tool only for admins",
			Group{Active: true, ExplicitToolIDs: []string{"pizzeria:secret_recipe", "native:now"}},
			[]string{"native:now"}, []string{"native:now", "pizzeria:secret_recipe"}, ""},
		{"excluded disabled tool stays out for admins",
			Group{Active: true, ExplicitToolIDs: []string{"pizzeria:secret_recipe"}, ExcludedToolIDs: []string{"pizzeria:secret_recipe"}},
			[]string{}, []string{}, ""},
		{"selectors never pick a disabled tool",
			Group{Active: true, Selectors: []Selector{{Name: "secret_*"}}},
			[]string{}, []string{}, ""},
		{"unknown explicit tool is skipped with a warning",
			Group{Active: true, ExplicitToolIDs: []string{"tenant:uploaded_later"}},
			[]string{}, []string{}, `group g: explicit tool "tenant:uploaded_later" does not exist`},
		{"unknown excluded tool is a warning",
			Group{Active: true, ExplicitToolIDs: []string{"native:now"}, ExcludedToolIDs: []string{"tenant:x"}},
			[]string{"native:now"}, []string{"native:now"}, `group g: excluded tool "tenant:x" does not exist`},
		{"inactive group contributes nothing",
			Group{Active: false, Selectors: []Selector{{}}, ExplicitToolIDs: []string{"native:now"}},
			[]string{}, []string{}, ""},
		{"bad selector pattern warns, explicit still count",
			Group{Active: true, Selectors: []Selector{{Path: "regex:[z-a]"}}, ExplicitToolIDs: []string{"native:now"}},
			[]string{"native:now"}, []string{"native:now"}, "group g: selector 0: pattern \"regex:[z-a]\": invalid regular expression: invalid character class range: \"z-a\": the selector matches no tool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ix := groupToolIDs(t, tt.g, false)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tools = %q, want %q", got, tt.want)
			}
			gotAll, _ := groupToolIDs(t, tt.g, true)
			if !reflect.DeepEqual(gotAll, tt.wantAll) {
				t.Errorf("tools with disabled = %q, want %q", gotAll, tt.wantAll)
			}
			w := ix.Warnings()
			if tt.warning == "" && len(w) > 0 {
				t.Errorf("warnings %q", w)
			}
			if tt.warning != "" && !slices.Contains(w, tt.warning) {
				t.Errorf("warnings %q, want %q", w, tt.warning)
			}
		})
	}
}

// policyFixture grants groups named after what they hold.
func policyFixture() Config {
	return Config{
		Tools: fixtureTools(),
		Groups: []Group{
			{ID: "menu-read", Active: true, Selectors: []Selector{{Source: "pizzeria", RequiredTags: []string{"read-only"}}}},
			{ID: "menu-write", Active: true, Selectors: []Selector{{Source: "pizzeria", RequiredTags: []string{"write"}}}},
			{ID: "billing", Active: true, Selectors: []Selector{{Source: "billing"}}, ExplicitToolIDs: []string{"pizzeria:list_menu"}},
			{ID: "everything", Active: true, Selectors: []Selector{{}}, ExplicitToolIDs: []string{"pizzeria:secret_recipe"}},
			{ID: "dormant", Active: false, Selectors: []Selector{{}}},
		},
		Policies: []Policy{
			{ID: "staff", Active: true, Priority: 10, GroupIDs: []string{"menu-read"},
				Matchers: []Matcher{{Claim: "realm_access.roles", Operator: OpContains, Value: "pizza-staff"}}},
			{ID: "cook", Active: true, Priority: 10, GroupIDs: []string{"menu-write", "menu-read"},
				Matchers: []Matcher{
					{Claim: "realm_access.roles", Operator: OpContains, Value: "cook"},
					{Claim: "tenant_id", Operator: OpEquals, Value: "acme"},
				}},
			{ID: "accountant", Active: true, Priority: 5, GroupIDs: []string{"billing"},
				Matchers: []Matcher{{Claim: "department", Operator: OpIn, Value: "finance, accounting"}}},
			{ID: "off", Active: false, Priority: 100, GroupIDs: []string{"everything"},
				Matchers: []Matcher{{Claim: "sub", Operator: OpExists}}},
			{ID: "no-matchers", Active: true, Priority: 50, GroupIDs: []string{"everything"}},
			{ID: "bad-regex", Active: true, Priority: 40, GroupIDs: []string{"everything"},
				Matchers: []Matcher{{Claim: "sub", Operator: OpExists}, {Claim: "email", Operator: OpMatches, Value: "(.*"}}},
			{ID: "bad-operator", Active: true, Priority: 40, GroupIDs: []string{"everything"},
				Matchers: []Matcher{{Claim: "sub", Operator: "startswith", Value: "u"}}},
			{ID: "anyone", Active: true, Priority: -5, GroupIDs: []string{"dormant", "ghost"},
				Matchers: []Matcher{{Claim: "sub", Operator: OpExists}}},
		},
	}
}

func TestResolve(t *testing.T) {
	ix, err := NewIndex(policyFixture())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		claims   map[string]any
		opts     Options
		policies []string
		groups   []string
		tools    []string
	}{
		{"no claims", nil, Options{}, nil, nil, nil},
		{"subject only: a policy granting only inactive and unknown groups",
			map[string]any{"sub": "u1"}, Options{},
			[]string{"anyone"}, []string{"dormant", "ghost"}, nil},
		{"staff",
			map[string]any{"sub": "u1", "realm_access": map[string]any{"roles": []any{"pizza-staff"}}}, Options{},
			[]string{"staff", "anyone"}, []string{"dormant", "ghost", "menu-read"},
			[]string{"pizzeria:get_menu_item", "pizzeria:list_menu"}},
		{"cook needs both matchers: role without tenant",
			map[string]any{"realm_access": map[string]any{"roles": []any{"cook"}}}, Options{},
			nil, nil, nil},
		{"cook needs both matchers: tenant without role",
			map[string]any{"tenant_id": "acme", "realm_access": map[string]any{"roles": []any{"waiter"}}}, Options{},
			nil, nil, nil},
		{"cook and staff: same priority, by id; groups deduplicated",
			map[string]any{"tenant_id": "acme", "realm_access": map[string]any{"roles": []any{"cook", "pizza-staff"}}}, Options{},
			[]string{"cook", "staff"}, []string{"menu-read", "menu-write"},
			[]string{"pizzeria:delete_menu", "pizzeria:get_menu_item", "pizzeria:list_menu", "pizzeria:update_menu"}},
		{"union across policies, deduplicated tools",
			map[string]any{"sub": "u", "department": "accounting", "realm_access": map[string]any{"roles": []any{"pizza-staff"}}}, Options{},
			[]string{"staff", "accountant", "anyone"}, []string{"billing", "dormant", "ghost", "menu-read"},
			[]string{"billing:list_invoices", "billing:refund", "pizzeria:get_menu_item", "pizzeria:list_menu"}},
		{"include disabled keeps nothing extra when no granted group lists a disabled tool",
			map[string]any{"department": "finance"}, Options{IncludeDisabled: true},
			[]string{"accountant"}, []string{"billing"},
			[]string{"billing:list_invoices", "billing:refund", "pizzeria:list_menu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := ix.Resolve(tt.claims, tt.opts)
			if !reflect.DeepEqual(r.PolicyIDs, tt.policies) {
				t.Errorf("policies = %q, want %q", r.PolicyIDs, tt.policies)
			}
			if !reflect.DeepEqual(r.GroupIDs, tt.groups) {
				t.Errorf("groups = %q, want %q", r.GroupIDs, tt.groups)
			}
			if got := ids(r.Tools); !reflect.DeepEqual(got, append([]string{}, tt.tools...)) {
				t.Errorf("tools = %q, want %q", got, tt.tools)
			}
			if a := ix.ResolveAccess(tt.claims); !reflect.DeepEqual(a, r.Access) {
				t.Errorf("ResolveAccess = %+v, Resolve.Access = %+v", a, r.Access)
			}
			// The cacheable path gives the same manifest.
			var lists [][]ToolManifestEntry
			for _, g := range r.GroupIDs {
				lists = append(lists, ix.GroupTools(g, tt.opts.IncludeDisabled))
			}
			if merged := MergeManifests(lists...); !reflect.DeepEqual(merged, r.Tools) {
				t.Errorf("MergeManifests(GroupTools...) = %q, Resolve = %q", ids(merged), ids(r.Tools))
			}
		})
	}
	wantWarnings := []string{
		`policy bad-operator: matcher 0: unknown operator "startswith"; one of equals, not_equals, contains, not_contains, matches, in, not_in, exists: the policy never matches`,
		`policy bad-regex: matcher 1: invalid regular expression: missing closing ): "(.*": the policy never matches`,
		`policy no-matchers: no claim matchers: it never matches`,
		`policy anyone: group "ghost" does not exist: it grants no tools`,
	}
	slices.Sort(wantWarnings)
	if got := ix.Warnings(); !reflect.DeepEqual(got, wantWarnings) {
		t.Errorf("warnings =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantWarnings, "\n"))
	}
}

func TestPolicyOrderAndDeterminism(t *testing.T) {
	cfg := Config{Tools: fixtureTools(), Groups: []Group{{ID: "g", Active: true, Selectors: []Selector{{}}}}}
	for _, p := range []struct {
		id   string
		prio int
	}{{"b", 1}, {"a", 1}, {"z", 100}, {"m", -3}, {"c", 1}, {"y", 0}} {
		cfg.Policies = append(cfg.Policies, Policy{ID: p.id, Active: true, Priority: p.prio, GroupIDs: []string{"g"},
			Matchers: []Matcher{{Claim: "sub", Operator: OpExists}}})
	}
	want := []string{"z", "a", "b", "c", "y", "m"} // highest priority first, ties by id
	claims := map[string]any{"sub": "u"}
	base, err := NewIndex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantRes := base.Resolve(claims, Options{})
	if !reflect.DeepEqual(wantRes.PolicyIDs, want) {
		t.Fatalf("policies = %q, want %q", wantRes.PolicyIDs, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		shuffled := Config{Tools: slices.Clone(cfg.Tools), Groups: cfg.Groups, Policies: slices.Clone(cfg.Policies)}
		rng.Shuffle(len(shuffled.Tools), func(i, j int) { shuffled.Tools[i], shuffled.Tools[j] = shuffled.Tools[j], shuffled.Tools[i] })
		rng.Shuffle(len(shuffled.Policies), func(i, j int) {
			shuffled.Policies[i], shuffled.Policies[j] = shuffled.Policies[j], shuffled.Policies[i]
		})
		ix, err := NewIndex(shuffled)
		if err != nil {
			t.Fatal(err)
		}
		if got := ix.Resolve(claims, Options{}); !reflect.DeepEqual(got, wantRes) {
			t.Fatalf("resolution depends on the order of the config:\n%+v\nwant\n%+v", got, wantRes)
		}
	}
}

func TestManifestEntryJSON(t *testing.T) {
	ix, err := NewIndex(Config{
		Tools: []Tool{
			{ID: "pizzeria:list_menu", Name: "list_menu", Description: "List all available menu items",
				InputSchema: json.RawMessage(`{"type":"object","properties":{"category":{"type":"string"}}}`),
				SourceID:    "pizzeria", SourcePath: "/menu", Method: "GET", Tags: []string{"menu", "read-only"},
				LabelIDs: []string{"l"}, Version: "1.2.0", Enabled: true},
			{ID: "native:now", Name: "now", Enabled: true},
		},
		Groups: []Group{{ID: "g", Active: true, Selectors: []Selector{{}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(ix.GroupTools("g", false))
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"tool_id":"native:now","name":"now","description":"","input_schema":{"type":"object"},"source_id":"","source_path":"","tags":[]},` +
		`{"tool_id":"pizzeria:list_menu","name":"list_menu","description":"List all available menu items","input_schema":{"type":"object","properties":{"category":{"type":"string"}}},"source_id":"pizzeria","source_path":"/menu","tags":["menu","read-only"],"version":"1.2.0"}]`
	if string(got) != want {
		t.Errorf("JSON =\n%s\nwant\n%s", got, want)
	}
}

func TestNewIndexErrors(t *testing.T) {
	ok := Tool{ID: "a:b", Enabled: true}
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"bad tool id", Config{Tools: []Tool{{ID: "no-colon"}}}, `tool id "no-colon": want <source>:<operation>`},
		{"empty tool id", Config{Tools: []Tool{{}}}, `tool id "": want <source>:<operation>`},
		{"two colons", Config{Tools: []Tool{{ID: "a:b:c"}}}, `tool id "a:b:c"`},
		{"duplicate tool", Config{Tools: []Tool{ok, ok}}, `duplicate tool id "a:b"`},
		{"schema not JSON", Config{Tools: []Tool{{ID: "a:b", InputSchema: json.RawMessage(`{`)}}}, "tool a:b: input schema is not valid JSON"},
		{"empty group id", Config{Groups: []Group{{}}}, "a group has an empty id"},
		{"duplicate group", Config{Groups: []Group{{ID: "g"}, {ID: "g"}}}, `duplicate group id "g"`},
		{"empty policy id", Config{Policies: []Policy{{}}}, "a policy has an empty id"},
		{"duplicate policy", Config{Policies: []Policy{{ID: "p"}, {ID: "p"}}}, `duplicate policy id "p"`},
	}
	for _, tt := range tests {
		ix, err := NewIndex(tt.cfg)
		if ix != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewIndex = %v, %v; want error %q", tt.name, ix, err, tt.want)
		}
	}
}

func TestIndexIsIndependentOfItsConfig(t *testing.T) {
	cfg := policyFixture()
	ix, err := NewIndex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	claims := map[string]any{"department": "finance"}
	before, _ := json.Marshal(ix.Resolve(claims, Options{}))
	for i := range cfg.Tools {
		for j := range cfg.Tools[i].Tags {
			cfg.Tools[i].Tags[j] = "changed"
		}
		cfg.Tools[i].InputSchema[2] = 'X'
	}
	for i := range cfg.Policies {
		for j := range cfg.Policies[i].GroupIDs {
			cfg.Policies[i].GroupIDs[j] = "changed"
		}
	}
	after, _ := json.Marshal(ix.Resolve(claims, Options{}))
	if string(before) != string(after) {
		t.Errorf("changing the config changed the index:\n%s\n%s", before, after)
	}
}

func TestGroupToolsUnknownAndInactive(t *testing.T) {
	ix, err := NewIndex(policyFixture())
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"ghost", "dormant", ""} {
		if got := ix.GroupTools(g, true); got != nil {
			t.Errorf("GroupTools(%q) = %q", g, ids(got))
		}
	}
	if got := ix.Manifest([]string{"ghost", "dormant"}, true); got != nil {
		t.Errorf("Manifest of unknown and inactive groups = %q", ids(got))
	}
	if got := ids(ix.GroupTools("everything", true)); !slices.Contains(got, "pizzeria:secret_recipe") || len(got) != 9 {
		t.Errorf("GroupTools(everything, true) = %q", got)
	}
}

func TestMergeManifests(t *testing.T) {
	e := func(id, name string) ToolManifestEntry { return ToolManifestEntry{ToolID: id, Name: name} }
	got := MergeManifests([]ToolManifestEntry{e("b:x", "first"), e("a:x", "")}, nil, []ToolManifestEntry{e("b:x", "second"), e("c:x", "")})
	want := []ToolManifestEntry{e("a:x", ""), e("b:x", "first"), e("c:x", "")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MergeManifests = %+v", got)
	}
	if MergeManifests() != nil || MergeManifests(nil, []ToolManifestEntry{}) != nil {
		t.Error("merging nothing is not nil")
	}
}

func TestToolIDs(t *testing.T) {
	for _, tt := range []struct {
		id      string
		src, op string
		ok      bool
	}{
		{"pizzeria:list_menu", "pizzeria", "list_menu", true},
		{"my.api-v2:get.user-by_id", "my.api-v2", "get.user-by_id", true},
		{"a:_private", "a", "_private", true},
		{"_a:b", "", "", false},
		{"a:", "", "", false},
		{":b", "", "", false},
		{"a:b:c", "", "", false},
		{"a b:c", "", "", false},
		{"a:b/c", "", "", false},
		{"a:" + strings.Repeat("b", MaxToolIDLength), "", "", false},
		{"a:" + strings.Repeat("b", MaxToolIDLength-2), "a", strings.Repeat("b", MaxToolIDLength-2), true}, // the longest
		{"a:" + strings.Repeat("b", MaxToolIDLength-1), "", "", false},
	} {
		src, op, ok := SplitToolID(tt.id)
		if src != tt.src || op != tt.op || ok != tt.ok || ValidToolID(tt.id) != tt.ok {
			t.Errorf("SplitToolID(%q) = %q, %q, %v", tt.id, src, op, ok)
		}
	}
	if !ValidSourceID("pizzeria") || ValidSourceID("a:b") || ValidSourceID("") {
		t.Error("ValidSourceID")
	}
	// A source leaves room for ":" and an operation.
	if !ValidSourceID(strings.Repeat("s", MaxToolIDLength-1)) || ValidSourceID(strings.Repeat("s", MaxToolIDLength)) {
		t.Error("ValidSourceID at the length limit")
	}
}

// TestManyTools: manifests past one 64-tool word of the bitset, every
// tool in id order.
func TestManyTools(t *testing.T) {
	var cfg Config
	var want []string
	for i := range 150 {
		id := fmt.Sprintf("src:op%03d", i)
		cfg.Tools = append(cfg.Tools, Tool{ID: id, Name: id, SourceID: "src", Enabled: true})
		if i%2 == 1 || i > 120 {
			want = append(want, id)
		}
	}
	cfg.Groups = []Group{
		{ID: "odd", Active: true, Selectors: []Selector{{Name: "regex:.*[13579]$"}}},
		{ID: "tail", Active: true, Selectors: []Selector{{Name: "regex:src:op1[2-4][1-9]$"}}, ExplicitToolIDs: []string{"src:op130", "src:op140"}},
	}
	cfg.Policies = []Policy{{ID: "p", Active: true, Matchers: []Matcher{{Claim: "sub", Operator: OpExists}}, GroupIDs: []string{"odd", "tail"}}}
	ix, err := NewIndex(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := ix.Resolve(map[string]any{"sub": "u"}, Options{})
	if got := ids(r.Tools); !reflect.DeepEqual(got, want) {
		t.Fatalf("manifest = %q\nwant %q", got, want)
	}
	if got := ids(manifestOf(ix.Explain(map[string]any{"sub": "u"}, Options{}))); !reflect.DeepEqual(got, want) {
		t.Fatalf("explained = %q", got)
	}
}
