package bundle

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

func decodeSwarm(r *res, d *document) {
	spec := r.spec(d, "agents", "entrypoint", "policy", "ingress")
	if spec == nil {
		return
	}
	s := &Swarm{Name: d.Name, Labels: d.Labels, File: r.file, Line: r.line}
	agents, complete := swarmAgents(r, spec)
	for _, a := range agents {
		s.Agents = append(s.Agents, a.Ref.Name)
	}
	// member checks that ref, at key of m, names one of the swarm's
	// agents; it stays quiet when the list has problems of its own.
	member := func(m *mapping, key string, ref scalar, name string) bool {
		if slices.Contains(s.Agents, name) {
			return true
		}
		if complete {
			r.errorf(ref.Line, m.field(key), "Agent/%s is not one of spec.agents (%s)", name, strings.Join(s.Agents, ", "))
		}
		return false
	}

	entry, entryS := spec.ref("entrypoint", "Agent", true)
	if entryS.OK && member(spec, "entrypoint", entryS, entry.Name) {
		s.Entrypoint = entry.Name
	}
	policy := spec.child("policy", "maxStepsPerTurn", "changesets")
	s.MaxStepsPerTurn = policy.intIn("maxStepsPerTurn", DefaultMaxStepsPerTurn, 1, maxStepsPerTurn)
	s.Changesets = swarmChangesets(policy)

	catchAll := ""
	spec.listItems("ingress", func(p string, line int, n *yaml.Node) {
		rule, ok := ingressRule(r, p, line, n, member)
		if !ok {
			return
		}
		if catchAll != "" {
			r.warnf(line, p, "unreachable: %s before it matches every event", catchAll)
		} else if rule.CatchAll() {
			catchAll = p
		}
		s.Ingress = append(s.Ingress, rule)
	})

	keepFirst(r.l.b.Swarms, s.Name, s)
}

// swarmAgents reads spec.agents and queues the check that each is in the
// bundle. complete is false when an item was left out (reported).
func swarmAgents(r *res, spec *mapping) (agents []refItem, complete bool) {
	n, line := spec.get("agents")
	switch {
	case n == nil:
		if !spec.bad {
			r.errorf(line, spec.field("agents"), "required: at least one Agent")
		}
		return nil, false
	case n.Kind == yaml.SequenceNode && len(n.Content) == 0:
		r.errorf(line, spec.field("agents"), "must name at least one Agent")
		return nil, false
	}
	agents, _ = spec.refItems("agents", "Agent")
	r.l.crossChecks = append(r.l.crossChecks, func() {
		for _, a := range agents {
			if _, ok := r.l.b.Agents[a.Ref.Name]; !ok {
				r.errorf(a.Line, indexPath(spec.field("agents"), a.Index), "%s", notInBundle(a.Ref, r.l.b.Agents))
			}
		}
	})
	return agents, n.Kind == yaml.SequenceNode && len(agents) == len(n.Content)
}

// ingressRule reads one rule of spec.ingress; member checks that its
// route names one of the swarm's agents. ok is false when the rule has a
// problem (reported).
func ingressRule(r *res, p string, line int, n *yaml.Node, member func(*mapping, string, scalar, string) bool) (rule IngressRule, ok bool) {
	m := r.mapping(p, line, n, "match", "route")
	if !m.present {
		r.errorf(line, p, "must be a mapping {match, route}; {} routes every event to the entrypoint")
		return IngressRule{}, false
	}
	if m.bad {
		return IngressRule{}, false
	}
	problems := len(r.l.problems)
	match := m.child("match", "event", "properties")
	if ev := match.optStr("event", "match every event type", noSpaces); ev.OK {
		rule.Event = ev.Value
	}
	if props := match.stringMap("properties"); len(props) > 0 {
		rule.Properties = props
	}
	route := m.child("route", "agentRef")
	ref, refS := route.ref("agentRef", "Agent", false)
	if refS.OK && member(route, "agentRef", refS, ref.Name) {
		rule.Agent = ref.Name
	}
	return rule, len(r.l.problems) == problems && (!refS.Present || rule.Agent != "")
}
