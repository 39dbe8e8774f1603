package bundle

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Template builds a subject string from claims: literal text with
// "{path}" placeholders, e.g. "slack:user:{https://slack.com/team_id}:{sub}".
// A placeholder names a top-level claim exactly, or else a dot path into
// nested objects ("{user.id}"). There is no escape for literal braces.
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
		v, ok := lookupClaim(claims, p.text)
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

// lookupClaim finds path as an exact top-level key first (claim names like
// "https://slack.com/team_id" contain dots), then as a dot path.
func lookupClaim(claims map[string]any, path string) (any, bool) {
	if v, ok := claims[path]; ok {
		return v, true
	}
	var cur any = claims
	for _, seg := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func claimString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		if isInteger(string(x)) {
			return string(x), nil
		}
		f, err := x.Float64()
		if err != nil {
			return "", fmt.Errorf("not a valid number")
		}
		return formatFloat(f, 64)
	case float64:
		return formatFloat(x, 64)
	case float32:
		return formatFloat(float64(x), 32)
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int32:
		return strconv.FormatInt(int64(x), 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case uint32:
		return strconv.FormatUint(uint64(x), 10), nil
	case uint:
		return strconv.FormatUint(uint64(x), 10), nil
	}
	return "", fmt.Errorf("want a string, number or boolean, got %s", claimType(v))
}

func formatFloat(f float64, bits int) (string, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", fmt.Errorf("not a finite number")
	}
	return strconv.FormatFloat(f, 'f', -1, bits), nil
}

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

func claimType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}
