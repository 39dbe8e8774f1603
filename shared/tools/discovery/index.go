package discovery

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math/bits"
	"slices"
	"strings"
)

// defaultInputSchema is the schema of a tool that declares none.
const defaultInputSchema = `{"type":"object"}`

// Index answers GetAgentToolsQuery for one Config. It is immutable once
// built and safe for concurrent use.
type Index struct {
	entries []ToolManifestEntry // by tool id; a tool's number is its position
	byID    map[string]int32
	groups  map[string]*groupTools
	// policies are the active ones in evaluation order.
	policies []*policy
	warnings []string
}

type groupTools struct {
	active   bool
	enabled  []int32 // tool numbers, ascending: the group's enabled tools
	disabled []int32 // explicit disabled tools, not excluded, ascending
	// enabledVia and disabledVia say, position by position, how the group
	// holds the tools of enabled and disabled (Explain reads them).
	enabledVia, disabledVia []via
	selectors               []Selector // the group's own, for Explain
}

// via is how a group holds a tool: a set of the bits below. A group
// holds a tool when it has one of them; the build that decides
// membership is the one that records them.
type via uint8

const (
	// viaSelectors: the tool is enabled and matches every selector.
	viaSelectors via = 1 << iota
	// viaExplicit: the group lists the tool in its explicit tool ids.
	viaExplicit
)

type policy struct {
	id       string
	priority int
	matchers []*ClaimMatcher
	never    bool     // no matchers, or one that does not compile
	groups   []string // the groups it grants, sorted, each once
}

// toolView is a tool prepared for selector checks: its values folded for
// the case-insensitive globs, its source and method interned.
type toolView struct {
	enabled            bool
	source, method     int32 // into the distinct values
	name, path         string
	nameFold, pathFold []rune
	tags, labels       []string
}

