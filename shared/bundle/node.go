package bundle

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/agentauth/agentauth/shared/domain"
)

// res is the document being decoded. It stamps every problem with the
// file, the resource label and (through mapping) the field path.
type res struct {
	l     *loader
	file  string
	line  int    // line of the document's root mapping
	label string // "OAuthApp/demo-user", "OAuthApp" or ""
}

func (r *res) errorf(line int, field, format string, args ...any) {
	r.l.problems = append(r.l.problems, r.problem(line, field, format, args...))
}

func (r *res) warnf(line int, field, format string, args ...any) {
	r.l.warnings = append(r.l.warnings, r.problem(line, field, format, args...))
}

func (r *res) problem(line int, field, format string, args ...any) Problem {
	return Problem{
		File:     r.file,
		Line:     line,
		Resource: r.label,
		Field:    field,
		Message:  oneLine(fmt.Sprintf(format, args...)),
	}
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// fieldPath appends key to path, quoting keys that would make the path
// ambiguous or span lines.
func fieldPath(path, key string) string {
	if !plainKey.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 32 {
			return nil
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names a node's YAML type for "must be a string, got …" errors,
// never its value (which may be a secret).
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		}
		return "a " + n.ShortTag() + " value"
	}
	return "something else"
}

type entry struct {
	keyLine int
	val     *yaml.Node // dereferenced; nil when null
}

// mapping is a YAML mapping decoded against a fixed set of field names.
type mapping struct {
	r       *res
	path    string
	line    int  // where to point when a field is missing
	present bool // the mapping is in the document
	bad     bool // present but not a mapping: don't pile "required" errors under it
	fields  map[string]entry
}

// mapping checks that n (the value at path, whose key is on line) is a
// mapping whose keys are all in allowed, reporting unknown and duplicate
// keys. A nil or null n gives an empty mapping that is not present.
func (r *res) mapping(path string, line int, n *yaml.Node, allowed ...string) *mapping {
	m := &mapping{r: r, path: path, line: line, fields: map[string]entry{}}
	n = deref(n)
	if isNull(n) {
		return m
	}
	m.present = true
	if n.Kind != yaml.MappingNode {
		m.bad = true
		r.errorf(n.Line, path, "must be a mapping, got %s", describe(n))
		return m
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode || (k.ShortTag() != "!!str" && k.ShortTag() != "!!int" && k.ShortTag() != "!!bool") {
			r.errorf(n.Content[i].Line, path, "keys must be strings")
			continue
		}
		name := k.Value
		fp := fieldPath(path, name)
		if prev, dup := m.fields[name]; dup {
			r.errorf(k.Line, fp, "duplicate key (first at line %d)", prev.keyLine)
			continue
		}
		if !slices.Contains(allowed, name) {
			if near := domain.Suggest(name, allowed); near != "" {
				r.errorf(k.Line, fp, "unknown field; did you mean %s?", near)
			} else {
				r.errorf(k.Line, fp, "unknown field; known fields: %s", strings.Join(allowed, ", "))
			}
			continue
		}
		v = deref(v)
		if isNull(v) {
			v = nil
		}
		m.fields[name] = entry{keyLine: k.Line, val: v}
	}
	return m
}

// spec reads d's spec, whose fields are the kind's: nil when it is
// missing or not a mapping (reported).
func (r *res) spec(d *document, fields ...string) *mapping {
	spec := r.mapping("spec", d.SpecLine, d.Spec, fields...)
	if !spec.present {
		r.errorf(d.SpecLine, "spec", "required")
		return nil
	}
	if spec.bad {
		return nil
	}
	return spec
}

// keepFirst stores v under name unless the name is taken: a duplicate
// resource is reported (and the bundle refused) by the loader, and its
// other problems by its decoder.
func keepFirst[V any](m map[string]V, name string, v V) {
	if _, taken := m[name]; !taken {
		m[name] = v
	}
}

func (m *mapping) field(key string) string { return fieldPath(m.path, key) }

// get returns the non-null value of key and the line to point at for it.
func (m *mapping) get(key string) (*yaml.Node, int) {
	e, ok := m.fields[key]
	if !ok || e.val == nil {
		if ok {
			return nil, e.keyLine
		}
		return nil, m.line
	}
	return e.val, e.keyLine
}

// child decodes key as a nested mapping. When key is absent the child
// points its missing-field errors at this mapping's line.
func (m *mapping) child(key string, allowed ...string) *mapping {
	n, line := m.get(key)
	c := m.r.mapping(m.field(key), line, n, allowed...)
	c.bad = c.bad || m.bad
	return c
}

// scalar is a string field as read.
type scalar struct {
	Value   string
	Line    int
	Present bool // set to a non-null value
	OK      bool // and that value is a string
}

func (m *mapping) str(key string) scalar {
	n, line := m.get(key)
	if n == nil {
		return scalar{Line: line}
	}
	s := scalar{Line: n.Line, Present: true}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		hint := ""
		if n.Kind == yaml.ScalarNode {
			hint = " (quote it)"
		}
		m.r.errorf(n.Line, m.field(key), "must be a string, got %s%s", describe(n), hint)
		return s
	}
	s.Value, s.OK = n.Value, true
	return s
}

// requireStr reads a string that must be present and non-empty; why
// completes "required" (e.g. " when flow is authorizationCode").
func (m *mapping) requireStr(key, why string) scalar {
	s := m.str(key)
	switch {
	case !s.Present && !m.bad:
		m.r.errorf(s.Line, m.field(key), "required%s", why)
	case s.OK && s.Value == "":
		m.r.errorf(s.Line, m.field(key), "must not be empty")
		s.OK = false
	}
	return s
}

// oneOf reads an optional string that must be one of allowed.
func (m *mapping) oneOf(key string, required bool, allowed ...string) scalar {
	var s scalar
	if required {
		s = m.requireStr(key, "")
	} else {
		s = m.str(key)
	}
	if s.OK && !slices.Contains(allowed, s.Value) {
		m.r.errorf(s.Line, m.field(key), "%q is not allowed; allowed values: %s", s.Value, strings.Join(allowed, ", "))
		s.OK = false
	}
	return s
}

func (m *mapping) boolean(key string) (v bool, line int) {
	n, line := m.get(key)
	if n == nil {
		return false, line
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		m.r.errorf(n.Line, m.field(key), "must be true or false, got %s", describe(n))
		return false, n.Line
	}
	if err := n.Decode(&v); err != nil {
		m.r.errorf(n.Line, m.field(key), "must be true or false")
	}
	return v, n.Line
}

// list reads an optional sequence. ok is false when the value is there
// but is not a list (reported); an absent list is ok and empty.
func (m *mapping) list(key string) (items []*yaml.Node, line int, ok bool) {
	n, line := m.get(key)
	if n == nil {
		return nil, line, true
	}
	if n.Kind != yaml.SequenceNode {
		m.r.errorf(n.Line, m.field(key), "must be a list, got %s", describe(n))
		return nil, n.Line, false
	}
	return n.Content, n.Line, true
}
