package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxClaimPath bounds a claim path, in bytes. Paths come from configuration
// (a tenant claim, a policy's matcher, a subject template), never from a
// caller, and no real claim name comes near it.
const MaxClaimPath = 256

// CheckClaimPath reports why path cannot name a claim: it is empty, longer
// than MaxClaimPath, or has an empty segment (a leading, trailing or double
// dot). LookupClaim finds nothing at such a path; configuration that holds
// one should be refused where it is read.
func CheckClaimPath(path string) error {
	switch {
	case path == "":
		return errors.New("claim path is required")
	case len(path) > MaxClaimPath:
		return fmt.Errorf("claim path of %d bytes: want at most %d", len(path), MaxClaimPath)
	case path[0] == '.' || path[len(path)-1] == '.' || strings.Contains(path, ".."):
		return fmt.Errorf("claim path %.80q has an empty segment", path)
	}
	return nil
}

// LookupClaim returns the claim that path names in claims, and whether
// there is one. It is the one rule by which agentauth reads a claim: the
// tenant of a caller, an access policy's matcher and a subject template all
// call it, so they can never disagree about which claim a path means.
//
// A path is claim names joined by dots. Since a claim name may itself hold
// dots ("https://example.com/tenant", or "a.b" inside an object), a path
// can be split into names in several ways; the first split whose names all
// exist, one object inside the other, names the claim. Splits are tried in
// this order, at the top level and again inside each object reached:
//
//  1. the whole remaining path as one name (so a name that exists exactly
//     is never shadowed by a nesting that happens to spell the same path);
//  2. then the longest name before a dot first, down to the shortest,
//     going on to the next when the rest cannot be found inside the first.
//
// So with {"org": {"a.b": "t1"}}, "org.a.b" is "t1"; with both
// {"a.b": {"c": 1}} and {"a": {"b": {"c": 2}}}, "a.b.c" is 1 (the longer
// name wins). Lists are never indexed into. A path that CheckClaimPath
// refuses names nothing.
//
// A claim whose value is JSON null is present: LookupClaim returns (nil,
// true), and the search stops there. Null has no string form (ClaimString),
// so no policy operator matches it, no template expands it and it names no
// tenant; a caller that asks "is there a claim at all" sees that one is.
func LookupClaim(claims map[string]any, path string) (any, bool) {
	if CheckClaimPath(path) != nil || claims == nil {
		return nil, false
	}
	return lookupIn(claims, path)
}

// lookupIn searches obj for path. Each object of the claims is entered with
// one remaining path only (the one its own name leaves), so the search is
// linear in the size of the claims, whatever their names.
func lookupIn(obj any, path string) (any, bool) {
	if v, ok := member(obj, path); ok {
		return v, true
	}
	for i := strings.LastIndexByte(path, '.'); i > 0; i = strings.LastIndexByte(path[:i], '.') {
		child, ok := member(obj, path[:i])
		if !ok {
			continue
		}
		if v, ok := lookupIn(child, path[i+1:]); ok {
			return v, true
		}
	}
	return nil, false
}

// member is obj[name] when obj is an object (decoded JSON, or a map built
// by a test or a caller).
func member(obj any, name string) (any, bool) {
	switch m := obj.(type) {
	case map[string]any:
		v, ok := m[name]
		return v, ok
	case map[string]string:
		v, ok := m[name]
		return v, ok
	}
	return nil, false
}

// ClaimString is the one string form of a claim value, the one policies
// compare, templates write and tenants are named by: a string as it is
// (empty included), a boolean "true" or "false", a finite number in
// decimal without exponent ("1e3" → "1000", 2.50 → "2.5", -0 → "0"; an
// integer json.Number keeps its exact digits, however large). Null,
// objects, lists, NaN and infinities have none (ok false).
func ClaimString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case float64:
		return formatFloat(x, 64)
	case float32:
		return formatFloat(float64(x), 32)
	case json.Number:
		if isInteger(string(x)) {
			if strings.TrimLeft(string(x), "-0") == "" {
				return "0", true // and not "-0"
			}
			return string(x), true
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return "", false
		}
		return formatFloat(f, 64)
	case int:
		return strconv.Itoa(x), true
	case int8:
		return strconv.FormatInt(int64(x), 10), true
	case int16:
		return strconv.FormatInt(int64(x), 10), true
	case int32:
		return strconv.FormatInt(int64(x), 10), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint:
		return strconv.FormatUint(uint64(x), 10), true
	case uint8:
		return strconv.FormatUint(uint64(x), 10), true
	case uint16:
		return strconv.FormatUint(uint64(x), 10), true
	case uint32:
		return strconv.FormatUint(uint64(x), 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	}
	return "", false
}

func formatFloat(f float64, bits int) (string, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	if f == 0 {
		return "0", true // and not "-0"
	}
	return strconv.FormatFloat(f, 'f', -1, bits), true
}

// isInteger reports whether s is an optional minus and decimal digits.
func isInteger(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// ClaimText is the claim at path in its string form (ClaimString): ok is
// false when the claim is absent, null, an empty string, or has no string
// form (an object or a list). The tenant, the agent id and the OAuth
// subjects of a principal are read by it.
func ClaimText(claims map[string]any, path string) (string, bool) {
	v, _ := LookupClaim(claims, path)
	s, ok := ClaimString(v)
	return s, ok && s != ""
}

// ClaimList is the claim at path as a list of strings: a JSON list of
// strings, or a comma-separated string. Entries are trimmed and empty ones
// dropped. A present but empty list is an empty, non-nil slice with ok
// true, distinct from an absent claim (nil, false). A list holding
// anything but strings is refused (nil, false) rather than partly read.
func ClaimList(claims map[string]any, path string) ([]string, bool) {
	v, _ := LookupClaim(claims, path)
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

// ClaimScopes are the scopes the claims grant: scope (space-separated),
// or, when scope is absent, scp (a list, or a space-separated string).
// Empty entries and duplicates are dropped.
func ClaimScopes(claims map[string]any) []string {
	var raw []string
	if s, ok := claims["scope"].(string); ok {
		raw = strings.Fields(s)
	} else {
		switch scp := claims["scp"].(type) {
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
