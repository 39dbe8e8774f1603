package discovery

import (
	"slices"
	"strings"
)

// Via says how a group holds a tool. A group holds a tool through its
// selectors, its explicit tool ids, or both (and its excluded tool ids
// win over both: an excluded tool is never explained, since it is not
// held).
type Via struct {
	// Selectors are the group's selectors when they picked the tool: it
	// is enabled and matched each one of them (a group's selectors AND,
	// so every one matched); nil when they did not pick it. Shared with
	// the Index: read only.
	Selectors []Selector
	// Explicit: the group lists the tool in its explicit tool ids.
	Explicit bool
}

// Grant is one reason a caller sees a tool: PolicyID matched the claims
// and grants GroupID, which holds the tool as Via says.
type Grant struct {
	PolicyID string
	GroupID  string
	Via
}

// ExplainedTool is a tool of a caller's manifest and every grant that
// gives it to the caller.
type ExplainedTool struct {
	ToolManifestEntry
	// Grants in policy evaluation order, then by group id; never empty.
	Grants []Grant
}

// Explanation is a Resolution that says why: for each tool, which
// policy granted which group, and how that group holds it.
type Explanation struct {
	Access
	// Tools are the manifest Resolve answers for the same claims and
	// options, sorted by tool id, each with its grants.
	Tools []ExplainedTool
}

// Explain answers what Resolve answers and why. It reads what the
// resolution reads — the matching policies, and each group's tools as
// NewIndex recorded them with how the group holds each — so the two
// cannot disagree; it is not cached and costs more than Resolve, for an
// operator's question rather than an agent's.
func (ix *Index) Explain(claims map[string]any, opts Options) Explanation {
	var policies []*policy
	e := Explanation{Access: ix.access(claims, func(p *policy) { policies = append(policies, p) })}
	grants := map[int32][]Grant{}
	for _, p := range policies {
		for _, gid := range p.groups {
			g, ok := ix.groups[gid]
			if !ok || !g.active {
				continue
			}
			add := func(nums []int32, how []via) {
				for k, n := range nums {
					grants[n] = append(grants[n], Grant{PolicyID: p.id, GroupID: gid, Via: g.via(how[k])})
				}
			}
			add(g.enabled, g.enabledVia)
			if opts.IncludeDisabled {
				add(g.disabled, g.disabledVia)
			}
		}
	}
	if len(grants) == 0 {
		return e
	}
	nums := make([]int32, 0, len(grants))
	for n := range grants {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	e.Tools = make([]ExplainedTool, len(nums))
	for i, n := range nums {
		e.Tools[i] = ExplainedTool{ToolManifestEntry: ix.entries[n], Grants: grants[n]}
	}
	return e
}

func (g *groupTools) via(how via) Via {
	v := Via{Explicit: how&viaExplicit != 0}
	if how&viaSelectors != 0 {
		v.Selectors = g.selectors
	}
	return v
}

// String is the selector as a bundle writes it, its unset criteria left
// out: {source: slack, requiredTags: [read]}; {} selects every enabled
// tool.
func (s Selector) String() string {
	var parts []string
	for _, f := range []struct{ key, v string }{{"source", s.Source}, {"name", s.Name}, {"path", s.Path}, {"method", s.Method}} {
		if f.v != "" {
			parts = append(parts, f.key+": "+f.v)
		}
	}
	for _, f := range []struct {
		key string
		v   []string
	}{{"requiredTags", s.RequiredTags}, {"excludedTags", s.ExcludedTags}, {"requiredLabelIds", s.RequiredLabelIDs}} {
		if len(f.v) > 0 {
			parts = append(parts, f.key+": ["+strings.Join(f.v, ", ")+"]")
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
