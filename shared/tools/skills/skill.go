package skills

import "slices"

// Scope says who a skill is for.
type Scope string

const (
	// ScopeGlobal is a bundle skill that every caller may see.
	ScopeGlobal Scope = "global"
	// ScopeTenant is a skill uploaded by one tenant; only callers of that
	// tenant whose allow list names it may see it.
	ScopeTenant Scope = "tenant"
)

// Skill is one searchable skill.
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Content     string `json:"content"`
	Scope       Scope  `json:"scope"`
	// TenantID is the owning tenant of a ScopeTenant skill and empty for a
	// ScopeGlobal one.
	TenantID string `json:"tenant_id,omitempty"`
}

// Query is one search. TenantID and AllowedSkillNames decide visibility and
// must come from the caller's verified token claims, never from request
// parameters (see the package documentation).
type Query struct {
	// Text is the free-text query. Text with no letter or digit lists every
	// visible skill by name with a score of 0.
	Text string
	// TopK is the number of results wanted: DefaultTopK when ≤ 0, at most
	// MaxTopK.
	TopK int
	// TenantID is the caller's tenant; empty for a caller without one.
	TenantID string
	// AllowedSkillNames are the tenant skills the caller may see, by exact
	// name. Nil and empty mean the same: no tenant skill.
	AllowedSkillNames []string
}

// Result is one ranked skill.
type Result struct {
	Skill
	RelevanceScore float64 `json:"relevance_score"`
}

// Limits of a query.
const (
	// DefaultTopK is used when Query.TopK is zero or negative.
	DefaultTopK = 10
	// MaxTopK caps Query.TopK.
	MaxTopK = 100
	// MaxQueryTerms caps the distinct terms of one query that are scored,
	// in order of first appearance, so that one request's work is bounded
	// whatever its length. Further terms are ignored.
	MaxQueryTerms = 64
)

// Visible reports whether the caller described by q may see s. It is
// Why's answer, the whole visibility rule of the package, and depends on
// nothing but its arguments.
func (q Query) Visible(s Skill) bool { return q.Why(s).Visible() }

// Reason says why a caller may or may not see a skill.
type Reason string

// The reasons Why gives.
const (
	// ReasonGlobal: a global skill, which every caller sees.
	ReasonGlobal Reason = "global"
	// ReasonAllowed: a skill of the caller's tenant that its allow list
	// names.
	ReasonAllowed Reason = "allowed"
	// ReasonNotAllowed: a skill of the caller's tenant that its allow
	// list does not name (or the caller has none): hidden.
	ReasonNotAllowed Reason = "not_allowed"
	// ReasonOtherTenant: another tenant's skill, or the caller has no
	// tenant: hidden.
	ReasonOtherTenant Reason = "other_tenant"
	// ReasonUnknownScope: a scope neither global nor tenant: hidden
	// (fail closed).
	ReasonUnknownScope Reason = "unknown_scope"
)

// Visible reports whether the reason lets the caller see the skill.
func (r Reason) Visible() bool { return r == ReasonGlobal || r == ReasonAllowed }

// Why applies the visibility rule to s for the caller described by q and
// says which part of it decided.
func (q Query) Why(s Skill) Reason {
	switch s.Scope {
	case ScopeGlobal:
		return ReasonGlobal
	case ScopeTenant:
		switch {
		case q.TenantID == "" || s.TenantID != q.TenantID:
			return ReasonOtherTenant
		case slices.Contains(q.AllowedSkillNames, s.Name):
			return ReasonAllowed
		default:
			return ReasonNotAllowed
		}
	default:
		return ReasonUnknownScope
	}
}

func clampTopK(k int) int {
	switch {
	case k <= 0:
		return DefaultTopK
	case k > MaxTopK:
		return MaxTopK
	default:
		return k
	}
}
