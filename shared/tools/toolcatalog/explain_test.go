package toolcatalog

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/tools/discovery"
)

func TestExplainSaysWhichPolicyAndGroupGaveEachTool(t *testing.T) {
	c := New(index(t, "editor"), "rev-1", Settings{})
	e := c.Explain(map[string]any{"sub": "alice", "role": "editor", "tenant_id": "acme"})
	if !reflect.DeepEqual(e.Access.PolicyIDs, []string{"p-read", "p-write"}) || !reflect.DeepEqual(e.Access.GroupIDs, []string{"readers", "writers"}) {
		t.Fatalf("access %+v", e.Access)
	}
	if got := ids(e.Groups["writers"]); !reflect.DeepEqual(got, []string{"slack:post"}) {
		t.Fatalf("writers gave %v", got)
	}
	if got := ids(e.Manifest); !reflect.DeepEqual(got, []string{"slack:post", "slack:read"}) || e.Tenant != "acme" {
		t.Fatalf("manifest %v tenant %q", got, e.Tenant)
	}
	// The same as Resolve answers, and nothing cached by the asking.
	if _, m := c.Manifest(map[string]any{"sub": "bob", "role": "viewer"}, Options{}); !reflect.DeepEqual(ids(c.Explain(map[string]any{"sub": "bob", "role": "viewer"}).Manifest), ids(m)) {
		t.Fatal("Explain and Manifest disagree")
	}
	if s := c.Stats(); s.AccessMisses != 1 || s.AccessHits != 0 {
		t.Fatalf("Explain touched the cache: %+v", s)
	}
	if e := c.Explain(map[string]any{}); len(e.Manifest) != 0 || len(e.Access.PolicyIDs) != 0 {
		t.Fatalf("no claims: %+v", e)
	}
}

func TestExplainHidesOtherTenantsTools(t *testing.T) {
	ix, err := discovery.NewIndex(discovery.Config{
		Tools: []discovery.Tool{
			{ID: "up:a", Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`), SourceID: "up", Enabled: true, Tenant: "acme"},
			{ID: "up:b", Name: "b", InputSchema: json.RawMessage(`{"type":"object"}`), SourceID: "up", Enabled: true, Tenant: "globex"},
		},
		Groups:   []discovery.Group{{ID: "all", Active: true, ExplicitToolIDs: []string{"acme/up:a", "globex/up:b"}}},
		Policies: []discovery.Policy{{ID: "p", Active: true, Matchers: []discovery.Matcher{{Claim: "sub", Operator: "exists"}}, GroupIDs: []string{"all"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := New(ix, "r", Settings{}).Explain(map[string]any{"sub": "x", "tenant_id": "acme"})
	if got := ids(e.Groups["all"]); !reflect.DeepEqual(got, []string{"acme/up:a"}) || !reflect.DeepEqual(ids(e.Manifest), []string{"acme/up:a"}) {
		t.Fatalf("acme's caller sees %v / %v", got, ids(e.Manifest))
	}
}

// TestExplainAgreesWithResolve: tenant tools of two tenants reached by a
// selector and by explicit ids, two policies granting one group. For
// every caller the explained tools are the manifest Resolve answers, and
// each group lists a tool once however many policies grant it.
func TestExplainAgreesWithResolve(t *testing.T) {
	tool := func(tenant, id string, tags ...string) discovery.Tool {
		return discovery.Tool{ID: id, Name: id, SourceID: "up", Enabled: true, Tenant: tenant, Tags: tags}
	}
	ix, err := discovery.NewIndex(discovery.Config{
		Tools: []discovery.Tool{tool("", "up:base", "read"), tool("acme", "up:a", "read"), tool("globex", "up:b", "read"), tool("acme", "up:c")},
		Groups: []discovery.Group{
			{ID: "readers", Active: true, Selectors: []discovery.Selector{{RequiredTags: []string{"read"}}}},
			{ID: "acme-c", Active: true, ExplicitToolIDs: []string{"acme/up:c", "up:base"}},
		},
		Policies: []discovery.Policy{
			{ID: "p-sub", Active: true, Matchers: []discovery.Matcher{{Claim: "sub", Operator: "exists"}}, GroupIDs: []string{"readers"}},
			{ID: "p-acme", Active: true, Matchers: []discovery.Matcher{{Claim: "tenant_id", Operator: "equals", Value: "acme"}}, GroupIDs: []string{"readers", "acme-c"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := New(ix, "r", Settings{})
	for _, claims := range []map[string]any{
		{}, {"sub": "x"}, {"sub": "x", "tenant_id": "acme"}, {"tenant_id": "acme"}, {"sub": "x", "tenant_id": "globex"}, {"sub": "x", "tenant_id": []any{"acme"}},
	} {
		e := c.Explain(claims)
		r := c.Resolve(claims, Options{SkipCache: true})
		if !reflect.DeepEqual(e.Manifest, r.Manifest) || !reflect.DeepEqual(e.Access, r.Access) {
			t.Fatalf("%v: Explain %v %+v, Resolve %v %+v", claims, ids(e.Manifest), e.Access, ids(r.Manifest), r.Access)
		}
		var explained []discovery.ToolManifestEntry
		for _, tl := range e.Tools {
			explained = append(explained, tl.ToolManifestEntry)
		}
		if !reflect.DeepEqual(explained, e.Manifest) {
			t.Fatalf("%v: explained %v, manifest %v", claims, ids(explained), ids(e.Manifest))
		}
		for g, tools := range e.Groups {
			var want []string
			for _, id := range ids(ix.GroupTools(g, false)) {
				if slices.Contains(ids(e.Manifest), id) {
					want = append(want, id)
				}
			}
			if !reflect.DeepEqual(ids(tools), want) {
				t.Errorf("%v: group %s gives %v, want %v", claims, g, ids(tools), want)
			}
		}
	}
	e := c.Explain(map[string]any{"sub": "x", "tenant_id": "acme"})
	var got []string
	for _, tl := range e.Tools {
		for _, g := range tl.Grants {
			got = append(got, fmt.Sprintf("%s %s→%s selectors=%d explicit=%v", tl.ToolID, g.PolicyID, g.GroupID, len(g.Selectors), g.Explicit))
		}
	}
	want := []string{
		"acme/up:a p-acme→readers selectors=1 explicit=false", "acme/up:a p-sub→readers selectors=1 explicit=false",
		"acme/up:c p-acme→acme-c selectors=0 explicit=true",
		"up:base p-acme→acme-c selectors=0 explicit=true", "up:base p-acme→readers selectors=1 explicit=false", "up:base p-sub→readers selectors=1 explicit=false",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("acme's grants:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
