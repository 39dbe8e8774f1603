package bundle

import (
	"math"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// optBool reads an optional boolean that defaults to def when absent or
// null.
func (m *mapping) optBool(key string, def bool) bool {
	if n, _ := m.get(key); n == nil {
		return def
	}
	v, _ := m.boolean(key)
	return v
}

// integer reads an optional integer. ok is false when a value is there but
// is not an integer (reported).
func (m *mapping) integer(key string) (v int, line int, present, ok bool) {
	n, line := m.get(key)
	if n == nil {
		return 0, line, false, true
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		m.r.errorf(n.Line, m.field(key), "must be an integer, got %s", describeNumber(n))
		return 0, n.Line, true, false
	}
	var i int64
	if err := n.Decode(&i); err != nil || i < math.MinInt32 || i > math.MaxInt32 {
		m.r.errorf(n.Line, m.field(key), "must be an integer between %d and %d", math.MinInt32, math.MaxInt32)
		return 0, n.Line, true, false
	}
	return int(i), n.Line, true, true
}

// intIn reads an optional integer that must lie in [lo, hi]; def when it
// is absent, or invalid (reported).
func (m *mapping) intIn(key string, def, lo, hi int) int {
	v, line, present, ok := m.integer(key)
	if !present || !ok {
		return def
	}
	if v < lo || v > hi {
		m.r.errorf(line, m.field(key), "must be between %d and %d", lo, hi)
		return def
	}
	return v
}

// stringMap reads an optional mapping of non-empty string keys to string
// values (metadata.labels, an ingress rule's properties). Entries that
// fail are reported and left out.
func (m *mapping) stringMap(key string) map[string]string {
	n, _ := m.get(key)
	if n == nil {
		return nil
	}
	path := m.field(key)
	if n.Kind != yaml.MappingNode {
		m.r.errorf(n.Line, path, "must be a mapping of strings, got %s", describe(n))
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode {
			m.r.errorf(n.Content[i].Line, path, "keys must be strings")
			continue
		}
		fp := fieldPath(path, k.Value)
		if _, dup := out[k.Value]; dup {
			m.r.errorf(k.Line, fp, "duplicate key")
			continue
		}
		if k.Value == "" {
			m.r.errorf(k.Line, path, "keys must not be empty")
			continue
		}
		if v == nil || v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
			got := "null"
			if v != nil {
				got = describe(v)
				if v.Kind == yaml.ScalarNode {
					got += " (quote it)"
				}
			}
			m.r.errorf(k.Line, fp, "must be a string, got %s", got)
			continue
		}
		out[k.Value] = v.Value
	}
	return out
}

// numberIn reads an optional number (integer or decimal) that must lie in
// [lo, hi]; nil when it is absent, or invalid (reported).
func (m *mapping) numberIn(key string, lo, hi float64) *float64 {
	n, _ := m.get(key)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		m.r.errorf(n.Line, m.field(key), "must be a number, got %s", describeNumber(n))
		return nil
	}
	var v float64
	// NaN fails both comparisons: written this way it is refused too.
	if err := n.Decode(&v); err != nil || !(v >= lo && v <= hi) {
		m.r.errorf(n.Line, m.field(key), "must be a number between %g and %g", lo, hi)
		return nil
	}
	return &v
}

// describeNumber is describe for a value that should have been a number.
func describeNumber(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		return "a string (write the number without quotes)"
	}
	return describe(n)
}

// optStr reads an optional string that, when given, must not be empty
// (leaveOut completes "must not be empty; leave it out to …") and must
// pass check ("" when nothing is wrong). Its OK is false when it is
// absent, or given and wrong (reported).
func (m *mapping) optStr(key, leaveOut string, check func(string) string) scalar {
	s := m.str(key)
	switch {
	case !s.OK:
	case s.Value == "":
		m.r.errorf(s.Line, m.field(key), "must not be empty; leave it out to %s", leaveOut)
		s.OK = false
	case check(s.Value) != "":
		m.r.errorf(s.Line, m.field(key), "%s", check(s.Value))
		s.OK = false
	}
	return s
}

// listItem is one string of a list, where it was.
type listItem struct {
	Value string
	Line  int
	Index int // in the list as written
}

// stringList reads an optional list of distinct non-empty strings; check,
// when set, returns what is wrong with one item ("" when nothing is).
// Items that fail are reported and left out.
func (m *mapping) stringList(key string, check func(string) string) (out []string, line int) {
	items, line := m.stringItems(key, check)
	for _, it := range items {
		out = append(out, it.Value)
	}
	return out, line
}

// stringItems is stringList keeping where each item was.
func (m *mapping) stringItems(key string, check func(string) string) (out []listItem, line int) {
	items, line, ok := m.list(key)
	if !ok {
		return nil, line
	}
	p := m.field(key)
	first := map[string]int{}
	for i, it := range items {
		ip := indexPath(p, i)
		n := deref(it)
		if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			got := "null"
			if n != nil {
				got = describe(n)
			}
			m.r.errorf(it.Line, ip, "must be a string, got %s", got)
			continue
		}
		if n.Value == "" {
			m.r.errorf(n.Line, ip, "must not be empty")
			continue
		}
		if check != nil {
			if msg := check(n.Value); msg != "" {
				m.r.errorf(n.Line, ip, "%s", msg)
				continue
			}
		}
		if j, dup := first[n.Value]; dup {
			m.r.errorf(n.Line, ip, "duplicate %q (also %s)", n.Value, indexPath(p, j))
			continue
		}
		first[n.Value] = i
		out = append(out, listItem{Value: n.Value, Line: n.Line, Index: i})
	}
	return out, line
}

// listItems reads an optional list of mappings, calling each with the
// item's path and node.
func (m *mapping) listItems(key string, each func(path string, line int, n *yaml.Node)) (line int) {
	items, line, ok := m.list(key)
	if !ok {
		return line
	}
	for i, it := range items {
		each(indexPath(m.field(key), i), it.Line, it)
	}
	return line
}

// noSpaces rejects strings with white space or control characters
// (scopes, tags, ids).
func noSpaces(s string) string {
	if strings.IndexFunc(s, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) >= 0 {
		return strconv.Quote(s) + " must not contain spaces or control characters"
	}
	return ""
}

// noControl rejects strings with control characters (names shown to a
// model or a person).
func noControl(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return "must not contain control characters"
	}
	return ""
}
