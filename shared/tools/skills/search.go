package skills

import (
	"math"
	"slices"
)

// Search returns the skills the caller described by q may see (see
// Query.Visible), best first, at most clamp(q.TopK) of them.
//
// Ranking is BM25F (Robertson, Zaragoza & Taylor 2004) over name,
// description and content with k1 = 1.2, b = 0.75 and the field weights
// name 3, description 2, content 1. For a skill d and a query term t:
//
//	tf(t,d)  = Σ_f w_f · tf_f(t,d) / (1 − b + b · len_f(d) / avglen_f)
//	idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
//	score(d) = Σ_t idf(t) · tf(t,d) · (k1 + 1) / (k1 + tf(t,d))
//
// where the sum is over the distinct terms of q.Text (see tokenize; repeats
// count once, at most MaxQueryTerms), and N, df and avglen are computed over
// the skills this caller can see: another tenant's skills never influence a
// score, so scores cannot be used to probe what other tenants uploaded. The
// idf form is the non-negative one (Lucene's), so a term in most skills still
// counts a little instead of subtracting.
//
// Only skills that contain at least one query term are returned. Ties are
// broken by name (then global before tenant, then tenant id), so results
// are deterministic. A query with no terms (empty, or only punctuation)
// returns every visible skill in name order with a RelevanceScore of 0.
func (ix *Index) Search(q Query) []Result {
	k := clampTopK(q.TopK)
	visibleTenant := ix.visibleTenantDocs(q)
	terms := ix.queryTerms(q.Text)
	if len(terms) == 0 {
		return ix.byNameResults(q, k, visibleTenant)
	}

	n := float64(ix.globalN + len(visibleTenant))
	sumLen := ix.globalLen
	for _, id := range visibleTenant {
		for f := range numFields {
			sumLen[f] += float64(ix.docs[id].length[f])
		}
	}
	// The BM25 length normalization of a field, 1 − b + b·len/avglen, is
	// base + slope[f]·len.
	var slope [numFields]float64
	for f := range numFields {
		if sumLen[f] > 0 {
			slope[f] = bm25B * n / sumLen[f]
		}
	}
	const base = 1 - bm25B

	var tenantVisible []bool
	if len(visibleTenant) > 0 {
		tenantVisible = make([]bool, len(ix.docs))
		for _, id := range visibleTenant {
			tenantVisible[id] = true
		}
	}
	scores := make([]float64, len(ix.docs))
	touched := make([]int32, 0, 64)
	for _, t := range terms {
		if t < 0 {
			continue // not in any skill
		}
		df := int(ix.globalDF[t])
		for _, id := range visibleTenant {
			if _, ok := ix.docs[id].terms[t]; ok {
				df++
			}
		}
		if df == 0 {
			continue
		}
		idf := math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
		for _, p := range ix.postings[t] {
			d := &ix.docs[p.doc]
			if d.skill.Scope != ScopeGlobal && (tenantVisible == nil || !tenantVisible[p.doc]) {
				continue
			}
			var tf float64
			for f := range numFields {
				if p.tf[f] != 0 {
					tf += fieldWeights[f] * float64(p.tf[f]) / (base + slope[f]*float64(d.length[f]))
				}
			}
			if scores[p.doc] == 0 {
				touched = append(touched, p.doc)
			}
			scores[p.doc] += idf * tf * (bm25K1 + 1) / (bm25K1 + tf)
		}
	}

	top := make([]int32, 0, min(k, len(touched)))
	better := func(a, b int32) bool {
		if scores[a] != scores[b] {
			return scores[a] > scores[b]
		}
		return compareSkills(&ix.docs[a].skill, &ix.docs[b].skill) < 0
	}
	for _, id := range touched {
		if len(top) == k && !better(id, top[k-1]) {
			continue
		}
		i, _ := slices.BinarySearchFunc(top, id, func(e, target int32) int {
			if better(e, target) {
				return -1
			}
			return 1
		})
		if len(top) == k {
			top = top[:k-1]
		}
		top = slices.Insert(top, i, id)
	}
	out := make([]Result, len(top))
	for i, id := range top {
		out[i] = Result{Skill: ix.docs[id].skill, RelevanceScore: scores[id]}
	}
	return out
}

// visibleTenantDocs is the set of tenant skills q may see, found through the
// allow list rather than by scanning the index, as sorted unique doc ids. It
// applies the same rule as Query.Visible.
func (ix *Index) visibleTenantDocs(q Query) []int32 {
	if q.TenantID == "" || len(q.AllowedSkillNames) == 0 {
		return nil
	}
	var ids []int32
	for _, name := range q.AllowedSkillNames {
		if id, ok := ix.tenants[tenantSkillKey{q.TenantID, name}]; ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// queryTerms maps the distinct terms of text, in order of first appearance,
// to term ids (-1 for a term no skill contains).
func (ix *Index) queryTerms(text string) []int32 {
	toks := tokenize(text, nil)
	seen := make(map[string]struct{}, len(toks))
	ids := make([]int32, 0, min(len(toks), MaxQueryTerms))
	for _, tok := range toks {
		if len(ids) == MaxQueryTerms {
			break
		}
		if _, dup := seen[tok]; dup {
			continue
		}
		seen[tok] = struct{}{}
		id, ok := ix.dict[tok]
		if !ok {
			id = -1
		}
		ids = append(ids, id)
	}
	return ids
}

func (ix *Index) byNameResults(q Query, k int, visibleTenant []int32) []Result {
	var out []Result
	for _, id := range ix.byName {
		if len(out) == k {
			break
		}
		d := &ix.docs[id]
		if _, vis := slices.BinarySearch(visibleTenant, id); d.skill.Scope == ScopeGlobal || vis {
			out = append(out, Result{Skill: d.skill})
		}
	}
	if out == nil {
		out = []Result{}
	}
	return out
}
