package changeset

import (
	"fmt"
	"reflect"
	"slices"
	"sort"

	"github.com/agentauth/agentauth/shared/bundle"
)

// Protected names what a changeset may never change, whatever
// allowed.files says: the resources that decide what an agent may reach
// and where its data goes — OAuthApp (credentials, providers),
// AccessPolicy (which tools a caller sees), Connector (where turn events
// are delivered), Model (where the conversation is sent), Swarm (its
// agents, routing and the changeset policy itself) — and an Agent's own
// changesets policy. An agent that could edit them could widen its own
// access one commit at a time; operators change them with git or
// `agentauth bundle import`. A changed file that defines one of them,
// before or after the change, is refused.
func protectedChanges(before, after *bundle.Bundle, changed []string) []string {
	files := map[string][]string{}
	add := func(file, what string) {
		if file != "" {
			files[file] = append(files[file], what)
		}
	}
	for _, b := range []*bundle.Bundle{before, after} {
		for n, x := range b.OAuthApps {
			add(x.File, "OAuthApp/"+n)
		}
		for n, x := range b.AccessPolicies {
			add(x.File, "AccessPolicy/"+n)
		}
		for n, x := range b.Connectors {
			add(x.File, "Connector/"+n)
		}
		for n, x := range b.Models {
			add(x.File, "Model/"+n)
		}
		for n, x := range b.Swarms {
			add(x.File, "Swarm/"+n)
		}
	}
	var out []string
	for _, p := range changed {
		if whats, ok := files[p]; ok {
			slices.Sort(whats)
			out = append(out, fmt.Sprintf("%s (defines %s)", p, slices.Compact(whats)[0]))
		}
	}
	for n, a := range after.Agents {
		if b, ok := before.Agents[n]; ok && !reflect.DeepEqual(a.Changesets, b.Changesets) {
			out = append(out, fmt.Sprintf("%s (Agent/%s's changesets policy)", a.File, n))
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}
