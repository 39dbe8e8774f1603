package jwtauth

import (
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// Claim names with a fixed meaning in agentauth.
const (
	ScopeAdmin = "agentauth:admin"

	DefaultTenantClaim = "tenant_id"
	DefaultSkillsClaim = "skills"
)

// Claims are the verified claims of a token. Numbers are json.Number.
type Claims map[string]any

// Subject is the principal: the sub claim, or "" when it is absent or not a
// string.
func (c Claims) Subject() string {
	s, _ := c["sub"].(string)
	return s
}

// Scopes returns the caller's scopes from scope (space-separated), or, when
// scope is absent, from scp (a list, or a space-separated string). Empty
// entries and duplicates are dropped.
func (c Claims) Scopes() []string {
	var raw []string
	if s, ok := c["scope"].(string); ok {
		raw = strings.Fields(s)
	} else {
		switch scp := c["scp"].(type) {
		case string:
			raw = strings.Fields(scp)
		case []any:
			for _, e := range scp {
				if s, ok := e.(string); ok {
					raw = append(raw, strings.Fields(s)...)
				}
			}
		}
	}
	seen := make(map[string]bool, len(raw))
	out := raw[:0]
	for _, s := range raw {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// HasScope reports whether scope is among Scopes.
func (c Claims) HasScope(scope string) bool {
	for _, s := range c.Scopes() {
		if s == scope {
			return true
		}
	}
	return false
}

// IsAdmin reports whether the caller holds the agentauth:admin scope.
func (c Claims) IsAdmin() bool { return c.HasScope(ScopeAdmin) }

// StringAt returns the claim at path (domain.LookupClaim) in its string
// form (domain.ClaimString), the rule access policies and subject
// templates use too. ok is false when the claim is absent, null, an empty
// string, or has no string form (an object or a list).
func (c Claims) StringAt(path string) (string, bool) {
	v, _ := c.At(path)
	s, ok := domain.ClaimString(v)
	return s, ok && s != ""
}

// ListAt returns the claim at path (domain.LookupClaim) as a list of
// strings: a JSON list of strings, or a comma-separated string. Entries are
// trimmed and empty ones dropped. A present but empty list is an empty, non-nil slice with ok
// true, distinct from an absent claim (nil, false). A list holding anything
// but strings is refused (nil, false) rather than partly read.
func (c Claims) ListAt(path string) ([]string, bool) {
	v, _ := c.At(path)
	out := []string{}
	switch l := v.(type) {
	case string:
		for _, s := range strings.Split(l, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	case []any:
		for _, e := range l {
			s, ok := e.(string)
			if !ok {
				return nil, false
			}
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	default:
		return nil, false
	}
	return out, true
}

// At returns the raw claim at path by domain.LookupClaim. A claim whose
// value is null is present: (nil, true).
func (c Claims) At(path string) (any, bool) {
	return domain.LookupClaim(map[string]any(c), path)
}
