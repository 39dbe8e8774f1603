package skills

// Visibility is one skill and why a caller may or may not see it.
type Visibility struct {
	Skill
	Reason Reason
}

// Explain lists, in name order, the skills the caller described by q may
// see and, hidden, its own tenant's skills that its allow list does not
// name: what an operator's simulator shows. Other tenants' skills are
// left out. Each one's Reason is Query.Why's, the rule Search applies.
func (ix *Index) Explain(q Query) []Visibility {
	var out []Visibility
	for _, id := range ix.byName {
		s := ix.docs[id].skill
		if r := q.Why(s); r.Visible() || r == ReasonNotAllowed {
			out = append(out, Visibility{Skill: s, Reason: r})
		}
	}
	return out
}
