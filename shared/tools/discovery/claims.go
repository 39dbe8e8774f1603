package discovery

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// Claim matcher operators.
const (
	OpEquals      = "equals"
	OpNotEquals   = "not_equals"
	OpContains    = "contains"
	OpNotContains = "not_contains"
	OpMatches     = "matches"
	OpIn          = "in"
	OpNotIn       = "not_in"
	OpExists      = "exists"
)

// Operators lists every operator, in documentation order.
func Operators() []string {
	return []string{OpEquals, OpNotEquals, OpContains, OpNotContains, OpMatches, OpIn, OpNotIn, OpExists}
}

// Matcher is one claim condition of an AccessPolicy.
//
// Claim is a path into the claims, read by domain.LookupClaim (the one
// rule every reader of claims uses: an exact name first, then dot splits,
// the longer name first; lists are never indexed into), and compared in
// its string form, domain.ClaimString.
//
// A missing or null claim makes every operator false, negated ones
// included; otherwise:
//
//	exists        true (the claim is present and not null)
//	equals        the claim's string form equals Value
//	not_equals    the claim's string form differs from Value
//	contains      list claim: some element's string form equals Value;
//	              otherwise Value is a substring of the string form
//	not_contains  list claim: no element's string form equals Value;
//	              otherwise Value is not a substring of the string form
//	matches       Value is a regular expression (Go RE2 syntax,
//	              case-sensitive) anchored at the start of the string
//	              form; for a list claim, of some element's
//	in            the string form is one of Value's comma-separated
//	              items, each trimmed of spaces
//	not_in        the string form is none of those items
//
// The string form of a string is itself, of a boolean "true" or "false",
// of a number its decimal digits without exponent ("1e3" → "1000", 2.50 →
// "2.5", -0 → "0"). Objects and lists have no string form: an operator
// that needs one fails to evaluate and is false (not_equals, not_contains
// and not_in too), so that a policy never matches by accident.
type Matcher struct {
	Claim    string
	Operator string
	Value    string
}

// ClaimMatcher is a compiled Matcher.
type ClaimMatcher struct {
	m   Matcher
	re  *regexp.Regexp
	set []string // in / not_in items
}

// Compile checks m and compiles it: the operator must be known, the claim
// path must pass domain.CheckClaimPath, a matches regular
// expression must compile, and every operator but exists needs a value
// (equals and not_equals may compare with the empty string; exists takes
// none).
func (m Matcher) Compile() (*ClaimMatcher, error) {
	if err := domain.CheckClaimPath(m.Claim); err != nil {
		return nil, err
	}
	cm := &ClaimMatcher{m: m}
	switch m.Operator {
	case OpExists:
		if m.Value != "" {
			return nil, fmt.Errorf("operator exists takes no value")
		}
	case OpEquals, OpNotEquals:
	case OpContains, OpNotContains:
		if m.Value == "" {
			return nil, fmt.Errorf("operator %s needs a non-empty value", m.Operator)
		}
	case OpMatches:
		if m.Value == "" {
			return nil, fmt.Errorf("operator matches needs a non-empty regular expression")
		}
		re, err := compileAnchored(m.Value, false)
		if err != nil {
			return nil, err
		}
		cm.re = re
	case OpIn, OpNotIn:
		items := splitList(m.Value)
		for i, it := range items {
			if it == "" {
				return nil, fmt.Errorf("operator %s: item %d of the comma-separated value is empty", m.Operator, i+1)
			}
		}
		cm.set = items
	case "":
		return nil, fmt.Errorf("operator is required; one of %s", strings.Join(Operators(), ", "))
	default:
		return nil, fmt.Errorf("unknown operator %q; one of %s", m.Operator, strings.Join(Operators(), ", "))
	}
	return cm, nil
}

// splitList splits an in / not_in value at commas and trims spaces.
func splitList(v string) []string {
	items := strings.Split(v, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return items
}

// Matcher returns the source of the compiled matcher.
func (cm *ClaimMatcher) Matcher() Matcher { return cm.m }

// Match evaluates the matcher against claims. It never panics, whatever
// the claims hold.
func (cm *ClaimMatcher) Match(claims map[string]any) bool {
	v, ok := domain.LookupClaim(claims, cm.m.Claim)
	if !ok || v == nil {
		return false
	}
	if cm.m.Operator == OpExists {
		return true
	}
	if list, isList := asList(v); isList {
		switch cm.m.Operator {
		case OpContains:
			return listHas(list, cm.m.Value)
		case OpNotContains:
			return !listHas(list, cm.m.Value)
		case OpMatches:
			for _, e := range list {
				if s, ok := domain.ClaimString(e); ok && cm.re.MatchString(s) {
					return true
				}
			}
		}
		return false // no string form
	}
	s, ok := domain.ClaimString(v)
	if !ok {
		return false
	}
	switch cm.m.Operator {
	case OpEquals:
		return s == cm.m.Value
	case OpNotEquals:
		return s != cm.m.Value
	case OpContains:
		return strings.Contains(s, cm.m.Value)
	case OpNotContains:
		return !strings.Contains(s, cm.m.Value)
	case OpMatches:
		return cm.re.MatchString(s)
	case OpIn:
		return slices.Contains(cm.set, s)
	case OpNotIn:
		return !slices.Contains(cm.set, s)
	}
	return false
}

func listHas(list []any, want string) bool {
	for _, e := range list {
		if s, ok := domain.ClaimString(e); ok && s == want {
			return true
		}
	}
	return false
}

func asList(v any) ([]any, bool) {
	switch x := v.(type) {
	case []any:
		return x, true
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out, true
	}
	return nil, false
}
