package bundle

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agentauth/agentauth/shared/tools/discovery"
)

// toolSelectionFields are the spec fields of a ToolSelection.
var toolSelectionFields = []string{"selectors", "explicitToolIds", "excludedToolIds"}

func decodeToolGroup(r *res, d *document) {
	spec := r.spec(d, append([]string{"active"}, toolSelectionFields...)...)
	if spec == nil {
		return
	}
	g := &ToolGroup{Name: d.Name, Labels: d.Labels, File: r.file, Line: r.line}
	g.Active = spec.optBool("active", true)
	if n, _ := spec.get("selectors"); n == nil || n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
		if n, _ := spec.get("explicitToolIds"); n == nil || n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
			r.warnf(spec.line, spec.path, "no selectors and no explicitToolIds: the group holds no tools")
		}
	}
	g.ToolSelection = toolSelection(r, spec, "group")

	keepFirst(r.l.b.ToolGroups, g.Name, g)
}

// toolSelection reads the ToolSelection fields of m (a ToolGroup's spec,
// an Agent's spec.tools: holder says which in messages) and queues the
// warning about ids no Tool of the bundle has.
func toolSelection(r *res, m *mapping, holder string) ToolSelection {
	var sel ToolSelection
	m.listItems("selectors", func(p string, line int, n *yaml.Node) {
		if s, ok := selector(r, p, line, n); ok {
			sel.Selectors = append(sel.Selectors, s)
		}
	})
	explicit, _ := m.stringItems("explicitToolIds", toolIDProblem)
	excluded, _ := m.stringItems("excludedToolIds", toolIDProblem)
	for _, it := range explicit {
		sel.ExplicitToolIDs = append(sel.ExplicitToolIDs, it.Value)
	}
	for _, it := range excluded {
		sel.ExcludedToolIDs = append(sel.ExcludedToolIDs, it.Value)
	}
	for _, it := range explicit {
		for _, ex := range excluded {
			if it.Value == ex.Value {
				r.warnf(ex.Line, indexPath(m.field("excludedToolIds"), ex.Index), "%q is also in explicitToolIds: exclusion wins, the %s does not hold it", ex.Value, holder)
			}
		}
	}
	r.l.crossChecks = append(r.l.crossChecks, func() {
		for _, list := range []struct {
			key   string
			items []listItem
		}{{"explicitToolIds", explicit}, {"excludedToolIds", excluded}} {
			for _, it := range list.items {
				if _, ok := r.l.b.Tools[it.Value]; !ok {
					r.warnf(it.Line, indexPath(m.field(list.key), it.Index), "no Tool with id %q in the bundle; kept, since tenants may upload it at run time", it.Value)
				}
			}
		}
	})
	return sel
}

func patternProblem(s string) string {
	if _, err := discovery.CompilePattern(s); err != nil {
		return err.Error()
	}
	return ""
}

func toolIDProblem(s string) string {
	if !discovery.ValidToolID(s) {
		return "\"" + s + "\" is not a tool id: want <source>:<operation>"
	}
	return ""
}

func selector(r *res, p string, line int, n *yaml.Node) (discovery.Selector, bool) {
	m := r.mapping(p, line, n, "source", "name", "path", "method", "requiredTags", "excludedTags", "requiredLabelIds")
	if !m.present {
		r.errorf(line, p, "must be a mapping; {} selects every enabled tool")
		return discovery.Selector{}, false
	}
	if m.bad {
		return discovery.Selector{}, false
	}
	var s discovery.Selector
	ok := true
	for _, f := range []struct {
		key string
		dst *string
	}{{"source", &s.Source}, {"name", &s.Name}, {"path", &s.Path}, {"method", &s.Method}} {
		v := m.optStr(f.key, "match every value", patternProblem)
		switch {
		case v.OK:
			*f.dst = v.Value
		case v.Present:
			ok = false
		}
	}
	s.RequiredTags, _ = m.stringList("requiredTags", noSpaces)
	s.ExcludedTags, _ = m.stringList("excludedTags", noSpaces)
	s.RequiredLabelIDs, _ = m.stringList("requiredLabelIds", noSpaces)
	return s, ok
}

