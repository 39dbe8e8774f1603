package scripted

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// answer is a turn made concrete for one request.
type answer struct {
	text   string
	calls  []call
	finish model.FinishReason
	usage  model.Usage
}

type call struct {
	id, name string
	args     json.RawMessage
}

// result is one tool result the request ends with.
type result struct {
	tool   string // the wire name of the tool_use it answers
	output json.RawMessage
}

// ending is what a request ends with: the text of a final user message,
// tool results, or both (a Converse user message may hold both).
type ending struct {
	userText string
	hasUser  bool
	results  []result
	// said is the text of the user's last message anywhere in the
	// conversation: what a turn's tool calls answer.
	said string
}

func endingOf(msgs []message.Message) ending {
	var e ending
	msgs = withoutBlocks(msgs)
	e.said = said(msgs)
	names := map[string]string{}
	for _, m := range msgs {
		for _, p := range m.ToolUses() {
			names[p.CallID] = p.Name
		}
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == message.User && msgs[n-1].TextOf() != "" {
		e.userText, e.hasUser = msgs[n-1].TextOf(), true
	}
	// The results in the run of messages at the end that carry results
	// (OpenAI: tool messages; Converse: one user message), also those the
	// engine wrote as text (calls of tools the request does not offer).
	for i := len(msgs) - 1; i >= 0; i-- {
		n := len(e.results)
		for _, p := range msgs[i].Content {
			if p.Type == message.ToolResult {
				e.results = append(e.results, result{tool: names[p.CallID], output: p.Output})
			}
			if p.Type == message.Text {
				if tool, r, ok := message.TextResult(p.Text); ok {
					e.results = append(e.results, result{tool: tool, output: r.Output})
				}
			}
		}
		if len(e.results) == n {
			break
		}
	}
	if len(e.results) > 0 && e.hasUser {
		// A user message made only of results written as text is not
		// the user speaking.
		spoken := false
		for _, p := range msgs[len(msgs)-1].Content {
			if _, _, ok := message.TextResult(p.Text); p.Type == message.Text && !ok {
				spoken = true
			}
		}
		e.hasUser = spoken
		if !spoken {
			e.userText = ""
		}
	}
	return e
}

// said is the text of the user's last message in msgs: what the user
// said, not tool results written as text nor the engine's context-block
// note.
func said(msgs []message.Message) string {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != message.User {
			continue
		}
		var parts []string
		for _, p := range msgs[i].Content {
			if p.Type != message.Text || strings.HasPrefix(p.Text, message.BlocksNote) {
				continue
			}
			if _, _, ok := message.TextResult(p.Text); ok {
				continue
			}
			parts = append(parts, p.Text)
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

// withoutBlocks drops the engine's context-block note from the end of the
// conversation (its own user message, or text merged into the last user
// message on Converse): the request ends with what came before it.
func withoutBlocks(msgs []message.Message) []message.Message {
	n := len(msgs)
	if n == 0 || msgs[n-1].Role != message.User {
		return msgs
	}
	last := msgs[n-1]
	var kept []message.Part
	for _, p := range last.Content {
		if p.Type == message.Text && strings.HasPrefix(p.Text, message.BlocksNote) {
			continue
		}
		kept = append(kept, p)
	}
	if len(kept) == len(last.Content) {
		return msgs
	}
	out := slices.Clone(msgs[:n-1])
	if len(kept) > 0 {
		last.Content = kept
		out = append(out, last)
	}
	return out
}

// alone is name's wire name in a catalog of its own: what an adapter
// sends for a catalog name that does not fit the wire alphabet.
func alone(name string) string {
	n, err := model.NewNames([]string{name})
	if err != nil {
		return name
	}
	return n.Wire(name)
}

// sameTool: the scripted name (catalog or wire) names the wire tool.
func sameTool(scripted, wire string) bool {
	return scripted == wire || alone(scripted) == wire
}

// pick returns the first turn that answers p, made concrete.
func (s Script) pick(p parsed, body []byte) (int, answer, bool) {
	e := endingOf(p.messages)
	for i, t := range s.Turns {
		var matched *result
		if t.ToolResult != "" {
			for j := range e.results {
				r := &e.results[j]
				if sameTool(t.ToolResult, r.tool) && (t.ResultHas == "" || lookup(r.output, t.ResultHas) != nil) {
					matched = r
					break
				}
			}
			if matched == nil {
				continue
			}
			if t.UserContains != "" && !strings.Contains(e.said, t.UserContains) {
				continue
			}
		} else if !e.hasUser || !strings.Contains(e.userText, t.UserContains) {
			continue
		}
		return i, t.concrete(p, body, matched, e.said), true
	}
	return -1, answer{}, false
}

// placeholder is one of "{{result.KEY}}", "{{user.KEY}}" (either with
// "|DEFAULT") and "{{tools}}".
var placeholder = regexp.MustCompile(`\{\{(?:(result|user)\.([A-Za-z0-9_-]+)(?:\|([^{}]*))?|tools)\}\}`)

// fill replaces the placeholders in s: a value of the matched result r
// (none: ""), a KEY=VALUE word of the user's message, the offered tools'
// names; DEFAULT when the value is empty. quote escapes each value for
// the JSON string s is inside of (a DEFAULT is written there already).
func fill(s string, r *result, user string, offered []string, quote bool) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		sm := placeholder.FindStringSubmatch(m)
		var v string
		switch sm[1] {
		case "result":
			if r != nil {
				v = text(lookup(r.output, sm[2]))
			}
		case "user":
			v = userValue(user, sm[2])
		default:
			v = strings.Join(offered, ", ")
		}
		if v == "" {
			return sm[3]
		}
		if quote {
			q, _ := json.Marshal(v)
			return string(q[1 : len(q)-1])
		}
		return v
	})
}

