package jwtauth

import (
	"slices"

	"github.com/agentauth/agentauth/shared/domain"
)

// Claim names with a fixed meaning in agentauth (domain defines them).
const (
	ScopeAdmin = domain.ScopeAdmin

	DefaultTenantClaim = domain.DefaultTenantClaim
	DefaultSkillsClaim = domain.DefaultSkillsClaim
)

// Claims are the verified claims of a token. Numbers are json.Number.
type Claims map[string]any

// Subject is the principal: the sub claim, or "" when it is absent or not a
// string.
func (c Claims) Subject() string {
	s, _ := c["sub"].(string)
	return s
}

// Scopes returns the caller's scopes (domain.ClaimScopes): from scope
// (space-separated), or, when scope is absent, from scp (a list, or a
// space-separated string). Empty entries and duplicates are dropped.
func (c Claims) Scopes() []string { return domain.ClaimScopes(c) }

// HasScope reports whether scope is among Scopes.
func (c Claims) HasScope(scope string) bool { return slices.Contains(c.Scopes(), scope) }

// IsAdmin reports whether the caller holds the agentauth:admin scope.
func (c Claims) IsAdmin() bool { return c.HasScope(ScopeAdmin) }

// StringAt returns the claim at path in its string form
// (domain.ClaimText), the rule access policies and subject templates use
// too. ok is false when the claim is absent, null, an empty string, or
// has no string form (an object or a list).
func (c Claims) StringAt(path string) (string, bool) { return domain.ClaimText(c, path) }

// ListAt returns the claim at path as a list of strings (domain.ClaimList):
// a JSON list of strings, or a comma-separated string. A present but empty
// list is an empty, non-nil slice with ok true, distinct from an absent
// claim (nil, false).
func (c Claims) ListAt(path string) ([]string, bool) { return domain.ClaimList(c, path) }

// At returns the raw claim at path by domain.LookupClaim. A claim whose
// value is null is present: (nil, true).
func (c Claims) At(path string) (any, bool) {
	return domain.LookupClaim(map[string]any(c), path)
}