func decodeAccessPolicy(r *res, d *document) {
	spec := r.spec(d, "active", "priority", "claimMatchers", "allowedGroupIds")
	if spec == nil {
		return
	}
	pol := &AccessPolicy{Name: d.Name, Labels: d.Labels, File: r.file, Line: r.line}
	pol.Active = spec.optBool("active", true)
	if v, _, present, ok := spec.integer("priority"); present && ok {
		pol.Priority = v
	}
	matchersLine := spec.listItems("claimMatchers", func(p string, line int, n *yaml.Node) {
		if m, ok := claimMatcher(r, p, line, n); ok {
			pol.ClaimMatchers = append(pol.ClaimMatchers, m)
		}
	})
	if n, _ := spec.get("claimMatchers"); n == nil || (n.Kind == yaml.SequenceNode && len(n.Content) == 0) {
		r.warnf(matchersLine, spec.field("claimMatchers"), "no claim matchers: the policy never matches")
	}

	groups, groupsLine := spec.stringItems("allowedGroupIds", nil)
	for _, g := range groups {
		pol.AllowedGroupIDs = append(pol.AllowedGroupIDs, g.Value)
	}
	if len(groups) == 0 {
		if n, _ := spec.get("allowedGroupIds"); n == nil || n.Kind == yaml.SequenceNode && len(n.Content) == 0 {
			r.warnf(groupsLine, spec.field("allowedGroupIds"), "no groups: the policy grants nothing")
		}
	}
	r.l.crossChecks = append(r.l.crossChecks, func() {
		for _, g := range groups {
			if _, ok := r.l.b.ToolGroups[g.Value]; !ok {
				r.errorf(g.Line, indexPath(spec.field("allowedGroupIds"), g.Index), "no ToolGroup %q in the bundle; ToolGroups: %s", g.Value, strings.Join(sortedKeys(r.l.b.ToolGroups), ", "))
			}
		}
	})

	keepFirst(r.l.b.AccessPolicies, pol.Name, pol)
}

func claimMatcher(r *res, p string, line int, n *yaml.Node) (discovery.Matcher, bool) {
	m := r.mapping(p, line, n, "claim", "operator", "value")
	if !m.present {
		r.errorf(line, p, "must be a mapping {claim, operator, value}")
		return discovery.Matcher{}, false
	}
	if m.bad {
		return discovery.Matcher{}, false
	}
	claim := m.requireStr("claim", "")
	op := m.oneOf("operator", true, discovery.Operators()...)
	val := m.str("value")
	if !claim.OK || !op.OK || (val.Present && !val.OK) {
		return discovery.Matcher{}, false
	}
	switch {
	case op.Value == discovery.OpExists && val.Present:
		r.errorf(val.Line, m.field("value"), "operator exists takes no value")
		return discovery.Matcher{}, false
	case op.Value != discovery.OpExists && !val.Present:
		r.errorf(val.Line, m.field("value"), "required for operator %s", op.Value)
		return discovery.Matcher{}, false
	}
	// The claim path alone first, so that its problem names the claim
	// field and the value's the value field.
	if _, err := (discovery.Matcher{Claim: claim.Value, Operator: discovery.OpExists}).Compile(); err != nil {
		r.errorf(claim.Line, m.field("claim"), "%v", err)
		return discovery.Matcher{}, false
	}
	dm := discovery.Matcher{Claim: claim.Value, Operator: op.Value, Value: val.Value}
	if _, err := dm.Compile(); err != nil {
		r.errorf(val.Line, m.field("value"), "%v", err)
		return discovery.Matcher{}, false
	}
	return dm, true
}