// NewIndex validates cfg and precomputes every active group's tools. It
// fails on structural problems only: an empty or duplicate id, a tool id
// that is not "<source>:<operation>", an input schema that is not JSON.
// Rules that cannot be evaluated fail closed instead (a policy with a bad
// matcher never matches; a selector with a bad pattern matches nothing)
// and are listed in Warnings, as are references to unknown tools and
// groups.
func NewIndex(cfg Config) (*Index, error) {
	ix := &Index{byID: make(map[string]int32, len(cfg.Tools)), groups: map[string]*groupTools{}}

	tools := slices.Clone(cfg.Tools)
	slices.SortStableFunc(tools, func(a, b Tool) int { return strings.Compare(a.key(), b.key()) })
	for i, t := range tools {
		switch {
		case !ValidToolID(t.ID):
			return nil, fmt.Errorf("discovery: tool id %q: want <source>:<operation>", t.ID)
		case t.Tenant != "" && !ValidSourceID(t.Tenant):
			return nil, fmt.Errorf("discovery: tool %s: tenant %q: want letters, digits, _ . - starting with a letter or digit", t.ID, t.Tenant)
		case i > 0 && tools[i-1].key() == t.key():
			return nil, fmt.Errorf("discovery: duplicate tool id %q", t.key())
		case len(t.InputSchema) > 0 && !json.Valid(t.InputSchema):
			return nil, fmt.Errorf("discovery: tool %s: input schema is not valid JSON", t.ID)
		}
	}
	noSchema := json.RawMessage(defaultInputSchema) // one copy per index, never shared between indexes
	ix.entries = make([]ToolManifestEntry, len(tools))
	views := make([]toolView, len(tools))
	sources, methods := interner{}, interner{}
	for i, t := range tools {
		ix.byID[t.key()] = int32(i)
		// Copies, so that the caller's slices can change without
		// changing the index.
		schema := slices.Clone(t.InputSchema)
		if len(schema) == 0 {
			schema = noSchema
		}
		tags := slices.Clone(t.Tags)
		if tags == nil {
			tags = []string{}
		}
		var ann *ToolAnnotations
		if t.Annotations != nil {
			a := *t.Annotations
			ann = &a
		}
		ix.entries[i] = ToolManifestEntry{
			ToolID: t.key(), Name: t.Name, Description: t.Description, InputSchema: schema,
			SourceID: t.SourceID, SourcePath: t.SourcePath, Tags: tags, Version: t.Version, Tenant: t.Tenant,
			Annotations: ann,
		}
		views[i] = toolView{
			enabled: t.Enabled,
			source:  sources.id(t.SourceID), method: methods.id(t.Method),
			name: t.Name, path: t.SourcePath,
			nameFold: foldRunes(t.Name), pathFold: foldRunes(t.SourcePath),
			tags: tags, labels: slices.Clone(t.LabelIDs),
		}
	}

	seen := map[string]bool{}
	for _, g := range cfg.Groups {
		switch {
		case g.ID == "":
			return nil, fmt.Errorf("discovery: a group has an empty id")
		case seen[g.ID]:
			return nil, fmt.Errorf("discovery: duplicate group id %q", g.ID)
		}
		seen[g.ID] = true
		ix.groups[g.ID] = ix.buildGroup(g, views, &sources, &methods)
	}

	seen = map[string]bool{}
	for _, p := range cfg.Policies {
		switch {
		case p.ID == "":
			return nil, fmt.Errorf("discovery: a policy has an empty id")
		case seen[p.ID]:
			return nil, fmt.Errorf("discovery: duplicate policy id %q", p.ID)
		}
		seen[p.ID] = true
		for _, gid := range p.GroupIDs {
			if _, ok := ix.groups[gid]; !ok {
				ix.warnf("policy %s: group %q does not exist: it grants no tools", p.ID, gid)
			}
		}
		if !p.Active {
			continue
		}
		groups := slices.Clone(p.GroupIDs)
		slices.Sort(groups)
		cp := &policy{id: p.ID, priority: p.Priority, groups: slices.Compact(groups), never: len(p.Matchers) == 0}
		if cp.never {
			ix.warnf("policy %s: no claim matchers: it never matches", p.ID)
		}
		for i, m := range p.Matchers {
			cm, err := m.Compile()
			if err != nil {
				ix.warnf("policy %s: matcher %d: %v: the policy never matches", p.ID, i, err)
				cp.never = true
				continue
			}
			cp.matchers = append(cp.matchers, cm)
		}
		ix.policies = append(ix.policies, cp)
	}
	slices.SortFunc(ix.policies, func(a, b *policy) int {
		return cmp.Or(cmp.Compare(b.priority, a.priority), strings.Compare(a.id, b.id))
	})
	slices.Sort(ix.warnings)
	return ix, nil
}

func (ix *Index) warnf(format string, args ...any) {
	ix.warnings = append(ix.warnings, fmt.Sprintf(format, args...))
}

// interner numbers distinct strings, so that a selector checks a source or
// method pattern once per distinct value instead of once per tool.
type interner struct {
	ids    map[string]int32
	values []string
}

func (in *interner) id(s string) int32 {
	if in.ids == nil {
		in.ids = map[string]int32{}
	}
	if id, ok := in.ids[s]; ok {
		return id
	}
	id := int32(len(in.values))
	in.ids[s] = id
	in.values = append(in.values, s)
	return id
}

// compiledSelector is a Selector ready for the tools of one Index.
type compiledSelector struct {
	sourceOK, methodOK []bool // by interned value
	name, path         *Pattern
	s                  Selector
}

