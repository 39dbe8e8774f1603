package jwtauth

import (
	"encoding/json"
	"strings"
)

// Claim names with a fixed meaning in agentauth.
const (
	ScopeAdmin = "agentauth:admin"

	DefaultTenantClaim = "tenant_id"
	DefaultSkillsClaim = "skills"
)

// maxClaimPath bounds the dot-path walk.
const maxClaimPath = 256

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

// StringAt returns the claim at a dot path ("org.tenant_id") as a string.
// A key that itself contains dots ("https://example.com/tenant") is matched
// whole before the path is split. ok is false when the claim is absent,
// null, empty, or neither a string nor a number.
func (c Claims) StringAt(path string) (string, bool) {
	v, ok := c.At(path)
	if !ok {
		return "", false
	}
	switch s := v.(type) {
	case string:
		return s, s != ""
	case json.Number:
		return s.String(), true
	}
	return "", false
}

// ListAt returns the claim at a dot path as a list of strings: a JSON list
// of strings, or a comma-separated string. Entries are trimmed and empty
// ones dropped. A present but empty list is an empty, non-nil slice with ok
// true, distinct from an absent claim (nil, false). A list holding anything
// but strings is refused (nil, false) rather than partly read.
func (c Claims) ListAt(path string) ([]string, bool) {
	v, ok := c.At(path)
	if !ok {
		return nil, false
	}
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

// At returns the raw claim at a dot path. ok is false when it is absent or
// null.
func (c Claims) At(path string) (any, bool) {
	if path == "" || len(path) > maxClaimPath {
		return nil, false
	}
	v, ok := walk(map[string]any(c), path)
	return v, ok && v != nil
}

func walk(m map[string]any, path string) (any, bool) {
	if v, ok := m[path]; ok {
		return v, true
	}
	for i := 0; i < len(path); i++ {
		if path[i] != '.' {
			continue
		}
		sub, ok := m[path[:i]].(map[string]any)
		if !ok {
			continue
		}
		if v, ok := walk(sub, path[i+1:]); ok {
			return v, true
		}
	}
	return nil, false
}
