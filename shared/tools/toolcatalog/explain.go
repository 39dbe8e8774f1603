package toolcatalog

import "github.com/agentauth/agentauth/shared/tools/discovery"

// Explanation says why a caller with some claims sees the tools it sees:
// the access policies that matched (priority order), the groups they
// grant with each group's tools the caller may see, and the union — the
// manifest the tool routes would answer. An operator's policy simulator
// reads it.
type Explanation struct {
	Access discovery.Access
	// Groups are the granted groups' tools the caller may see, by group
	// id (an unknown or inactive group has none).
	Groups map[string][]discovery.ToolManifestEntry
	// Manifest is what Resolve answers for the claims.
	Manifest []discovery.ToolManifestEntry
	// Tenant is the caller's tenant as the catalog reads it ("" none).
	Tenant string
}

// Explain resolves claims from scratch (no cache is read or filled) and
// says which policy and group gave each tool.
func (c *Catalog) Explain(claims map[string]any) Explanation {
	c.mu.Lock()
	ix := c.index
	c.mu.Unlock()
	tenant := callerTenant(claims, c.tenantClaim)
	e := Explanation{Access: ix.ResolveAccess(claims), Groups: map[string][]discovery.ToolManifestEntry{}, Tenant: tenant}
	lists := make([][]discovery.ToolManifestEntry, 0, len(e.Access.GroupIDs))
	for _, g := range e.Access.GroupIDs {
		tools := onlyTenant(ix.GroupTools(g, false), tenant)
		e.Groups[g] = tools
		lists = append(lists, tools)
	}
	e.Manifest = discovery.MergeManifests(lists...)
	return e
}
