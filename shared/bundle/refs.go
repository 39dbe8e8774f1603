package bundle

import (
	"fmt"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// parseRef reads s as a reference to a resource of kind: "<name>" or
// "<kind>/<name>". The message says what is wrong ("" when nothing is).
// Whether the resource exists is checked once every file is read
// (notInBundle).
func parseRef(s, kind string) (domain.ObjectRef, string) {
	ref, err := domain.ParseObjectRef(s, kind)
	switch {
	case err != nil:
		return domain.ObjectRef{}, fmt.Sprintf("%q: want %s %s name or %s/<name>", s, article(kind), kind, kind)
	case ref.Kind != kind:
		return domain.ObjectRef{}, fmt.Sprintf("%q: must name %s %s, not %s %s", s, article(kind), kind, article(ref.Kind), ref.Kind)
	}
	return ref, ""
}

// article is the indefinite article of a kind's name.
func article(kind string) string {
	if kind != "" && strings.ContainsRune("AEIOU", rune(kind[0])) {
		return "an"
	}
	return "a"
}

// ref reads the reference to a resource of kind at key; its scalar's OK
// is false when it is missing or malformed (reported).
func (m *mapping) ref(key, kind string, required bool) (domain.ObjectRef, scalar) {
	var s scalar
	if required {
		s = m.requireStr(key, "")
	} else {
		s = m.str(key)
	}
	if !s.OK {
		return domain.ObjectRef{}, s
	}
	ref, msg := parseRef(s.Value, kind)
	if msg != "" {
		m.r.errorf(s.Line, m.field(key), "%s", msg)
		s.OK = false
	}
	return ref, s
}

// refItem is one reference of a list, where it was.
type refItem struct {
	Ref domain.ObjectRef
	listItem
}

// refItems reads an optional list of references to resources of kind,
// each named once however it is spelt ("a" and "Kind/a" are the same).
// Items that fail are reported and left out.
func (m *mapping) refItems(key, kind string) (out []refItem, line int) {
	items, line := m.stringItems(key, func(s string) string {
		_, msg := parseRef(s, kind)
		return msg
	})
	p := m.field(key)
	first := map[string]int{}
	for _, it := range items {
		ref, _ := parseRef(it.Value, kind)
		if j, dup := first[ref.Name]; dup {
			m.r.errorf(it.Line, indexPath(p, it.Index), "duplicate %s (also %s)", ref, indexPath(p, j))
			continue
		}
		first[ref.Name] = it.Index
		out = append(out, refItem{Ref: ref, listItem: it})
	}
	return out, line
}

// notInBundle is the message for a reference to a resource the bundle
// does not have: it lists the ones it has.
func notInBundle[V any](ref domain.ObjectRef, have map[string]V) string {
	names := strings.Join(sortedKeys(have), ", ")
	if names == "" {
		names = "none"
	}
	return fmt.Sprintf("%s is not in the bundle; %ss: %s", ref, ref.Kind, names)
}
