package sqsqueue

import (
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

func instance(kind, name, key, agent string) domain.Event {
	return domain.Event{SwarmRef: domain.ObjectRef{Kind: kind, Name: name}, InstanceKey: key, AgentName: agent}
}

func TestGroupID(t *testing.T) {
	long := strings.Repeat("k", 128-len("Swarm/s//a"))
	tests := []struct {
		name   string
		e      domain.Event
		want   string // exact, when set
		hashed bool
		tail   string // expected start of the readable tail of a hashed id
	}{
		{"plain", instance("Swarm", "default", "1700000000.000100", "planner"), "Swarm/default/1700000000.000100/planner", false, ""},
		{"punctuation kept", instance("Swarm", "a-b_c", `T1:C2#"x"@{y}!`, "p.q"), `Swarm/a-b_c/T1:C2#"x"@{y}!/p.q`, false, ""},
		{"empty parts", instance("", "", "", ""), "///", false, ""},
		{"exactly 128", instance("Swarm", "s", long, "a"), "Swarm/s/" + long + "/a", false, ""},
		{"129", instance("Swarm", "s", long+"k", "a"), "", true, "Swarm/s/kkk"},
		{"space", instance("Swarm", "s", "thread 1", "a"), "", true, "Swarm/s/thread_1/a"},
		{"non-ASCII", instance("Swarm", "s", "café", "a"), "", true, "Swarm/s/caf_/a"},
		{"control", instance("Swarm", "s", "x\n\x00", "a"), "", true, "Swarm/s/x__/a"},
		{"slash in instance key", instance("Swarm", "s", "T1/C2", "a"), "", true, "Swarm/s/T1/C2/a"},
		{"leading hash mark", instance("~Swarm", "s", "k", "a"), "", true, "~Swarm/s/k/a"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := GroupID(tc.e)
			assertValidID(t, got)
			if got != GroupID(tc.e) {
				t.Fatal("not stable")
			}
			if !tc.hashed {
				if got != tc.want {
					t.Fatalf("GroupID %q, want %q", got, tc.want)
				}
				return
			}
			if len(got) < 65 || !strings.HasPrefix(got, "~") || strings.Trim(got[1:65], "0123456789abcdef") != "" {
				t.Fatalf("GroupID %q is not a hashed id", got)
			}
			if !strings.HasPrefix(got[65:], "~"+tc.tail) {
				t.Fatalf("GroupID %q: readable tail does not start with %q", got, tc.tail)
			}
		})
	}
}

func TestGroupIDSeparatesInstances(t *testing.T) {
	// Each pair reads alike once joined or sanitized; they are different
	// instances and must not share a group (a stuck message of one would
	// hold up the other).
	pairs := [][2]domain.Event{
		{instance("Swarm", "s", "T1/C2", "a"), instance("Swarm", "s", "T1", "C2/a")},
		{instance("Swarm", "s", "a b", "x"), instance("Swarm", "s", "a_b", "x")},
		{instance("Swarm", "s", "a b", "x"), instance("Swarm", "s", "a\tb", "x")},
		{instance("Swarm", "s", strings.Repeat("k", 200), "x"), instance("Swarm", "s", strings.Repeat("k", 201), "x")},
		{instance("~S", "s", "k", "a"), instance("~S", "s", "k", "b")},
	}
	for _, p := range pairs {
		if a, b := GroupID(p[0]), GroupID(p[1]); a == b {
			t.Fatalf("%+v and %+v share group %q", p[0], p[1], a)
		}
	}
	// A verbatim group never equals a hashed one: a hashed id starts with
	// '~' and a verbatim one never does.
	h := GroupID(instance("Swarm", "s", "a b", "x"))
	if GroupID(instance(h, "", "", "")) == h {
		t.Fatal("a crafted kind reproduces a hashed group")
	}
}