func (ix *Index) compileSelector(gid string, i int, s Selector, sources, methods *interner) (*compiledSelector, bool) {
	pats := make([]*Pattern, 4)
	for k, src := range []string{s.Source, s.Name, s.Path, s.Method} {
		p, err := CompilePattern(src)
		if err != nil {
			ix.warnf("group %s: selector %d: %v: the selector matches no tool", gid, i, err)
			return nil, false
		}
		pats[k] = p
	}
	cs := &compiledSelector{name: pats[1], path: pats[2], s: s}
	cs.sourceOK = make([]bool, len(sources.values))
	for k, v := range sources.values {
		cs.sourceOK[k] = pats[0].Match(v)
	}
	cs.methodOK = make([]bool, len(methods.values))
	for k, v := range methods.values {
		cs.methodOK[k] = pats[3].Match(v)
	}
	return cs, true
}

func (cs *compiledSelector) match(t *toolView) bool {
	if !cs.sourceOK[t.source] || !cs.methodOK[t.method] {
		return false
	}
	for _, tag := range cs.s.RequiredTags {
		if !slices.Contains(t.tags, tag) {
			return false
		}
	}
	for _, tag := range cs.s.ExcludedTags {
		if slices.Contains(t.tags, tag) {
			return false
		}
	}
	for _, l := range cs.s.RequiredLabelIDs {
		if !slices.Contains(t.labels, l) {
			return false
		}
	}
	return cs.name.matchFolded(t.name, t.nameFold) && cs.path.matchFolded(t.path, t.pathFold)
}

func (ix *Index) buildGroup(g Group, views []toolView, sources, methods *interner) *groupTools {
	gt := &groupTools{active: g.Active, selectors: cloneSelectors(g.Selectors)}
	for _, id := range g.ExplicitToolIDs {
		if _, ok := ix.byID[id]; !ok {
			ix.warnf("group %s: explicit tool %q does not exist", g.ID, id)
		}
	}
	for _, id := range g.ExcludedToolIDs {
		if _, ok := ix.byID[id]; !ok {
			ix.warnf("group %s: excluded tool %q does not exist", g.ID, id)
		}
	}
	if !g.Active {
		return gt // contributes nothing: don't spend the build on it
	}

	in := make([]via, len(views))
	if len(g.Selectors) > 0 {
		sels := make([]*compiledSelector, 0, len(g.Selectors))
		ok := true
		for i, s := range g.Selectors {
			cs, good := ix.compileSelector(g.ID, i, s, sources, methods)
			ok = ok && good
			sels = append(sels, cs)
		}
		if ok { // a selector that does not compile matches nothing, and so does the AND
			for i := range views {
				if views[i].enabled && allMatch(sels, &views[i]) {
					in[i] = viaSelectors
				}
			}
		}
	}
	for _, id := range g.ExplicitToolIDs {
		if n, ok := ix.byID[id]; ok {
			in[n] |= viaExplicit
		}
	}
	for _, id := range g.ExcludedToolIDs {
		if n, ok := ix.byID[id]; ok {
			in[n] = 0
		}
	}
	for i, how := range in {
		switch {
		case how == 0:
		case views[i].enabled:
			gt.enabled = append(gt.enabled, int32(i))
			gt.enabledVia = append(gt.enabledVia, how)
		default:
			gt.disabled = append(gt.disabled, int32(i))
			gt.disabledVia = append(gt.disabledVia, how)
		}
	}
	return gt
}

// cloneSelectors copies selectors deeply, so that the caller's config can
// change without changing the index.
func cloneSelectors(sels []Selector) []Selector {
	if len(sels) == 0 {
		return nil
	}
	out := make([]Selector, len(sels))
	for i, s := range sels {
		s.RequiredTags, s.ExcludedTags, s.RequiredLabelIDs = slices.Clone(s.RequiredTags), slices.Clone(s.ExcludedTags), slices.Clone(s.RequiredLabelIDs)
		out[i] = s
	}
	return out
}

func allMatch(sels []*compiledSelector, t *toolView) bool {
	for _, s := range sels {
		if !s.match(t) {
			return false
		}
	}
	return true
}

// Warnings lists, sorted, the rules NewIndex found that fail closed or
// refer to tools or groups it does not have.
func (ix *Index) Warnings() []string { return slices.Clone(ix.warnings) }

