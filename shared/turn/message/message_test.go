package message

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func txt(id string, role Role, s string) Message {
	return Message{ID: id, Role: role, Content: []Part{{Type: Text, Text: s}}}
}

func ev(seq int64, t EventType, m *Message, target string) Event {
	return Event{Seq: seq, Type: t, Message: m, TargetID: target}
}

func ptr(m Message) *Message { return &m }

// ids renders a conversation as "id:role:text,…" for compact expectations.
func ids(msgs []Message) string {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = fmt.Sprintf("%s:%s:%s", m.ID, m.Role, m.TextOf())
	}
	return strings.Join(parts, ",")
}

func codes(ws []Warning) string {
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = fmt.Sprintf("%d:%s", w.Seq, w.Code)
	}
	return strings.Join(parts, ",")
}

func TestFold(t *testing.T) {
	base := []Message{txt("s", System, "be brief"), txt("u1", User, "hi"), txt("a1", Assistant, "hello")}
	for _, tc := range []struct {
		name   string
		base   []Message
		events []Event
		want   string
		warns  string
	}{
		{name: "no events", base: base, want: "s:system:be brief,u1:user:hi,a1:assistant:hello"},
		{name: "llm_message appends", base: base, events: []Event{ev(1, LLMMessage, ptr(txt("u2", User, "more")), "")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello,u2:user:more"},
		{name: "system_message replaces the slot", base: base, events: []Event{ev(1, SystemMessage, ptr(txt("s2", System, "be verbose")), "")},
			want: "s2:system:be verbose,u1:user:hi,a1:assistant:hello"},
		{name: "system_message adds the slot first", base: base[1:], events: []Event{ev(1, SystemMessage, ptr(txt("s", System, "x")), "")},
			want: "s:system:x,u1:user:hi,a1:assistant:hello"},
		{name: "last system_message wins", base: base, events: []Event{
			ev(1, SystemMessage, ptr(txt("s2", System, "two")), ""), ev(2, SystemMessage, ptr(txt("s3", System, "three")), "")},
			want: "s3:system:three,u1:user:hi,a1:assistant:hello"},
		{name: "system in the middle of the base goes first", base: []Message{txt("u1", User, "hi"), txt("s", System, "sys")},
			want: "s:system:sys,u1:user:hi"},
		{name: "replace keeps the position", base: base, events: []Event{ev(1, Replace, ptr(txt("u1b", User, "hey")), "u1")},
			want: "s:system:be brief,u1b:user:hey,a1:assistant:hello"},
		{name: "replace then the new id is addressable", base: base, events: []Event{
			ev(1, Replace, ptr(txt("u1b", User, "hey")), "u1"), ev(2, Remove, nil, "u1b")},
			want: "s:system:be brief,a1:assistant:hello"},
		{name: "replace of an old id after replace warns", base: base, events: []Event{
			ev(1, Replace, ptr(txt("u1b", User, "hey")), "u1"), ev(2, Remove, nil, "u1")},
			want: "s:system:be brief,u1b:user:hey,a1:assistant:hello", warns: "2:unknownMessageId"},
		{name: "replace the system message", base: base, events: []Event{ev(1, Replace, ptr(txt("s", System, "new")), "s")},
			want: "s:system:new,u1:user:hi,a1:assistant:hello"},
		{name: "replace the system with a user message warns", base: base, events: []Event{ev(1, Replace, ptr(txt("x", User, "x")), "s")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:systemRoleMismatch"},
		{name: "replace a user message with a system one warns", base: base, events: []Event{ev(1, Replace, ptr(txt("x", System, "x")), "u1")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:systemRoleMismatch"},
		{name: "replace with an id already present warns", base: base, events: []Event{ev(1, Replace, ptr(txt("a1", User, "x")), "u1")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:duplicateMessageId"},
		{name: "replace unknown id warns", base: base, events: []Event{ev(7, Replace, ptr(txt("z", User, "z")), "nope")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "7:unknownMessageId"},
		{name: "remove", base: base, events: []Event{ev(1, Remove, nil, "a1")},
			want: "s:system:be brief,u1:user:hi"},
		{name: "remove unknown id warns", base: base, events: []Event{ev(3, Remove, nil, "nope")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "3:unknownMessageId"},
		{name: "remove twice warns once", base: base, events: []Event{ev(1, Remove, nil, "a1"), ev(2, Remove, nil, "a1")},
			want: "s:system:be brief,u1:user:hi", warns: "2:unknownMessageId"},
		{name: "remove the system message", base: base, events: []Event{ev(1, Remove, nil, "s")},
			want: "u1:user:hi,a1:assistant:hello"},
		{name: "truncate keeps system", base: base, events: []Event{ev(1, Truncate, nil, "")},
			want: "s:system:be brief"},
		{name: "truncate then append", base: base, events: []Event{ev(1, Truncate, nil, ""), ev(2, LLMMessage, ptr(txt("u2", User, "again")), "")},
			want: "s:system:be brief,u2:user:again"},
		{name: "a truncated id may be used again", base: base, events: []Event{ev(1, Truncate, nil, ""), ev(2, LLMMessage, ptr(txt("u1", User, "again")), "")},
			want: "s:system:be brief,u1:user:again"},
		{name: "truncate without system", base: base[1:], events: []Event{ev(1, Truncate, nil, "")}, want: ""},
		{name: "duplicate llm_message id warns", base: base, events: []Event{ev(1, LLMMessage, ptr(txt("u1", User, "dup")), "")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:duplicateMessageId"},
		{name: "llm_message with role system warns", base: base, events: []Event{ev(1, LLMMessage, ptr(txt("x", System, "x")), "")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:systemRoleMismatch"},
		{name: "system_message with another role warns", base: base, events: []Event{ev(1, SystemMessage, ptr(txt("x", User, "x")), "")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:systemRoleMismatch"},
		{name: "system_message taking a user message's id warns", base: base, events: []Event{ev(1, SystemMessage, ptr(txt("u1", System, "x")), "")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:duplicateMessageId"},
		{name: "event without message warns", base: base, events: []Event{ev(1, LLMMessage, nil, "")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:malformedEvent"},
		{name: "message without id warns", base: base, events: []Event{ev(1, LLMMessage, ptr(txt("", User, "x")), "")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:malformedEvent"},
		{name: "tool_use without call id warns", base: base, events: []Event{ev(1, LLMMessage, &Message{ID: "a2", Role: Assistant, Content: []Part{{Type: ToolUse, Name: "x"}}}, "")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:malformedEvent"},
		{name: "unknown event type warns", base: base, events: []Event{ev(1, "squash", nil, "")},
			want: "s:system:be brief,u1:user:hi,a1:assistant:hello", warns: "1:unknownEventType"},
		{name: "empty", want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := json.Marshal(tc.base)
			got, warns := Fold(tc.base, tc.events)
			if s := ids(got); s != tc.want {
				t.Errorf("fold = %s\nwant   %s", s, tc.want)
			}
			if s := codes(warns); s != tc.warns {
				t.Errorf("warnings = %s, want %s", s, tc.warns)
			}
			after, _ := json.Marshal(tc.base)
			if string(before) != string(after) {
				t.Error("Fold modified the base")
			}
			again, _ := Fold(tc.base, tc.events)
			if !reflect.DeepEqual(got, again) {
				t.Error("Fold is not deterministic")
			}
		})
	}
}

// TestFoldOfFoldIsFold: folding events into a base, then folding nothing
// onto the result, is the same — the turn end's new base is stable.
func TestFoldOfFoldIsFold(t *testing.T) {
	base := []Message{txt("s", System, "sys"), txt("u1", User, "a")}
	events := []Event{ev(1, LLMMessage, ptr(txt("a1", Assistant, "b")), ""), ev(2, Replace, ptr(txt("u1", User, "A")), "u1"), ev(3, LLMMessage, ptr(txt("u2", User, "c")), "")}
	once, _ := Fold(base, events)
	twice, _ := Fold(once, nil)
	if !reflect.DeepEqual(once, twice) {
		t.Fatalf("%s != %s", ids(once), ids(twice))
	}
	// Folding in two halves (a crash between steps: the first half became
	// the base) gives the same as folding all at once.
	half, _ := Fold(base, events[:1])
	rest, _ := Fold(half, events[1:])
	if !reflect.DeepEqual(once, rest) {
		t.Fatalf("split fold %s != %s", ids(rest), ids(once))
	}
}

func use(id, call string) Message {
	return Message{ID: id, Role: Assistant, Content: []Part{{Type: ToolUse, CallID: call, Name: "t", Input: json.RawMessage(`{}`)}}}
}

func result(id, call string) Message {
	return Message{ID: id, Role: Tool, Content: []Part{{Type: ToolResult, CallID: call, Output: json.RawMessage(`{"status":"ok"}`)}}}
}

func TestCheckToolPairs(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []Message
		want string
	}{
		{"paired", []Message{use("a", "c1"), result("r", "c1")}, ""},
		{"dangling", []Message{use("a", "c1")}, "-1:toolUseWithoutResult"},
		{"orphan", []Message{result("r", "c1")}, "-1:toolResultWithoutUse"},
		{"result before use", []Message{result("r", "c1"), use("a", "c1")}, "-1:toolResultWithoutUse,-1:toolUseWithoutResult"},
		{"two calls, one answered", []Message{{ID: "a", Role: Assistant, Content: []Part{
			{Type: ToolUse, CallID: "c1", Name: "t"}, {Type: ToolUse, CallID: "c2", Name: "t"}}}, result("r", "c2")}, "-1:toolUseWithoutResult"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := codes(CheckToolPairs(tc.msgs)); got != tc.want {
				t.Fatalf("%s, want %s", got, tc.want)
			}
		})
	}
}

// BenchmarkFold: 1,000 messages of base and 100 events (the issue's
// figure).
func BenchmarkFold(b *testing.B) {
	base := make([]Message, 0, 1001)
	base = append(base, txt("s", System, "system prompt"))
	for i := range 1000 {
		role := User
		if i%2 == 1 {
			role = Assistant
		}
		base = append(base, txt(fmt.Sprintf("m%d", i), role, strings.Repeat("x", 200)))
	}
	events := make([]Event, 0, 100)
	for i := range 100 {
		switch i % 4 {
		case 0, 1:
			events = append(events, ev(int64(i), LLMMessage, ptr(txt(fmt.Sprintf("n%d", i), User, "new")), ""))
		case 2:
			events = append(events, ev(int64(i), Replace, ptr(txt(fmt.Sprintf("r%d", i), Assistant, "edited")), fmt.Sprintf("m%d", i)))
		case 3:
			events = append(events, ev(int64(i), Remove, nil, fmt.Sprintf("m%d", i)))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		out, ws := Fold(base, events)
		if len(out) != 1001+50-25 || len(ws) != 0 {
			b.Fatalf("%d messages, %v", len(out), ws)
		}
	}
}

// TestToolsAsText: calls of tools not offered, and their results, become
// text where they were — the results after the run of tool messages they
// were in — and the offered ones stay calls; the input is not modified.
func TestToolsAsText(t *testing.T) {
	use := func(id, name string) Part {
		return Part{Type: ToolUse, CallID: id, Name: name, Input: json.RawMessage(`{ "a": 1 }`)}
	}
	res := func(id string, isErr bool) Part {
		return Part{Type: ToolResult, CallID: id, Output: json.RawMessage(`{"status":"ok"}`), IsError: isErr}
	}
	msgs := []Message{
		{ID: "u", Role: User, Content: []Part{{Type: Text, Text: "go"}}},
		{ID: "a", Role: Assistant, Content: []Part{{Type: Text, Text: "calling"}, use("c1", "ghost"), use("c2", "echo")}},
		{ID: "r1", Role: Tool, Content: []Part{res("c1", true)}},
		{ID: "r2", Role: Tool, Content: []Part{res("c2", false)}},
		{ID: "a2", Role: Assistant, Content: []Part{{Type: Text, Text: "done"}}},
	}
	before := fmt.Sprint(msgs)
	got := ToolsAsText(msgs, func(name string) bool { return name == "echo" })
	if fmt.Sprint(msgs) != before {
		t.Fatal("the input was modified")
	}
	var shape []string
	for _, m := range got {
		for _, p := range m.Content {
			s := string(m.Role) + ":" + string(p.Type)
			if p.Type == Text {
				s += ":" + p.Text
			} else {
				s += ":" + p.CallID
			}
			shape = append(shape, s)
		}
	}
	want := []string{
		"user:text:go",
		"assistant:text:calling",
		`assistant:text:[called tool "ghost" (call c1) with arguments {"a":1}]`,
		"assistant:tool_use:c2",
		"tool:tool_result:c2",
		`user:text:[error result of call c1 (tool "ghost"): {"status":"ok"}]`,
		"assistant:text:done",
	}
	if strings.Join(shape, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(shape, "\n"), strings.Join(want, "\n"))
	}
	if bad := CheckToolPairs(got); len(bad) != 0 {
		t.Fatalf("pairs %+v", bad)
	}
	// The text reads back as the result it was.
	tool, p, ok := TextResult(got[len(got)-2].Content[0].Text)
	if !ok || tool != "ghost" || p.CallID != "c1" || !p.IsError || string(p.Output) != `{"status":"ok"}` {
		t.Fatalf("TextResult: %q %+v %v", tool, p, ok)
	}
	if _, _, ok := TextResult("[result of call c1 (tool \"x\"): not json]"); ok {
		t.Fatal("TextResult read a result that is not JSON")
	}
	if _, _, ok := TextResult("what is the result of call c1?"); ok {
		t.Fatal("TextResult read a user's sentence")
	}
	// Nothing offered: no tool blocks at all. Everything offered: msgs as they are.
	for _, m := range ToolsAsText(msgs, func(string) bool { return false }) {
		for _, p := range m.Content {
			if p.Type != Text {
				t.Fatalf("a %s part is left with no tool offered", p.Type)
			}
		}
	}
	if all := ToolsAsText(msgs, func(string) bool { return true }); fmt.Sprint(all) != before {
		t.Fatal("with every tool offered the history changed")
	}
}
