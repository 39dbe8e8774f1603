package scripted

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// converseWire is Bedrock Converse's REST/JSON wire, checked the way
// Bedrock checks it: the first message is the user's, roles alternate, no
// content is empty or blank, every toolUse is answered by a toolResult in
// the next message and every toolResult answers one.
type converseWire struct{}

func (converseWire) name() string { return "converse" }

type cvRequest struct {
	Messages        []cvMessage `json:"messages"`
	System          []cvBlock   `json:"system"`
	InferenceConfig *struct {
		MaxTokens   *int     `json:"maxTokens"`
		Temperature *float64 `json:"temperature"`
	} `json:"inferenceConfig"`
	ToolConfig *struct {
		Tools []struct {
			ToolSpec *struct {
				Name        string `json:"name"`
				Description string `json:"description"`
				InputSchema struct {
					JSON json.RawMessage `json:"json"`
				} `json:"inputSchema"`
			} `json:"toolSpec"`
		} `json:"tools"`
	} `json:"toolConfig"`
}

type cvMessage struct {
	Role    string    `json:"role"`
	Content []cvBlock `json:"content"`
}

// cvBlock is a content block: a union with one member set.
type cvBlock map[string]json.RawMessage

type cvToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type cvToolResult struct {
	ToolUseID string    `json:"toolUseId"`
	Content   []cvBlock `json:"content"`
	Status    string    `json:"status"`
}

// member returns the one member of a union block.
func (b cvBlock) member() (string, json.RawMessage, error) {
	if len(b) != 1 {
		return "", nil, fmt.Errorf("a content block needs exactly one member, it has %d", len(b))
	}
	for k, v := range b {
		return k, v, nil
	}
	return "", nil, nil
}

func cvText(raw json.RawMessage, where string) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalidf("%s.text is not a string", where)
	}
	if strings.TrimSpace(s) == "" {
		return "", invalidf("the text field in the ContentBlock object at %s is blank", where)
	}
	return s, nil
}

func isObject(raw json.RawMessage) bool {
	return bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) && json.Valid(raw)
}

func (converseWire) parse(_ *http.Request, body []byte) (parsed, error) {
	var req cvRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, invalidf("the body is not a Converse request: %v", err)
	}
	var p parsed
	if ic := req.InferenceConfig; ic != nil {
		if ic.MaxTokens != nil {
			p.maxTokens = *ic.MaxTokens
		}
		p.temperature = ic.Temperature
	}
	if tc := req.ToolConfig; tc != nil {
		for i, t := range tc.Tools {
			s := t.ToolSpec
			if s == nil || !wireName.MatchString(s.Name) || !isObject(s.InputSchema.JSON) {
				return parsed{}, invalidf("toolConfig.tools.%d: a toolSpec needs a name matching ^[a-zA-Z0-9_-]{1,64}$ and a JSON object inputSchema", i)
			}
			p.tools = append(p.tools, model.ToolSpec{Name: s.Name, Description: s.Description, InputSchema: s.InputSchema.JSON})
		}
	}
	if len(req.System) > 0 {
		sys := message.Message{ID: "system", Role: message.System}
		for i, b := range req.System {
			k, v, err := b.member()
			if err != nil || k != "text" {
				return parsed{}, invalidf("system.%d: only text blocks are supported", i)
			}
			s, err := cvText(v, fmt.Sprintf("system.%d", i))
			if err != nil {
				return parsed{}, err
			}
			sys.Content = append(sys.Content, message.Part{Type: message.Text, Text: s})
		}
		p.messages = append(p.messages, sys)
	}
	if len(req.Messages) == 0 {
		return parsed{}, invalidf("messages must not be empty")
	}
	var open map[string]bool // the previous assistant message's toolUse ids
	for i, m := range req.Messages {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if m.Role != want {
			return parsed{}, invalidf("messages.%d: a conversation starts with a user message and alternates roles; got %q", i, m.Role)
		}
		if len(m.Content) == 0 {
			return parsed{}, invalidf("messages.%d.content must not be empty", i)
		}
		msg := message.Message{ID: fmt.Sprintf("m%d", i), Role: message.Role(m.Role)}
		uses := map[string]bool{}
		for j, b := range m.Content {
			where := fmt.Sprintf("messages.%d.content.%d", i, j)
			k, v, err := b.member()
			if err != nil {
				return parsed{}, invalidf("%s: %v", where, err)
			}
			switch k {
			case "text":
				s, err := cvText(v, where)
				if err != nil {
					return parsed{}, err
				}
				msg.Content = append(msg.Content, message.Part{Type: message.Text, Text: s})
			case "toolUse":
				var u cvToolUse
				if m.Role != "assistant" || json.Unmarshal(v, &u) != nil || u.ToolUseID == "" || !wireName.MatchString(u.Name) || !isObject(u.Input) {
					return parsed{}, invalidf("%s: a toolUse (assistant only) needs a toolUseId, a valid name and an object input", where)
				}
				uses[u.ToolUseID] = true
				msg.Content = append(msg.Content, message.Part{Type: message.ToolUse, CallID: u.ToolUseID, Name: u.Name, Input: u.Input})
			case "toolResult":
				var r cvToolResult
				if m.Role != "user" || json.Unmarshal(v, &r) != nil || !open[r.ToolUseID] {
					return parsed{}, invalidf("%s: a toolResult (user only) must answer a toolUse of the previous assistant message", where)
				}
				if r.Status != "" && r.Status != "success" && r.Status != "error" {
					return parsed{}, invalidf("%s.status must be success or error", where)
				}
				delete(open, r.ToolUseID)
				out, err := cvResultOutput(r.Content, where)
				if err != nil {
					return parsed{}, err
				}
				msg.Content = append(msg.Content, message.Part{Type: message.ToolResult, CallID: r.ToolUseID, Output: out, IsError: r.Status == "error"})
			default:
				return parsed{}, invalidf("%s: the scripted model does not take %q blocks", where, k)
			}
		}
		if len(open) > 0 {
			return parsed{}, invalidf("expected toolResult blocks at messages.%d.content for every toolUse of messages.%d", i, i-1)
		}
		open = uses
		p.messages = append(p.messages, msg)
	}
	if len(open) > 0 {
		return parsed{}, invalidf("the last assistant message's toolUse blocks are not answered")
	}
	return p, nil
}

