package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// openaiWire is OpenAI chat completions, read as strictly as OpenAI reads
// it: unknown fields, a tool message that answers no call and a call left
// unanswered are refused. Its types are its own, not the adapter's, so a
// mistake in one is not mirrored in the other.
type openaiWire struct{}

func (openaiWire) name() string { return "openai" }

type oaRequest struct {
	Model               string      `json:"model"`
	Messages            []oaMessage `json:"messages"`
	Tools               []oaTool    `json:"tools"`
	MaxTokens           *int        `json:"max_tokens"`
	MaxCompletionTokens *int        `json:"max_completion_tokens"`
	Temperature         *float64    `json:"temperature"`
	Stream              bool        `json:"stream"`
	// Accepted and not used.
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls json.RawMessage `json:"parallel_tool_calls"`
	TopP              json.RawMessage `json:"top_p"`
	Stop              json.RawMessage `json:"stop"`
	N                 json.RawMessage `json:"n"`
	Seed              json.RawMessage `json:"seed"`
	User              json.RawMessage `json:"user"`
	ResponseFormat    json.RawMessage `json:"response_format"`
}

type oaMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []oaToolCall    `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type oaToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type oaTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      json.RawMessage `json:"strict"`
	} `json:"function"`
}

// oaText reads a message's content: a string, null, or text parts.
func oaText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("content is neither a string nor an array of parts")
	}
	out := ""
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q is not supported", p.Type)
		}
		out += p.Text
	}
	return out, nil
}

// asJSON keeps JSON as is and anything else as a JSON string.
func asJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func (openaiWire) parse(_ *http.Request, body []byte) (parsed, error) {
	var req oaRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return parsed{}, invalidf("the body is not a chat completions request: %v", err)
	}
	if req.Model == "" {
		return parsed{}, invalidf("model is required")
	}
	if req.Stream {
		return parsed{}, invalidf("the scripted model does not stream")
	}
	if len(req.Messages) == 0 {
		return parsed{}, invalidf("messages must not be empty")
	}
	p := parsed{model: req.Model, temperature: req.Temperature}
	switch {
	case req.MaxCompletionTokens != nil:
		p.maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		p.maxTokens = *req.MaxTokens
	}
	for i, t := range req.Tools {
		if t.Type != "function" || !wireName.MatchString(t.Function.Name) {
			return parsed{}, invalidf("tools[%d]: a function tool needs a name matching ^[a-zA-Z0-9_-]{1,64}$", i)
		}
		if len(t.Function.Parameters) > 0 && !bytes.HasPrefix(bytes.TrimSpace(t.Function.Parameters), []byte("{")) {
			return parsed{}, invalidf("tools[%d].function.parameters must be a JSON Schema object", i)
		}
		p.tools = append(p.tools, model.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	open := map[string]bool{} // calls of the last assistant message not answered yet
	for i, m := range req.Messages {
		text, err := oaText(m.Content)
		if err != nil {
			return parsed{}, invalidf("messages[%d]: %v", i, err)
		}
		if m.Role != "tool" && len(open) > 0 {
			return parsed{}, invalidf("messages[%d]: an assistant message with tool_calls must be followed by tool messages answering each tool_call_id", i)
		}
		id := fmt.Sprintf("m%d", i)
		switch m.Role {
		case "system", "developer":
			p.messages = append(p.messages, message.Message{ID: id, Role: message.System, Content: []message.Part{{Type: message.Text, Text: text}}})
		case "user":
			p.messages = append(p.messages, message.Message{ID: id, Role: message.User, Content: []message.Part{{Type: message.Text, Text: text}}})
		case "assistant":
			msg := message.Message{ID: id, Role: message.Assistant}
			if text != "" {
				msg.Content = append(msg.Content, message.Part{Type: message.Text, Text: text})
			}
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Type != "function" || !wireName.MatchString(c.Function.Name) || !json.Valid([]byte(c.Function.Arguments)) {
					return parsed{}, invalidf("messages[%d].tool_calls[%d]: a function call needs an id, a valid name and JSON arguments", i, j)
				}
				open[c.ID] = true
				msg.Content = append(msg.Content, message.Part{Type: message.ToolUse, CallID: c.ID, Name: c.Function.Name, Input: json.RawMessage(c.Function.Arguments)})
			}
			p.messages = append(p.messages, msg)
		case "tool":
			if !open[m.ToolCallID] {
				return parsed{}, invalidf("messages[%d]: a tool message must answer a tool_call_id of the assistant message before it", i)
			}
			delete(open, m.ToolCallID)
			p.messages = append(p.messages, message.Message{ID: id, Role: message.Tool, Content: []message.Part{{Type: message.ToolResult, CallID: m.ToolCallID, Output: asJSON(text)}}})
		default:
			return parsed{}, invalidf("messages[%d]: unknown role %q", i, m.Role)
		}
	}
	if len(open) > 0 {
		return parsed{}, invalidf("the last assistant message's tool_calls are not all answered")
	}
	return p, nil
}

var oaFinish = map[model.FinishReason]string{
	model.FinishStop:    "stop",
	model.FinishToolUse: "tool_calls",
	model.FinishLength:  "length",
	model.FinishOther:   "content_filter",
}

func (openaiWire) answer(w http.ResponseWriter, p parsed, a answer) {
	msg := map[string]any{"role": "assistant", "content": a.text}
	if len(a.calls) > 0 {
		if a.text == "" {
			msg["content"] = nil
		}
		calls := make([]map[string]any, len(a.calls))
		for i, c := range a.calls {
			calls[i] = map[string]any{"id": c.id, "type": "function", "function": map[string]any{"name": c.name, "arguments": string(c.args)}}
		}
		msg["tool_calls"] = calls
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"id":      "chatcmpl-scripted",
		"object":  "chat.completion",
		"created": 0,
		"model":   p.model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": oaFinish[a.finish]}},
		"usage":   map[string]any{"prompt_tokens": a.usage.PromptTokens, "completion_tokens": a.usage.CompletionTokens, "total_tokens": a.usage.TotalTokens},
	})
}

func (openaiWire) fail(w http.ResponseWriter, status int, code, msg string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "requests"
		if code == "" {
			code = "rate_limit_exceeded"
		}
	case status >= 500:
		typ = "server_error"
	case status == http.StatusUnauthorized && code == "":
		code = "invalid_api_key"
	}
	var c any
	if code != "" {
		c = code
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": c}})
}
