// Package message is the turn engine's message model: a conversation is a
// stored base plus the events appended since (Goondan's Base + Events:
// NextMessages = Base + SUM(Events)), folded deterministically in append
// order. A step writes only its new events, so what a step writes grows
// with the step, not with the history; the turn's end writes the fold as
// the new base.
//
// The model is provider-neutral: turn/model/… maps it to Bedrock Converse
// and OpenAI chat completions. This package is pure (no I/O, no clock) and
// must never fail a turn over a bad event: an edit that names an unknown
// message becomes a Warning, as the runtime model asks.
package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
)

// Role is who a message is from.
type Role string

// The roles.
const (
	System    Role = "system"
	User      Role = "user"
	Assistant Role = "assistant"
	// Tool messages carry tool results back to the model.
	Tool Role = "tool"
)

// Message is one message of the conversation.
type Message struct {
	// ID is unique within the instance's history.
	ID      string `json:"id"`
	Role    Role   `json:"role"`
	Content []Part `json:"content"`
}

// PartType is what a Part holds.
type PartType string

// The part types.
const (
	Text       PartType = "text"
	ToolUse    PartType = "tool_use"
	ToolResult PartType = "tool_result"
)

// Part is one piece of a message: text, a tool call the model made, or the
// result of one.
type Part struct {
	Type PartType `json:"type"`
	Text string   `json:"text,omitempty"`
	// ToolUse: the call's id, the tool's name and its JSON arguments.
	CallID string          `json:"callId,omitempty"`
	Name   string          `json:"name,omitempty"`
	Input  json.RawMessage `json:"input,omitempty"`
	// ToolResult: the call it answers (CallID), its JSON result and
	// whether it is an error result.
	Output  json.RawMessage `json:"output,omitempty"`
	IsError bool            `json:"isError,omitempty"`
}

// TextOf joins a message's text parts.
func (m Message) TextOf() string {
	s := ""
	for _, p := range m.Content {
		if p.Type == Text {
			s += p.Text
		}
	}
	return s
}

// ToolUses returns the tool calls of a message.
func (m Message) ToolUses() []Part {
	var out []Part
	for _, p := range m.Content {
		if p.Type == ToolUse {
			out = append(out, p)
		}
	}
	return out
}

// EventType is the kind of an edit to the conversation.
type EventType string

// The event types of the runtime model.
const (
	// SystemMessage replaces the single system slot, or adds it.
	SystemMessage EventType = "system_message"
	// LLMMessage appends a non-system message.
	LLMMessage EventType = "llm_message"
	// Replace replaces the message with TargetID, in place.
	Replace EventType = "replace"
	// Remove removes the message with TargetID.
	Remove EventType = "remove"
	// Truncate removes every message but the system one.
	Truncate EventType = "truncate"
)

// Event is one appended edit.
type Event struct {
	// Seq orders events within an instance; Fold takes them in slice
	// order, which the store keeps equal to Seq order.
	Seq      int64     `json:"seq"`
	Type     EventType `json:"type"`
	Message  *Message  `json:"message,omitempty"`
	TargetID string    `json:"targetId,omitempty"`
}

