package toolcatalog

import (
	"encoding/json"
	"reflect"
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
