package toolcatalog

import (
	"encoding/json"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/discovery"
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
	c := New(index(t, "editor"), "rev-1", clk.now)
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
	c := New(index(t, "editor"), "rev-1", clk.now)
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
	c := New(index(t, "editor"), "rev-1", nil)
	odd := map[string]any{"sub": "x", "score": math.NaN()}
	c.Manifest(odd, Options{})
	c.Manifest(odd, Options{})
	if s := c.Stats(); s.AccessHits != 0 || s.AccessMisses != 2 {
		t.Fatalf("%+v", s)
	}
}