// cvResultOutput is a toolResult's content as one JSON value: the value of
// its one block (text that is not JSON as a string), or an array of them.
func cvResultOutput(blocks []cvBlock, where string) (json.RawMessage, error) {
	vals := make([]json.RawMessage, 0, len(blocks))
	for i, b := range blocks {
		k, v, err := b.member()
		if err != nil {
			return nil, invalidf("%s.content.%d: %v", where, i, err)
		}
		switch k {
		case "json":
			vals = append(vals, v)
		case "text":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, invalidf("%s.content.%d.text is not a string", where, i)
			}
			vals = append(vals, asJSON(s))
		default:
			return nil, invalidf("%s.content.%d: the scripted model does not take %q results", where, i, k)
		}
	}
	if len(vals) == 1 {
		return vals[0], nil
	}
	b, _ := json.Marshal(vals)
	return b, nil
}

var cvStop = map[model.FinishReason]string{
	model.FinishStop:    "end_turn",
	model.FinishToolUse: "tool_use",
	model.FinishLength:  "max_tokens",
	model.FinishOther:   "content_filtered",
}

func (converseWire) answer(w http.ResponseWriter, _ parsed, a answer) {
	content := []any{}
	if a.text != "" {
		content = append(content, map[string]any{"text": a.text})
	}
	for _, c := range a.calls {
		content = append(content, map[string]any{"toolUse": map[string]any{"toolUseId": c.id, "name": c.name, "input": c.args}})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"output":     map[string]any{"message": map[string]any{"role": "assistant", "content": content}},
		"stopReason": cvStop[a.finish],
		"usage":      map[string]any{"inputTokens": a.usage.PromptTokens, "outputTokens": a.usage.CompletionTokens, "totalTokens": a.usage.TotalTokens},
		"metrics":    map[string]any{"latencyMs": 0},
	})
}

// cvErrorType is the Bedrock error a status stands for.
func cvErrorType(status int) string {
	switch status {
	case http.StatusTooManyRequests:
		return "ThrottlingException"
	case http.StatusForbidden:
		return "AccessDeniedException"
	case http.StatusNotFound:
		return "ResourceNotFoundException"
	case http.StatusRequestTimeout:
		return "ModelTimeoutException"
	case http.StatusFailedDependency:
		return "ModelErrorException"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableException"
	}
	if status >= 500 {
		return "InternalServerException"
	}
	return "ValidationException"
}

func (converseWire) fail(w http.ResponseWriter, status int, code, msg string) {
	if code == "" {
		code = cvErrorType(status)
	}
	w.Header().Set("X-Amzn-ErrorType", code)
	writeJSON(w, status, map[string]any{"message": msg})
}
