package model

import (
	"strings"
	"testing"
)

func TestNamesAreReversibleAndFit(t *testing.T) {
	long := strings.Repeat("x", 80)
	names := []string{"whoami", "get_menu", "acme/orders.lookup", "acme/orders_lookup", "acme_orders_lookup", "swarmBundle.openChangeset",
		"agents.delegate", long, long + "y", "héllo", "a:b", "a_b", "ns/" + strings.Repeat("é", 70)}
	n, err := NewNames(names)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, name := range names {
		w := n.Wire(name)
		if !wireName.MatchString(w) {
			t.Errorf("%q → %q does not fit [a-zA-Z0-9_-]{1,64}", name, w)
		}
		if other, dup := seen[w]; dup {
			t.Errorf("%q and %q both map to %q", name, other, w)
		}
		seen[w] = name
		if back, ok := n.Tool(w); !ok || back != name {
			t.Errorf("%q → %q → %q", name, w, back)
		}
	}
	// A fitting name keeps itself; a mapped one never takes a real one.
	for _, keep := range []string{"whoami", "get_menu", "acme_orders_lookup", "a_b"} {
		if n.Wire(keep) != keep {
			t.Errorf("%q mapped to %q", keep, n.Wire(keep))
		}
	}
	if !strings.HasPrefix(n.Wire("acme/orders.lookup"), "acme_orders_lookup_") {
		t.Errorf("readable prefix lost: %q", n.Wire("acme/orders.lookup"))
	}
	if _, ok := n.Tool("made_up"); ok {
		t.Error("a name the model made up maps to a tool")
	}
	if n.Wire("not-in-catalog") != "" {
		t.Error("a tool outside the catalog has a wire name")
	}
	// The mapping depends only on the names: the same catalog maps the
	// same way in every process and step.
	again, _ := NewNames(append([]string(nil), names...))
	for _, name := range names {
		if again.Wire(name) != n.Wire(name) {
			t.Errorf("%q maps differently on a second build", name)
		}
	}
	if _, err := NewNames([]string{"a", "a"}); err == nil {
		t.Error("duplicate catalog names accepted")
	}
}