// userValue is VALUE of the first KEY=VALUE word of the user's message
// (words are separated by white space), "" when it has none.
func userValue(user, key string) string {
	for _, w := range strings.Fields(user) {
		if v, ok := strings.CutPrefix(w, key+"="); ok {
			return v
		}
	}
	return ""
}

func (t Turn) concrete(p parsed, body []byte, r *result, user string) answer {
	offered := make([]string, len(p.tools))
	for i, tool := range p.tools {
		offered[i] = tool.Name
	}
	a := answer{text: fill(t.Text, r, user, offered, false), finish: t.Finish}
	sum := sha256.Sum256(body)
	size := len(a.text)
	for i, c := range t.ToolCalls {
		name := c.Name
		if w := alone(c.Name); !slices.Contains(offered, name) && slices.Contains(offered, w) {
			name = w
		}
		args := c.Args
		if len(bytes.TrimSpace(args)) == 0 {
			args = json.RawMessage(`{}`)
		} else if placeholder.Match(args) {
			// A placeholder inside an argument's JSON string: the value,
			// escaped for that string.
			args = json.RawMessage(fill(string(args), r, user, offered, true))
		}
		a.calls = append(a.calls, call{id: fmt.Sprintf("call_%s_%d", hex.EncodeToString(sum[:6]), i), name: name, args: args})
		size += len(name) + len(args)
	}
	if a.finish == "" {
		a.finish = model.FinishStop
		if len(a.calls) > 0 {
			a.finish = model.FinishToolUse
		}
	}
	if t.Usage != nil {
		a.usage = *t.Usage
	} else {
		a.usage = model.Usage{PromptTokens: int64(len(body)+3) / 4, CompletionTokens: int64(size+3) / 4}
		a.usage.TotalTokens = a.usage.PromptTokens + a.usage.CompletionTokens
	}
	return a
}

// lookup finds key in a JSON value: the shallowest occurrence, then the
// first in key order (objects) or element order (arrays). nil: none.
func lookup(raw json.RawMessage, key string) any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers render as sent
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	level := []any{v}
	for len(level) > 0 {
		var next []any
		for _, x := range level {
			switch x := x.(type) {
			case map[string]any:
				if found, ok := x[key]; ok {
					return found
				}
				keys := make([]string, 0, len(x))
				for k := range x {
					keys = append(keys, k)
				}
				slices.Sort(keys)
				for _, k := range keys {
					next = append(next, x[k])
				}
			case []any:
				next = append(next, x...)
			}
		}
		level = next
	}
	return nil
}

// text renders a looked-up value for a sentence.
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}
