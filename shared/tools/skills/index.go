package skills

import (
	"cmp"
	"fmt"
	"slices"
)

// The fields a skill is searched on, in weight order.
const (
	fieldName = iota
	fieldDescription
	fieldContent
	numFields
)

// fieldWeights are the BM25F field weights: one occurrence of a term in a
// skill's name counts as three occurrences in its content, one in its
// description as two. A name is what a skill is; a description says what it
// is for; content is long and mentions much that the skill is not about.
var fieldWeights = [numFields]float64{fieldName: 3, fieldDescription: 2, fieldContent: 1}

// BM25 parameters: the usual k1 (term-frequency saturation) and b (length
// normalization, the same for every field).
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// posting is one skill that contains a term, with the term's count in each
// field.
type posting struct {
	doc int32
	tf  [numFields]uint32
}

type termCount struct {
	term int32
	tf   [numFields]uint32
}

type doc struct {
	skill  Skill
	length [numFields]uint32 // terms per field
	// terms is the set of term ids of a tenant skill, used to add it to a
	// term's document frequency when the caller can see it. Nil for global
	// skills, whose frequencies are precomputed.
	terms map[int32]struct{}
}

type tenantSkillKey struct{ tenant, name string }

// Index is an immutable search index over a list of skills. It is safe for
// concurrent use.
type Index struct {
	docs     []doc
	dict     map[string]int32 // term → term id
	postings [][]posting      // by term id, in doc order

	// Collection statistics over the global skills; a query adds the tenant
	// skills it can see.
	globalDF  []int32 // by term id
	globalN   int
	globalLen [numFields]float64 // summed field lengths

	byName  []int32                  // doc ids in result order for an empty query
	tenants map[tenantSkillKey]int32 // tenant skill → doc id
}

// NewIndex indexes skills. It rejects a skill without a name, with a scope
// other than global or tenant, a tenant skill without a tenant id, a global
// skill with one, and duplicates (the same name twice among the global
// skills, or twice within one tenant). A global skill and a tenant skill may
// share a name.
func NewIndex(skills []Skill) (*Index, error) {
	ix := &Index{
		docs:    make([]doc, 0, len(skills)),
		dict:    make(map[string]int32),
		tenants: make(map[tenantSkillKey]int32),
	}
	globals := make(map[string]struct{})
	var (
		toks  []string
		slot  = make(map[int32]int) // term id → index in count, per skill
		count []termCount           // this skill's terms, in order of first appearance
	)
	for i, s := range skills {
		if err := validate(s); err != nil {
			return nil, fmt.Errorf("skills: skill %d (%q): %w", i, s.Name, err)
		}
		id := int32(len(ix.docs))
		if s.Scope == ScopeGlobal {
			if _, dup := globals[s.Name]; dup {
				return nil, fmt.Errorf("skills: skill %d: duplicate global skill %q", i, s.Name)
			}
			globals[s.Name] = struct{}{}
		} else {
			key := tenantSkillKey{s.TenantID, s.Name}
			if _, dup := ix.tenants[key]; dup {
				return nil, fmt.Errorf("skills: skill %d: duplicate skill %q for tenant %q", i, s.Name, s.TenantID)
			}
			ix.tenants[key] = id
		}

		d := doc{skill: s}
		clear(slot)
		count = count[:0]
		for f, text := range [numFields]string{s.Name, s.Description, s.Content} {
			toks = tokenize(text, toks[:0])
			d.length[f] = uint32(len(toks))
			for _, tok := range toks {
				t, ok := ix.dict[tok]
				if !ok {
					t = int32(len(ix.postings))
					ix.dict[tok] = t
					ix.postings = append(ix.postings, nil)
					ix.globalDF = append(ix.globalDF, 0)
				}
				j, ok := slot[t]
				if !ok {
					j = len(count)
					slot[t] = j
					count = append(count, termCount{term: t})
				}
				count[j].tf[f]++
			}
		}
		if s.Scope == ScopeGlobal {
			ix.globalN++
			for f := range numFields {
				ix.globalLen[f] += float64(d.length[f])
			}
		} else {
			d.terms = make(map[int32]struct{}, len(count))
		}
		// Skills are indexed in order, so every postings list is in doc
		// order, which fixes the order of every floating-point sum in Search.
		for _, c := range count {
			t := c.term
			ix.postings[t] = append(ix.postings[t], posting{doc: id, tf: c.tf})
			if s.Scope == ScopeGlobal {
				ix.globalDF[t]++
			} else {
				d.terms[t] = struct{}{}
			}
		}
		ix.docs = append(ix.docs, d)
	}
	ix.byName = make([]int32, len(ix.docs))
	for i := range ix.byName {
		ix.byName[i] = int32(i)
	}
	slices.SortFunc(ix.byName, func(a, b int32) int { return compareSkills(&ix.docs[a].skill, &ix.docs[b].skill) })
	return ix, nil
}

func validate(s Skill) error {
	switch {
	case s.Name == "":
		return fmt.Errorf("name is empty")
	case s.Scope == ScopeGlobal && s.TenantID != "":
		return fmt.Errorf("global skill has tenant id %q", s.TenantID)
	case s.Scope == ScopeTenant && s.TenantID == "":
		return fmt.Errorf("tenant skill has no tenant id")
	case s.Scope != ScopeGlobal && s.Scope != ScopeTenant:
		return fmt.Errorf("scope %q is neither %q nor %q", s.Scope, ScopeGlobal, ScopeTenant)
	}
	return nil
}

// compareSkills is the tie-break order of results: by name, then global
// before tenant, then by tenant id. Names are unique within a scope and
// tenant, so it is a total order.
func compareSkills(a, b *Skill) int {
	if c := cmp.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Scope, b.Scope); c != 0 { // "global" < "tenant"
		return c
	}
	return cmp.Compare(a.TenantID, b.TenantID)
}

// Len is the number of indexed skills.
func (ix *Index) Len() int { return len(ix.docs) }