// Warning is an event the fold could not apply; the turn goes on.
type Warning struct {
	Seq    int64  `json:"seq"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Warning codes.
const (
	WarnUnknownID    = "unknownMessageId"
	WarnDuplicateID  = "duplicateMessageId"
	WarnSystemRole   = "systemRoleMismatch"
	WarnMalformed    = "malformedEvent"
	WarnUnknownType  = "unknownEventType"
	WarnDanglingUse  = "toolUseWithoutResult"
	WarnOrphanResult = "toolResultWithoutUse"
)

// Validate checks a message on its own: an id, a known role, parts that
// hold what their type says.
func (m Message) Validate() error {
	if m.ID == "" {
		return errors.New("message: no id")
	}
	switch m.Role {
	case System, User, Assistant, Tool:
	default:
		return fmt.Errorf("message %s: unknown role %q", m.ID, m.Role)
	}
	for i, p := range m.Content {
		switch p.Type {
		case Text:
		case ToolUse:
			if p.CallID == "" || p.Name == "" {
				return fmt.Errorf("message %s: content[%d]: a tool_use needs callId and name", m.ID, i)
			}
		case ToolResult:
			if p.CallID == "" {
				return fmt.Errorf("message %s: content[%d]: a tool_result needs callId", m.ID, i)
			}
		default:
			return fmt.Errorf("message %s: content[%d]: unknown part type %q", m.ID, i, p.Type)
		}
	}
	return nil
}

// Fold applies events to base in order and returns the conversation: the
// system message (if any) first, then the others in order. It never
// modifies base. Events it cannot apply are skipped and reported.
func Fold(base []Message, events []Event) ([]Message, []Warning) {
	f := newFolder(len(base) + len(events))
	for _, m := range base {
		if m.Role == System {
			f.setSystem(m)
		} else {
			f.appendMsg(-1, m)
		}
	}
	for _, e := range events {
		f.apply(e)
	}
	return f.result(), f.warnings
}

// folder keeps the conversation as a slice with tombstones and an index by
// id, so each event is O(1) and the fold is linear.
type folder struct {
	system   *Message
	msgs     []Message
	live     []bool
	index    map[string]int
	warnings []Warning
}

func newFolder(n int) *folder {
	return &folder{msgs: make([]Message, 0, n), live: make([]bool, 0, n), index: make(map[string]int, n)}
}

func (f *folder) warn(seq int64, code, format string, a ...any) {
	f.warnings = append(f.warnings, Warning{Seq: seq, Code: code, Detail: fmt.Sprintf(format, a...)})
}

func (f *folder) has(id string) bool {
	if f.system != nil && f.system.ID == id {
		return true
	}
	_, ok := f.index[id]
	return ok
}

func (f *folder) setSystem(m Message) {
	if f.system != nil && f.system.ID != m.ID {
		delete(f.index, f.system.ID)
	}
	f.system = &m
}

func (f *folder) appendMsg(seq int64, m Message) {
	if f.has(m.ID) {
		f.warn(seq, WarnDuplicateID, "message id %s is already in the conversation", m.ID)
		return
	}
	f.index[m.ID] = len(f.msgs)
	f.msgs = append(f.msgs, m)
	f.live = append(f.live, true)
}

func (f *folder) apply(e Event) {
	switch e.Type {
	case SystemMessage, LLMMessage, Replace:
		if e.Message == nil {
			f.warn(e.Seq, WarnMalformed, "%s without a message", e.Type)
			return
		}
		if err := e.Message.Validate(); err != nil {
			f.warn(e.Seq, WarnMalformed, "%s: %v", e.Type, err)
			return
		}
	}
	switch e.Type {
	case SystemMessage:
		if e.Message.Role != System {
			f.warn(e.Seq, WarnSystemRole, "system_message %s has role %s", e.Message.ID, e.Message.Role)
			return
		}
		if f.system == nil || f.system.ID != e.Message.ID {
			if _, clash := f.index[e.Message.ID]; clash {
				f.warn(e.Seq, WarnDuplicateID, "message id %s is already in the conversation", e.Message.ID)
				return
			}
		}
		f.setSystem(*e.Message)
	case LLMMessage:
		if e.Message.Role == System {
			f.warn(e.Seq, WarnSystemRole, "llm_message %s has role system: use system_message", e.Message.ID)
			return
		}
		f.appendMsg(e.Seq, *e.Message)
	case Replace:
		f.replace(e)
	case Remove:
		f.remove(e)
	case Truncate:
		for i := range f.msgs {
			if f.live[i] {
				f.live[i] = false
				delete(f.index, f.msgs[i].ID)
			}
		}
	default:
		f.warn(e.Seq, WarnUnknownType, "unknown event type %q", e.Type)
	}
}

func (f *folder) replace(e Event) {
	if f.system != nil && f.system.ID == e.TargetID {
		if e.Message.Role != System {
			f.warn(e.Seq, WarnSystemRole, "replace of the system message %s with role %s", e.TargetID, e.Message.Role)
			return
		}
		f.setSystem(*e.Message)
		return
	}
	i, ok := f.index[e.TargetID]
	if !ok {
		f.warn(e.Seq, WarnUnknownID, "replace: no message %s", e.TargetID)
		return
	}
	if e.Message.Role == System {
		f.warn(e.Seq, WarnSystemRole, "replace of %s with a system message: use system_message", e.TargetID)
		return
	}
	if e.Message.ID != e.TargetID && f.has(e.Message.ID) {
		f.warn(e.Seq, WarnDuplicateID, "replace: message id %s is already in the conversation", e.Message.ID)
		return
	}
	delete(f.index, e.TargetID)
	f.index[e.Message.ID] = i
	f.msgs[i] = *e.Message
}

func (f *folder) remove(e Event) {
	if f.system != nil && f.system.ID == e.TargetID {
		f.system = nil
		return
	}
	i, ok := f.index[e.TargetID]
	if !ok {
		f.warn(e.Seq, WarnUnknownID, "remove: no message %s", e.TargetID)
		return
	}
	f.live[i] = false
	delete(f.index, e.TargetID)
}

func (f *folder) result() []Message {
	out := make([]Message, 0, len(f.index)+1)
	if f.system != nil {
		out = append(out, *f.system)
	}
	for i, m := range f.msgs {
		if f.live[i] {
			out = append(out, m)
		}
	}
	return out
}

// CheckToolPairs reports every tool_use without a later tool_result for
// its call id, and every tool_result without an earlier tool_use: the
// engine never hands the model such a history (providers refuse it).
func CheckToolPairs(msgs []Message) []Warning {
	var out []Warning
	open := map[string]string{} // call id → message id
	var order []string
	for _, m := range msgs {
		for _, p := range m.Content {
			switch p.Type {
			case ToolUse:
				if _, dup := open[p.CallID]; !dup {
					order = append(order, p.CallID)
				}
				open[p.CallID] = m.ID
			case ToolResult:
				if _, ok := open[p.CallID]; !ok {
					out = append(out, Warning{Seq: -1, Code: WarnOrphanResult, Detail: fmt.Sprintf("message %s answers call %s, which no earlier message made", m.ID, p.CallID)})
					continue
				}
				delete(open, p.CallID)
			}
		}
	}
	for _, id := range order {
		if mid, ok := open[id]; ok {
			out = append(out, Warning{Seq: -1, Code: WarnDanglingUse, Detail: fmt.Sprintf("message %s calls %s and no result follows", mid, id)})
		}
	}
	return out
}

// ToolsAsText returns msgs with the calls of tools that offered does not
// accept — and their results — as text: each tool_use part becomes a text
// part of its assistant message, and the results become one user message
// after the run of tool messages they were in (OpenAI wants an assistant
// message's tool calls answered by the tool messages right after it).
// Providers differ on history that calls tools the request does not
// define: Bedrock Converse refuses toolUse and toolResult blocks unless
// the request's toolConfig defines the tools; OpenAI accepts them. A
// history without such blocks is accepted by every provider, and the
// model still reads what was called and what came back. msgs is not
// modified.
func ToolsAsText(msgs []Message, offered func(name string) bool) []Message {
	names := map[string]string{} // call id → tool name, of calls made text
	for _, m := range msgs {
		for _, p := range m.Content {
			if p.Type == ToolUse && !offered(p.Name) {
				names[p.CallID] = p.Name
			}
		}
	}
	if len(names) == 0 {
		return msgs
	}
	out := make([]Message, 0, len(msgs)+1)
	var moved []Part // results made text, waiting for the end of the tool run
	flush := func(after string) {
		if len(moved) > 0 {
			out = append(out, Message{ID: after + "-as-text", Role: User, Content: moved})
			moved = nil
		}
	}
	for i, m := range msgs {
		parts := make([]Part, 0, len(m.Content))
		for _, p := range m.Content {
			name, made := names[p.CallID]
			switch {
			case p.Type == ToolUse && made:
				parts = append(parts, Part{Type: Text, Text: fmt.Sprintf("[called tool %q (call %s) with arguments %s]", name, p.CallID, compact(p.Input))})
			case p.Type == ToolResult && made:
				moved = append(moved, Part{Type: Text, Text: resultText(p, name)})
			default:
				parts = append(parts, p)
			}
		}
		if len(parts) > 0 {
			m.Content = parts
			out = append(out, m)
		}
		if next := i + 1; next == len(msgs) || msgs[next].Role != Tool {
			flush(m.ID)
		}
	}
	return out
}

// resultText is a tool result as ToolsAsText writes it; TextResult reads
// it back.
func resultText(p Part, tool string) string {
	kind := "result"
	if p.IsError {
		kind = "error result"
	}
	return fmt.Sprintf("[%s of call %s (tool %q): %s]", kind, p.CallID, tool, compact(p.Output))
}

var textResult = regexp.MustCompile(`^\[(error result|result) of call (\S*) \(tool ("(?:[^"\\]|\\.)*")\): (.*)\]$`)

// TextResult reads back a tool result ToolsAsText made text: the tool's
// name and the result part (ok false for any other text). The scripted
// model uses it to answer such results as it answers tool_result parts.
func TextResult(text string) (tool string, p Part, ok bool) {
	m := textResult.FindStringSubmatch(text)
	if m == nil {
		return "", Part{}, false
	}
	if err := json.Unmarshal([]byte(m[3]), &tool); err != nil || !json.Valid([]byte(m[4])) {
		return "", Part{}, false
	}
	return tool, Part{Type: ToolResult, CallID: m[2], Output: json.RawMessage(m[4]), IsError: m[1] == "error result"}, true
}

// compact is raw JSON on one line ("null" for none).
func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// BlocksNote starts the user message the engine adds after the
// conversation with the step's context blocks (auth.pending,
// swarmBundle.revisionChanged): a note to the model, not the user
// speaking (the scripted model skips it).
const BlocksNote = "Context blocks (JSON):"
