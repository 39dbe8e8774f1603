package bundle

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// Template builds a subject string from claims: literal text with
// "{path}" placeholders, e.g. "slack:user:{https://slack.com/team_id}:{sub}".
// A placeholder is a claim path ("{sub}", "{user.id}"), read by
// domain.LookupClaim and written in its domain.ClaimString form: the rule
// tenant lookups and access policies use. There is no escape for literal
// braces.
type Template struct {
	src   string
	parts []templatePart
}

type templatePart struct {
	text        string // literal text, or the placeholder's path
	placeholder bool
}

var placeholderPath = regexp.MustCompile(`^[A-Za-z0-9_.:/-]+$`)

// ParseTemplate checks s and returns its template. Errors give the byte
// offset of the problem.
func ParseTemplate(s string) (*Template, error) {
	t := &Template{src: s}
	rest, off := s, 0
	for rest != "" {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.parts = append(t.parts, templatePart{text: rest})
			break
		}
		if rest[open] == '}' {
			return nil, fmt.Errorf("template: unbalanced \"}\" at offset %d", off+open)
		}
		if open > 0 {
			t.parts = append(t.parts, templatePart{text: rest[:open]})
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] == '{' {
			return nil, fmt.Errorf("template: unclosed \"{\" at offset %d", off+open)
		}
		path := rest[open+1 : open+1+end]
		if path == "" {
			return nil, fmt.Errorf("template: empty placeholder at offset %d", off+open)
		}
		if !placeholderPath.MatchString(path) {
			return nil, fmt.Errorf("template: placeholder at offset %d: want claim path characters A-Z a-z 0-9 _ . : / -", off+open)
		}
		if err := domain.CheckClaimPath(path); err != nil {
			return nil, fmt.Errorf("template: placeholder at offset %d: %w", off+open, err)
		}
		t.parts = append(t.parts, templatePart{text: path, placeholder: true})
		consumed := open + 1 + end + 1
		rest, off = rest[consumed:], off+consumed
	}
	return t, nil
}

// String returns the template source.
func (t *Template) String() string { return t.src }

// Placeholders returns the claim paths the template uses, in order.
func (t *Template) Placeholders() []string {
	var out []string
	for _, p := range t.parts {
		if p.placeholder {
			out = append(out, p.text)
		}
	}
	return out
}

// Expand fills the placeholders from claims (as decoded from JSON:
// map[string]any, with float64 or json.Number numbers). A claim that is
// missing, null, empty, or not a string, number or boolean is an error,
// so that a subject is never built from a partial identity. Errors name
// the claim, never its value.
func (t *Template) Expand(claims map[string]any) (string, error) {
	var b strings.Builder
	for _, p := range t.parts {
		if !p.placeholder {
			b.WriteString(p.text)
			continue
		}
		v, ok := domain.LookupClaim(claims, p.text)
		if !ok || v == nil {
			return "", fmt.Errorf("template: claim %q is missing", p.text)
		}
		s, err := claimString(v)
		if err != nil {
			return "", fmt.Errorf("template: claim %q: %w", p.text, err)
		}
		if s == "" {
			return "", fmt.Errorf("template: claim %q is empty", p.text)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// claimString is the claim's string form, the one access policies compare
// (domain.ClaimString), so a subject template and a claim matcher never
// read the same claim differently.
func claimString(v any) (string, error) {
	if s, ok := domain.ClaimString(v); ok {
		return s, nil
	}
	switch v.(type) {
	case float64, float32, json.Number:
		return "", fmt.Errorf("not a finite number")
	}
	return "", fmt.Errorf("want a string, number or boolean, got %s", claimType(v))
}

func claimType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
