package toolcatalog

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentauth/agentauth/shared/tools/discovery"
)

// benchIndex: 10,000 tools, 200 groups of 50 explicit tools each, 1,000
// policies on a role claim each granting 5 groups (issue 4's sizes).
func benchIndex(b *testing.B) *discovery.Index {
	cfg := discovery.Config{}
	for i := range 10000 {
		id := fmt.Sprintf("src%d:op%d", i%100, i)
		cfg.Tools = append(cfg.Tools, discovery.Tool{ID: id, Name: fmt.Sprintf("tool_%d", i), Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), SourceID: fmt.Sprintf("src%d", i%100), Enabled: true})
	}
	for g := range 200 {
		grp := discovery.Group{ID: fmt.Sprintf("g%d", g), Active: true}
		for j := range 50 {
			grp.ExplicitToolIDs = append(grp.ExplicitToolIDs, cfg.Tools[g*50+j].ID)
		}
		cfg.Groups = append(cfg.Groups, grp)
	}
	for p := range 1000 {
		pol := discovery.Policy{ID: fmt.Sprintf("p%d", p), Active: true, Priority: p,
			Matchers: []discovery.Matcher{{Claim: "role", Operator: "equals", Value: fmt.Sprintf("r%d", p%50)}}}
		for k := range 5 {
			pol.GroupIDs = append(pol.GroupIDs, fmt.Sprintf("g%d", (p*7+k)%200))
		}
		cfg.Policies = append(cfg.Policies, pol)
	}
	ix, err := discovery.NewIndex(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return ix
}

// BenchmarkManifestCached: one caller's manifest with warm caches (target
// ≤ 20 µs).
func BenchmarkManifestCached(b *testing.B) {
	c := New(benchIndex(b), "rev", Settings{})
	claims := map[string]any{"sub": "alice", "role": "r7", "exp": 1}
	_, m := c.Manifest(claims, Options{})
	b.ReportMetric(float64(len(m)), "tools")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		c.Manifest(claims, Options{})
	}
}

// BenchmarkManifestUncached: the same with skip_cache.
func BenchmarkManifestUncached(b *testing.B) {
	c := New(benchIndex(b), "rev", Settings{})
	claims := map[string]any{"sub": "alice", "role": "r7"}
	b.ReportAllocs()
	for b.Loop() {
		c.Manifest(claims, Options{SkipCache: true})
	}
}

// BenchmarkManifestManyCallers: every call a new caller (a burst of
// distinct users), so every call resolves, stores and — the cache full
// after 256 — evicts; the cache stays at its bound.
func BenchmarkManifestManyCallers(b *testing.B) {
	c := New(benchIndex(b), "rev", Settings{MaxAccessEntries: 256})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Manifest(map[string]any{"sub": fmt.Sprintf("user-%d", i), "role": fmt.Sprintf("r%d", i%50)}, Options{})
		i++
	}
	c.mu.Lock()
	b.ReportMetric(float64(len(c.access)), "entries")
	c.mu.Unlock()
}
