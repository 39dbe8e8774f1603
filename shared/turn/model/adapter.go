package model

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agentauth/agentauth/shared/turn/message"
)

// The rules every adapter applies the same way, each defined once here.

// NamesFor maps the names of a request: its tools, and the tools its
// history calls that are no longer offered (a catalog shrinks between
// steps, and a model may have made a name up). Every tool_use in the
// history then has a wire name, and a name the model sees again maps back
// to what it was.
func NamesFor(req Request) (*Names, error) {
	names := make([]string, 0, len(req.Tools))
	seen := make(map[string]bool, len(req.Tools))
	for _, t := range req.Tools {
		names = append(names, t.Name)
		seen[t.Name] = true
	}
	var extra []string
	for _, m := range req.Messages {
		for _, p := range m.Content {
			if p.Type == message.ToolUse && !seen[p.Name] {
				seen[p.Name] = true
				extra = append(extra, p.Name)
			}
		}
	}
	// Sorted, so the mapping depends on the set of names only.
	slices.Sort(extra)
	return NewNames(append(names, extra...))
}

// SettleFinish is the finish reason the engine acts on: an answer that
// calls tools is a tool_use whatever the provider said (Ollama and some
// vLLM versions say "stop" next to tool calls).
func SettleFinish(f FinishReason, m message.Message) FinishReason {
	if (f == FinishStop || f == "") && len(m.ToolUses()) > 0 {
		return FinishToolUse
	}
	if f == "" {
		return FinishOther
	}
	return f
}

// RetryAfter reads a provider's retry hint: retry-after-ms (OpenAI), else
// Retry-After in seconds or as an HTTP date. 0: no usable hint.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
