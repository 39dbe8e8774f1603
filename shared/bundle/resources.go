package bundle

import (
	"cmp"
	"slices"
)

// Resource names one resource of a bundle and where it is defined: what
// an operator's view of the bundle lists (never a resolved value).
type Resource struct {
	Kind, Name, File string
	Line             int
}

// Resources lists every resource of b, by kind then name.
func (b *Bundle) Resources() []Resource {
	var out []Resource
	add := func(kind, name, file string, line int) {
		out = append(out, Resource{Kind: kind, Name: name, File: file, Line: line})
	}
	for _, r := range b.OAuthApps {
		add("OAuthApp", r.Name, r.File, r.Line)
	}
	for _, r := range b.Tools {
		add("Tool", r.Name, r.File, r.Line)
	}
	for _, r := range b.ToolGroups {
		add("ToolGroup", r.Name, r.File, r.Line)
	}
	for _, r := range b.AccessPolicies {
		add("AccessPolicy", r.Name, r.File, r.Line)
	}
	for _, r := range b.Skills {
		add("Skill", r.Name, r.File, r.Line)
	}
	for _, r := range b.Models {
		add("Model", r.Name, r.File, r.Line)
	}
	for _, r := range b.Agents {
		add("Agent", r.Name, r.File, r.Line)
	}
	for _, r := range b.Swarms {
		add("Swarm", r.Name, r.File, r.Line)
	}
	for _, r := range b.Connectors {
		add("Connector", r.Name, r.File, r.Line)
	}
	slices.SortFunc(out, func(x, y Resource) int { return cmp.Or(cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Name, y.Name)) })
	return out
}