func TestDeduplicationID(t *testing.T) {
	tests := []struct {
		id     string
		want   string // "" means hashed
		reason string
	}{
		{"as-0123456789abcdef0123456789abcdef", "as-0123456789abcdef0123456789abcdef", "session id"},
		{"evt_01HV!#$%&'()*+,-./:;<=>?@[\\]^_`{|}", "evt_01HV!#$%&'()*+,-./:;<=>?@[\\]^_`{|}", "all punctuation"},
		{strings.Repeat("a", 128), strings.Repeat("a", 128), "128"},
		{strings.Repeat("a", 129), "", "129"},
		{"a b", "", "space"},
		{"ünïcode", "", "non-ASCII"},
		{"line\nbreak", "", "control"},
		{"~abc", "", "leading hash mark"},
	}
	for _, tc := range tests {
		t.Run(tc.reason, func(t *testing.T) {
			got := DeduplicationID(tc.id)
			assertValidID(t, got)
			if tc.want != "" {
				if got != tc.want {
					t.Fatalf("%q, want verbatim", got)
				}
				return
			}
			if !strings.HasPrefix(got, "~") || len(got) < 65 {
				t.Fatalf("%q is not hashed", got)
			}
			if got != DeduplicationID(tc.id) {
				t.Fatal("not stable")
			}
		})
	}
	if DeduplicationID("a b") == DeduplicationID("a_b") || DeduplicationID("a b") == DeduplicationID("a\tb") {
		t.Fatal("ids that sanitize alike share a deduplication id")
	}
	if DeduplicationID(strings.Repeat("a", 129)) == DeduplicationID(strings.Repeat("a", 130)) {
		t.Fatal("long ids sharing a prefix share a deduplication id")
	}
	// Group and deduplication hashes are separated.
	e := instance("S", "s", "k k", "a")
	if GroupID(e) == DeduplicationID("S/s/k k/a") {
		t.Fatal("group and dedup hashes collide")
	}
}

func assertValidID(t *testing.T, id string) {
	t.Helper()
	if id == "" || len(id) > MaxIDLength {
		t.Fatalf("id %q: length %d", id, len(id))
	}
	for i := range len(id) {
		if id[i] < '!' || id[i] > '~' {
			t.Fatalf("id %q: byte %#x not allowed", id, id[i])
		}
	}
}

func TestEventType(t *testing.T) {
	tests := []struct {
		name string
		e    domain.Event
		want string
	}{
		{"metadata eventType", domain.Event{Metadata: map[string]string{"eventType": "auth.granted", "type": "x"}, Input: `{"type":"y"}`}, "auth.granted"},
		{"metadata type", domain.Event{Metadata: map[string]string{"type": "tool.completed"}}, "tool.completed"},
		{"input type", domain.Event{Input: ` {"type":"auth.granted","grantId":"g"}`}, "auth.granted"},
		{"plain text input", domain.Event{Input: "hello, agent"}, EventTypeUnknown},
		{"input JSON without type", domain.Event{Input: `{"a":1}`}, EventTypeUnknown},
		{"broken JSON", domain.Event{Input: `{"type":`}, EventTypeUnknown},
		{"space", domain.Event{Metadata: map[string]string{"eventType": "auth granted"}}, EventTypeUnknown},
		{"too long", domain.Event{Metadata: map[string]string{"eventType": strings.Repeat("t", 129)}}, EventTypeUnknown},
		{"nothing", domain.Event{}, EventTypeUnknown},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := EventType(tc.e); got != tc.want {
				t.Fatalf("EventType %q, want %q", got, tc.want)
			}
		})
	}
}

// FuzzIDs: any instance and event id map to valid SQS ids, stably, and
// verbatim exactly when the input already is one.
func FuzzIDs(f *testing.F) {
	f.Add("Swarm", "default", "1700000000.000100", "planner", "as-0123456789abcdef0123456789abcdef")
	f.Add("~", "", "a/b", "é", "~x")
	f.Add("S", "s", strings.Repeat("k", 140), "a", strings.Repeat("e", 128))
	f.Fuzz(func(t *testing.T, kind, name, key, agent, id string) {
		e := instance(kind, name, key, agent)
		g := GroupID(e)
		assertValidID(t, g)
		if g != GroupID(e) {
			t.Fatal("group not stable")
		}
		joined := kind + "/" + name + "/" + key + "/" + agent
		if verbatim := validID(joined) && strings.Count(joined, "/") == 3; verbatim != (g == joined) {
			t.Fatalf("group %q for %q: verbatim %v", g, joined, verbatim)
		}
		if strings.HasPrefix(g, "~") == (g == joined) {
			t.Fatalf("group %q: hashed and verbatim forms overlap", g)
		}
		if id == "" {
			return
		}
		d := DeduplicationID(id)
		assertValidID(t, d)
		if validID(id) != (d == id) || strings.HasPrefix(d, "~") == (d == id) {
			t.Fatalf("dedup %q for %q", d, id)
		}
	})
}
