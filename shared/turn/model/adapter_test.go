package model

import (
	"net/http"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn/message"
)

func TestNamesForCoversTheHistory(t *testing.T) {
	req := Request{
		Tools: []ToolSpec{{Name: "acme/orders.lookup"}, {Name: "whoami"}},
		Messages: []message.Message{
			{ID: "m1", Role: message.Assistant, Content: []message.Part{
				{Type: message.ToolUse, CallID: "c1", Name: "acme/refunds.create"}, // left the catalog since
				{Type: message.ToolUse, CallID: "c2", Name: "made_up"},
				{Type: message.ToolUse, CallID: "c3", Name: "whoami"},
			}},
		},
	}
	n, err := NamesFor(req)
	if err != nil {
		t.Fatal(err)
	}
	catalogOnly, _ := NewNames([]string{"acme/orders.lookup", "whoami"})
	for _, tc := range []struct{ name, wire string }{
		{"acme/orders.lookup", catalogOnly.Wire("acme/orders.lookup")}, // the history does not move a catalog name
		{"whoami", "whoami"},
		{"made_up", "made_up"},
		{"acme/refunds.create", n.Wire("acme/refunds.create")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := n.Wire(tc.name)
			if got == "" || got != tc.wire || !wireName.MatchString(got) {
				t.Fatalf("wire %q, want %q", got, tc.wire)
			}
			if back, ok := n.Tool(got); !ok || back != tc.name {
				t.Fatalf("%q maps back to %q", got, back)
			}
		})
	}
}

func TestSettleFinish(t *testing.T) {
	calls := message.Message{Content: []message.Part{{Type: message.ToolUse, CallID: "c", Name: "t"}}}
	text := message.Message{Content: []message.Part{{Type: message.Text, Text: "hi"}}}
	for _, tc := range []struct {
		name string
		f    FinishReason
		m    message.Message
		want FinishReason
	}{
		{"stop with tool calls is tool_use", FinishStop, calls, FinishToolUse},
		{"no reason with tool calls is tool_use", "", calls, FinishToolUse},
		{"stop with text stays", FinishStop, text, FinishStop},
		{"length with tool calls stays length", FinishLength, calls, FinishLength},
		{"no reason without tool calls is other", "", text, FinishOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SettleFinish(tc.f, tc.m); got != tc.want {
				t.Fatalf("%s", got)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		h    map[string]string
		want time.Duration
	}{
		{"none", nil, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 7 * time.Second},
		{"fractional seconds", map[string]string{"Retry-After": "1.5"}, 1500 * time.Millisecond},
		{"milliseconds win", map[string]string{"Retry-After-Ms": "250", "Retry-After": "7"}, 250 * time.Millisecond},
		{"HTTP date", map[string]string{"Retry-After": now.Add(20 * time.Second).Format(http.TimeFormat)}, 20 * time.Second},
		{"date in the past", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.h {
				h.Set(k, v)
			}
			if got := RetryAfter(h, now); got != tc.want {
				t.Fatalf("%s, want %s", got, tc.want)
			}
		})
	}
}
