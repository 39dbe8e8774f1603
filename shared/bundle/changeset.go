package bundle

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ChangesetPolicy is what a swarm and one of its agents allow: whether the
// agent may change the bundle, and which files. The changeset tools ask it
// and nothing else, so the rule lives here once.
type ChangesetPolicy struct {
	// Enabled is the swarm's policy.changesets.enabled and the agent's
	// changesets.enabled.
	Enabled bool
	// SwarmFiles and AgentFiles are the two allowed.files lists; an empty
	// list allows every file.
	SwarmFiles, AgentFiles []string
	// EmitRevisionChanged is the swarm's
	// policy.changesets.emitRevisionChangedEvent.
	EmitRevisionChanged bool
}

// ChangesetPolicy is what the swarm and its agent a allow. A nil agent is
// allowed nothing: there is no one to ask for.
func (s *Swarm) ChangesetPolicy(a *Agent) ChangesetPolicy {
	if s == nil {
		return ChangesetPolicy{}
	}
	p := ChangesetPolicy{
		Enabled:             s.Changesets.Enabled && a != nil && a.Changesets.Enabled,
		SwarmFiles:          slices.Clone(s.Changesets.AllowedFiles),
		EmitRevisionChanged: s.Changesets.EmitRevisionChanged,
	}
	if a != nil {
		p.AgentFiles = slices.Clone(a.Changesets.AllowedFiles)
	}
	return p
}

// Allows reports whether path may be changed: changesets are enabled and
// both lists allow it (an empty list allows every path). path is
// slash-separated and relative to the bundle root, as git names it; a path
// that is not in that form ("/a", "./a", "a/../b", "a//b", "a/", "a\b")
// is never allowed, since a glob like tools/** would match "tools/../x".
func (p ChangesetPolicy) Allows(path string) bool {
	if !p.Enabled || !bundlePath(path) {
		return false
	}
	return anyGlob(p.SwarmFiles, path) && anyGlob(p.AgentFiles, path)
}

// Refused returns the paths of paths that p does not allow, sorted, each
// once; nil when p allows them all.
func (p ChangesetPolicy) Refused(paths []string) []string {
	var out []string
	for _, path := range paths {
		if !p.Allows(path) {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// bundlePath reports whether path names a file inside the bundle in its one
// canonical form.
func bundlePath(path string) bool {
	return path != "." && fs.ValidPath(path) && !strings.Contains(path, `\`)
}

// anyGlob reports whether path matches one of globs; an empty list matches
// every path. The globs were checked at load; a malformed one (a
// hand-built policy) matches nothing.
func anyGlob(globs []string, path string) bool {
	if len(globs) == 0 {
		return true
	}
	for _, g := range globs {
		if ok, err := doublestar.Match(g, path); ok && err == nil {
			return true
		}
	}
	return false
}

// fileGlobProblem says what is wrong with a pattern of allowed.files ("" when
// nothing is). Patterns match the whole slash-separated path relative to the
// bundle root, so one that could only match outside it, or never match a
// path in that form, is refused rather than silently allowing nothing.
func fileGlobProblem(g string) string {
	switch {
	case strings.HasPrefix(g, "/"):
		return fmt.Sprintf("%q must be relative to the bundle root (no leading /)", g)
	case strings.Contains(g, `\`):
		return fmt.Sprintf("%q must not contain a backslash: paths are slash-separated and escapes are not supported", g)
	}
	for seg := range strings.SplitSeq(g, "/") {
		switch seg {
		case "..":
			return fmt.Sprintf("%q must not contain a .. segment: patterns match files inside the bundle", g)
		case ".":
			return fmt.Sprintf("%q must not contain a . segment: paths are matched without ./", g)
		case "":
			return fmt.Sprintf("%q must not contain an empty segment (// or a trailing /; for a directory's files write dir/**)", g)
		}
	}
	if !doublestar.ValidatePattern(g) {
		return fmt.Sprintf("%q is not a valid glob (an unclosed [ or {, or an empty [])", g)
	}
	return ""
}

// Fields of a changesets mapping.
var (
	swarmChangesetFields = []string{"enabled", "allowed", "emitRevisionChangedEvent"}
	agentChangesetFields = []string{"enabled", "allowed"}
)

// swarmChangesets reads a Swarm's policy.changesets.
func swarmChangesets(policy *mapping) SwarmChangesets {
	cs := policy.child("changesets", swarmChangesetFields...)
	return SwarmChangesets{
		Enabled:             cs.optBool("enabled", false),
		AllowedFiles:        allowedFiles(cs),
		EmitRevisionChanged: cs.optBool("emitRevisionChangedEvent", true),
	}
}

// agentChangesets reads an Agent's changesets.
func agentChangesets(spec *mapping) AgentChangesets {
	cs := spec.child("changesets", agentChangesetFields...)
	return AgentChangesets{
		Enabled:      cs.optBool("enabled", true),
		AllowedFiles: allowedFiles(cs),
	}
}

// allowedFiles reads allowed.files of a changesets mapping: nil when absent
// or empty (every file).
func allowedFiles(cs *mapping) []string {
	files, _ := cs.child("allowed", "files").stringList("files", fileGlobProblem)
	return files
}
