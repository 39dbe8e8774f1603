package toolcatalog

import (
	"encoding/json"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/tools/discovery"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func index(t *testing.T, role string) *discovery.Index {
	t.Helper()
	tool := func(id string) discovery.Tool {
		return discovery.Tool{ID: id, Name: id, Description: id, InputSchema: json.RawMessage(`{"type":"object"}`), SourceID: "slack", Enabled: true}
	}
	ix, err := discovery.NewIndex(discovery.Config{
		Tools: []discovery.Tool{tool("slack:post"), tool("slack:read")},
		Groups: []discovery.Group{
			{ID: "writers", Active: true, ExplicitToolIDs: []string{"slack:post"}},
			{ID: "readers", Active: true, ExplicitToolIDs: []string{"slack:read"}},
		},
		Policies: []discovery.Policy{
			{ID: "p-write", Active: true, Matchers: []discovery.Matcher{{Claim: "role", Operator: "equals", Value: role}}, GroupIDs: []string{"writers"}},
			{ID: "p-read", Active: true, Matchers: []discovery.Matcher{{Claim: "sub", Operator: "exists"}}, GroupIDs: []string{"readers"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func ids(m []discovery.ToolManifestEntry) []string {
	var out []string
	for _, e := range m {
		out = append(out, e.ToolID)
	}
	return out
}

func TestCacheNeverWidensAccess(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	c := New(index(t, "editor"), "rev-1", Settings{Now: clk.now})
	alice := map[string]any{"sub": "alice", "role": "editor", "exp": 1, "jti": "a"}
	if _, m := c.Manifest(alice, Options{}); len(m) != 2 {
		t.Fatalf("editor sees %v", ids(m))
	}
	// A new token of the same caller (other exp/jti) hits the cache.
	if _, m := c.Manifest(map[string]any{"sub": "alice", "role": "editor", "exp": 2, "jti": "b", "iat": 5}, Options{}); len(m) != 2 || c.Stats().AccessHits != 1 {
		t.Fatalf("volatile claims changed the key: %v %+v", ids(m), c.Stats())
	}
	// Another caller is not served alice's answer.
	if _, m := c.Manifest(map[string]any{"sub": "bob", "role": "viewer"}, Options{}); len(m) != 1 || m[0].ToolID != "slack:read" {
		t.Fatalf("viewer sees %v", ids(m))
	}
	// The policy changes (new revision in this process): the write grant is
	// gone at once, cache or not.
	c.Update(index(t, "admin"), "rev-2")
	if _, m := c.Manifest(alice, Options{}); len(m) != 1 || m[0].ToolID != "slack:read" {
		t.Fatalf("after the policy change alice still sees %v", ids(m))
	}
}

func TestTTLBoundsStaleness(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	c := New(index(t, "editor"), "rev-1", Settings{Now: clk.now})
	claims := map[string]any{"sub": "alice", "role": "editor"}
	c.Manifest(claims, Options{})
	clk.add(AccessTTL - time.Second)
	c.Manifest(claims, Options{})
	if s := c.Stats(); s.AccessHits != 1 || s.AccessMisses != 1 {
		t.Fatalf("within the TTL: %+v", s)
	}
	clk.add(2 * time.Second)
	c.Manifest(claims, Options{})
	if s := c.Stats(); s.AccessMisses != 2 {
		t.Fatalf("past the TTL the access is resolved again: %+v", s)
	}
	c.Manifest(claims, Options{SkipCache: true})
	if s := c.Stats(); s.AccessMisses != 3 {
		t.Fatalf("skip_cache resolved from the cache: %+v", s)
	}
}

func TestUncacheableClaimsAreResolvedEachTime(t *testing.T) {
	c := New(index(t, "editor"), "rev-1", Settings{})
	odd := map[string]any{"sub": "x", "score": math.NaN()}
	c.Manifest(odd, Options{})
	c.Manifest(odd, Options{})
	if s := c.Stats(); s.AccessHits != 0 || s.AccessMisses != 2 {
		t.Fatalf("%+v", s)
	}
}

// TestTenantToolsStayWithTheirTenant: a group that selects every tool
// still shows a tenant's uploads only to that tenant's callers, in both
// directions, and to no caller without a tenant claim.
func TestTenantToolsStayWithTheirTenant(t *testing.T) {
	tool := func(tenant, id string) discovery.Tool {
		return discovery.Tool{ID: id, Tenant: tenant, Name: "menu", Description: "d", SourceID: "menu", Enabled: true}
	}
	ix, err := discovery.NewIndex(discovery.Config{
		Tools: []discovery.Tool{tool("", "menu:list"), tool("acme", "menu:list"), tool("globex", "menu:list"), tool("acme", "menu:order")},
		Groups: []discovery.Group{{ID: "all", Active: true, Selectors: []discovery.Selector{{Source: "*"}},
			ExplicitToolIDs: []string{"globex/menu:list"}}},
		Policies: []discovery.Policy{{ID: "p", Active: true, Matchers: []discovery.Matcher{{Claim: "sub", Operator: "exists"}}, GroupIDs: []string{"all"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := New(ix, "rev", Settings{TenantClaim: "org.id"})
	for _, tc := range []struct {
		name   string
		claims map[string]any
		want   []string
	}{
		{"acme", map[string]any{"sub": "a", "org": map[string]any{"id": "acme"}}, []string{"acme/menu:list", "acme/menu:order", "menu:list"}},
		{"globex", map[string]any{"sub": "g", "org": map[string]any{"id": "globex"}}, []string{"globex/menu:list", "menu:list"}},
		{"no tenant claim", map[string]any{"sub": "n"}, []string{"menu:list"}},
		{"null tenant", map[string]any{"sub": "n", "org": map[string]any{"id": nil}}, []string{"menu:list"}},
		{"other tenant", map[string]any{"sub": "o", "org": map[string]any{"id": "initech"}}, []string{"menu:list"}},
		{"tenant claim is a list", map[string]any{"sub": "l", "org": map[string]any{"id": []any{"acme"}}}, []string{"menu:list"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 2 { // uncached, then cached
				_, m := c.Manifest(tc.claims, Options{})
				if got := ids(m); !slices.Equal(got, tc.want) {
					t.Fatalf("manifest = %v, want %v", got, tc.want)
				}
			}
		})
	}
}