// ResolveAccess evaluates the active policies against claims (policies in
// priority order, highest first, ties by id) and returns the matching
// ones and the union of the groups they grant.
func (ix *Index) ResolveAccess(claims map[string]any) Access {
	return ix.access(claims, nil)
}

// access is ResolveAccess, calling each (when not nil) with every matching
// policy in evaluation order: the one pass over the policies that
// ResolveAccess and Explain share.
func (ix *Index) access(claims map[string]any, each func(*policy)) Access {
	var a Access
	for _, p := range ix.policies {
		if !p.match(claims) {
			continue
		}
		a.PolicyIDs = append(a.PolicyIDs, p.id)
		a.GroupIDs = append(a.GroupIDs, p.groups...)
		if each != nil {
			each(p)
		}
	}
	slices.Sort(a.GroupIDs)
	a.GroupIDs = slices.Compact(a.GroupIDs)
	return a
}

func (p *policy) match(claims map[string]any) bool {
	if p.never {
		return false
	}
	for _, m := range p.matchers {
		if !m.Match(claims) {
			return false
		}
	}
	return true
}

// GroupTools returns the tools of one group, sorted by tool id: nil for an
// unknown or inactive group. With includeDisabled, the disabled tools the
// group lists explicitly are kept.
func (ix *Index) GroupTools(groupID string, includeDisabled bool) []ToolManifestEntry {
	g, ok := ix.groups[groupID]
	if !ok || !g.active {
		return nil
	}
	if !includeDisabled || len(g.disabled) == 0 {
		return ix.collect(g.enabled)
	}
	return ix.Manifest([]string{groupID}, true)
}

func (ix *Index) collect(nums []int32) []ToolManifestEntry {
	if len(nums) == 0 {
		return nil
	}
	out := make([]ToolManifestEntry, len(nums))
	for i, n := range nums {
		out[i] = ix.entries[n]
	}
	return out
}

// Manifest returns the deduplicated tools of the given groups, sorted by
// tool id; unknown and inactive groups contribute nothing.
func (ix *Index) Manifest(groupIDs []string, includeDisabled bool) []ToolManifestEntry {
	set := make([]uint64, (len(ix.entries)+63)>>6) // a bit per tool
	for _, gid := range groupIDs {
		g, ok := ix.groups[gid]
		if !ok || !g.active {
			continue
		}
		for _, n := range g.enabled {
			set[n/64] |= 1 << (n % 64)
		}
		if includeDisabled {
			for _, n := range g.disabled {
				set[n/64] |= 1 << (n % 64)
			}
		}
	}
	count := 0
	for _, w := range set {
		count += bits.OnesCount64(w)
	}
	if count == 0 {
		return nil
	}
	out := make([]ToolManifestEntry, 0, count)
	for wi, w := range set {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, ix.entries[wi*64+b])
			w &= w - 1
		}
	}
	return out
}

// Resolve answers GetAgentToolsQuery for one caller from scratch:
// ResolveAccess, then Manifest of the granted groups. It cannot fail: every
// rule that cannot be evaluated has already been made to fail closed.
func (ix *Index) Resolve(claims map[string]any, opts Options) Resolution {
	a := ix.ResolveAccess(claims)
	return Resolution{Access: a, Tools: ix.Manifest(a.GroupIDs, opts.IncludeDisabled)}
}

// MergeManifests unions manifests (for example per-group lists a caller
// cached from GroupTools) into one, deduplicated by tool id and sorted by
// it. When two entries share an id, the first one given wins.
func MergeManifests(lists ...[]ToolManifestEntry) []ToolManifestEntry {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	if n == 0 {
		return nil
	}
	out := make([]ToolManifestEntry, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.SortStableFunc(out, func(a, b ToolManifestEntry) int { return strings.Compare(a.ToolID, b.ToolID) })
	return slices.CompactFunc(out, func(a, b ToolManifestEntry) bool { return a.ToolID == b.ToolID })
}
