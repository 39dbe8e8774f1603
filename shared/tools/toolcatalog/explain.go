package toolcatalog

import (
	"slices"

	"github.com/agentauth/agentauth/shared/tools/discovery"
)

// Explanation says why a caller with some claims sees the tools it sees:
// the access policies that matched (priority order), the groups they
// grant with each group's tools the caller may see, each tool with the
// policy, group and selectors that gave it, and the union — the manifest
// the tool routes would answer. An operator's policy simulator reads it.
type Explanation struct {
	Access discovery.Access
	// Groups are the granted groups' tools the caller may see, by group
	// id (an unknown or inactive group has none).
	Groups map[string][]discovery.ToolManifestEntry
	// Tools are the manifest's tools, sorted by tool id, each with every
	// grant that gives it (discovery.Index.Explain, another tenant's
	// tools left out).
	Tools []discovery.ExplainedTool
	// Manifest is what Resolve answers for the claims.
	Manifest []discovery.ToolManifestEntry
	// Tenant is the caller's tenant as the catalog reads it ("" none).
	Tenant string
}

// Explain resolves claims from scratch (no cache is read or filled) and
// says which policy, group and selector gave each tool.
func (c *Catalog) Explain(claims map[string]any) Explanation {
	c.mu.Lock()
	ix := c.index
	c.mu.Unlock()
	tenant := callerTenant(claims, c.tenantClaim)
	x := ix.Explain(claims, discovery.Options{})
	e := Explanation{Access: x.Access, Groups: make(map[string][]discovery.ToolManifestEntry, len(x.Access.GroupIDs)), Tenant: tenant}
	for _, g := range x.Access.GroupIDs {
		e.Groups[g] = nil
	}
	for _, t := range x.Tools {
		if !visibleTo(t.ToolManifestEntry, tenant) {
			continue
		}
		e.Tools = append(e.Tools, t)
		e.Manifest = append(e.Manifest, t.ToolManifestEntry)
		for i, g := range t.Grants {
			sameGroup := func(h discovery.Grant) bool { return h.GroupID == g.GroupID }
			if !slices.ContainsFunc(t.Grants[:i], sameGroup) { // two policies may grant one group
				e.Groups[g.GroupID] = append(e.Groups[g.GroupID], t.ToolManifestEntry)
			}
		}
	}
	return e
}
