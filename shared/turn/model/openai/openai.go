// Package openai is the model adapter for OpenAI-compatible chat
// completions — OpenAI, vLLM, Ollama, LiteLLM: a model.Request becomes one
// POST {BaseURL}/chat/completions and its answer a model.Response.
//
// It speaks plain net/http rather than github.com/openai/openai-go/v3
// (v3.96.0 was weighed), for three reasons:
//   - Size: the SDK adds about 18.5 MB to a stripped linux/amd64 binary (a
//     program making one chat call: 24.8 MB with the SDK, 6.2 MB with
//     net/http), and every Lambda function that runs turns would carry it
//     into its cold start.
//   - Other servers: we use one endpoint and a dozen fields. The SDK's types
//     are generated from OpenAI's own API; what vLLM, Ollama and LiteLLM do
//     differently (content as parts, a numeric error code, no call id,
//     "stop" next to tool calls, error bodies that are not OpenAI's) is
//     simpler to tolerate, and to test, in code we own.
//   - Retries: the SDK retries twice by default with its own backoff.
//     model.WithRetry is the one retry policy, so the SDK's would have to
//     be switched off (option.WithMaxRetries(0)) and its errors mapped to
//     model.Error all the same.
//
// It must never log the API key, send it anywhere but the Authorization
// header of a request to the configured endpoint (redirects are not
// followed: one would take the header and the conversation with it), or
// put it or the request's content into an error: errors carry the HTTP
// status, the provider's error code when it is one OpenAI documents and
// its request id, never the provider's message (servers echo request
// content in theirs).
package openai

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// Config is one OpenAI-compatible model.
type Config struct {
	// BaseURL is the API root the path /chat/completions is added to:
	// https://api.openai.com/v1, http://127.0.0.1:11434/v1 (Ollama),
	// http://host:8000/v1 (vLLM).
	BaseURL string
	// APIKey is sent as a Bearer token; empty: no Authorization header
	// (Ollama, vLLM without --api-key).
	APIKey domain.Secret
	// Model is the model id.
	Model string
	// MaxTokens and Temperature are the defaults a Request's own override.
	MaxTokens   int
	Temperature *float64
	// Timeout bounds each request (0: the caller's context only).
	Timeout time.Duration
	// HTTPClient sends the requests (nil: a client of its own).
	HTTPClient *http.Client
}

// Model calls one OpenAI-compatible model.
type Model struct {
	cfg      Config
	endpoint string
	client   *http.Client
}

var _ model.Model = (*Model)(nil)

// New checks cfg.
func New(cfg Config) (*Model, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("openai model: the base URL must be an absolute http(s) URL")
	}
	if u.User != nil {
		return nil, errors.New("openai model: the base URL must not hold credentials: use the API key")
	}
	if cfg.Model == "" {
		return nil, errors.New("openai model: no model id")
	}
	client := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient // a copy: the caller's client keeps its own redirect rule
		client = &c
	}
	// A redirect is answered as an error, never followed: net/http would
	// send the Authorization header along to the same host (over plain
	// http too, after an https endpoint) and a 307 or 308 the
	// conversation to wherever it points.
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Model{cfg: cfg, endpoint: strings.TrimSuffix(cfg.BaseURL, "/") + "/chat/completions", client: client}, nil
}

// String and GoString name the model without its key: fmt does not call
// the Secret's own redaction on an unexported field.
func (m *Model) String() string { return "openai model " + m.cfg.Model + " at " + m.endpoint }

// GoString is String.
func (m *Model) GoString() string { return m.String() }

// The wire types: the fields of chat completions this adapter uses.

type chatRequest struct {
	Model       string        `json:"model"`
	Messages    []chatMessage `json:"messages"`
	Tools       []chatTool    `json:"tools,omitempty"`
	MaxTokens   int           `json:"max_tokens,omitempty"`
	Temperature *float64      `json:"temperature,omitempty"`
}

type chatMessage struct {
	Role string `json:"role"`
	// Content is null for an assistant message that only calls tools.
	Content    *string    `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type toolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
		// Arguments is a JSON string on the wire; some servers send the
		// object itself, which the answer's reader accepts too.
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type chatTool struct {
	Type     string       `json:"type"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatResponse struct {
	Choices []struct {
		Message struct {
			Content   json.RawMessage `json:"content"`
			ToolCalls []toolCall      `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		TotalTokens      int64 `json:"total_tokens"`
	} `json:"usage"`
}

const (
	maxAnswer    = 16 << 20
	maxErrorBody = 64 << 10
)

// emptySchema is what a tool without a schema is offered with: OpenAI
// wants an object schema.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// Call sends req and maps the answer; errors are *model.Error.
func (m *Model) Call(ctx context.Context, req model.Request) (model.Response, error) {
	names, err := model.NamesFor(req)
	if err != nil {
		return model.Response{}, &model.Error{Message: "chat completions: " + err.Error()}
	}
	body, err := json.Marshal(m.request(req, names))
	if err != nil {
		return model.Response{}, &model.Error{Message: "chat completions: the request could not be encoded (" + fmt.Sprintf("%T", err) + ")"}
	}
	callCtx := ctx
	if m.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, m.cfg.Timeout)
		defer cancel()
	}
	hreq, err := http.NewRequestWithContext(callCtx, http.MethodPost, m.endpoint, bytes.NewReader(body))
	if err != nil {
		return model.Response{}, &model.Error{Message: "chat completions: the request could not be built"}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if !m.cfg.APIKey.IsZero() {
		hreq.Header.Set("Authorization", "Bearer "+m.cfg.APIKey.Reveal())
	}
	resp, err := m.client.Do(hreq)
	if err != nil {
		return model.Response{}, m.transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return model.Response{}, redirectError(resp)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return model.Response{}, statusError(resp)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return model.Response{}, m.transportError(ctx, err)
	}
	if len(raw) > maxAnswer {
		return model.Response{}, &model.Error{Status: resp.StatusCode, Message: "chat completions: the answer is larger than 16 MiB"}
	}
	out, err := answer(raw, names)
	if err != nil {
		return model.Response{}, &model.Error{Status: resp.StatusCode, Message: "chat completions: " + err.Error()}
	}
	// The id it asked for, not the answer's "model": a server may name
	// what it ran however it likes, and the step's events say what the
	// bundle configured.
	out.ModelID = m.cfg.Model
	return out, nil
}

// request maps the conversation and tools to the wire.
func (m *Model) request(req model.Request, names *model.Names) chatRequest {
	out := chatRequest{Model: m.cfg.Model, MaxTokens: m.cfg.MaxTokens, Temperature: m.cfg.Temperature}
	if req.MaxTokens > 0 {
		out.MaxTokens = req.MaxTokens
	}
	if req.Temperature != nil {
		out.Temperature = req.Temperature
	}
	for _, t := range req.Tools {
		params := t.InputSchema
		if len(bytes.TrimSpace(params)) == 0 || string(params) == "null" {
			params = emptySchema
		}
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: toolFunction{Name: names.Wire(t.Name), Description: t.Description, Parameters: params}})
	}
	for _, msg := range req.Messages {
		var text strings.Builder
		var calls []toolCall
		for _, p := range msg.Content {
			switch p.Type {
			case message.Text:
				text.WriteString(p.Text)
			case message.ToolUse:
				var c toolCall
				c.ID, c.Type, c.Function.Name = p.CallID, "function", names.Wire(p.Name)
				args, _ := json.Marshal(string(orEmptyObject(p.Input)))
				c.Function.Arguments = args
				calls = append(calls, c)
			case message.ToolResult:
				// One tool message per result, before anything else the
				// message holds: results must follow the calls directly.
				content := resultContent(p)
				out.Messages = append(out.Messages, chatMessage{Role: "tool", ToolCallID: p.CallID, Content: &content})
			}
		}
		s := text.String()
		switch msg.Role {
		case message.System:
			out.Messages = append(out.Messages, chatMessage{Role: "system", Content: &s})
		case message.Assistant:
			am := chatMessage{Role: "assistant", ToolCalls: calls}
			if s != "" || len(calls) == 0 {
				am.Content = &s
			}
			out.Messages = append(out.Messages, am)
		default: // user, and text a tool message may carry
			if s != "" {
				out.Messages = append(out.Messages, chatMessage{Role: "user", Content: &s})
			}
		}
	}
	return out
}

func orEmptyObject(raw json.RawMessage) json.RawMessage {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return json.RawMessage(`{}`)
	}
	return raw
}

// resultContent is a tool result as a tool message's content: its JSON,
// wrapped as {"isError":true,"output":…} for an error result, since chat
// completions has no error flag.
func resultContent(p message.Part) string {
	out := p.Output
	if len(bytes.TrimSpace(out)) == 0 {
		out = json.RawMessage(`null`)
	} else if !json.Valid(out) {
		out, _ = json.Marshal(string(p.Output))
	}
	if p.IsError {
		return `{"isError":true,"output":` + string(out) + `}`
	}
	return string(out)
}

// answer maps a chat completion to a response.
func answer(raw []byte, names *model.Names) (model.Response, error) {
	var cr chatResponse
	if err := json.Unmarshal(raw, &cr); err != nil || len(cr.Choices) == 0 {
		return model.Response{}, errors.New("the answer is not a chat completion with a choice")
	}
	choice := cr.Choices[0]
	msg := message.Message{Role: message.Assistant}
	text, err := contentText(choice.Message.Content)
	if err != nil {
		return model.Response{}, err
	}
	if text != "" {
		msg.Content = append(msg.Content, message.Part{Type: message.Text, Text: text})
	}
	sum := sha256.Sum256(raw)
	for i, c := range choice.Message.ToolCalls {
		name, ok := names.Tool(c.Function.Name)
		if !ok {
			name = c.Function.Name // made up: the engine answers E_TOOL_NOT_IN_CATALOG
		}
		id := c.ID
		if id == "" {
			// Some servers send none; the id must still be stable for the
			// stored answer, so it derives from the answer.
			id = fmt.Sprintf("call_%s_%d", hex.EncodeToString(sum[:6]), i)
		}
		msg.Content = append(msg.Content, message.Part{Type: message.ToolUse, CallID: id, Name: name, Input: arguments(c.Function.Arguments)})
	}
	resp := model.Response{Message: msg, Finish: model.SettleFinish(finish(choice.FinishReason), msg)}
	if u := cr.Usage; u != nil {
		resp.Usage = model.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
		if resp.Usage.TotalTokens == 0 {
			resp.Usage.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
	}
	return resp, nil
}

// contentText reads an answer's content: a string, null, or text parts.
func contentText(raw json.RawMessage) (string, error) {
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
	if json.Unmarshal(raw, &parts) != nil {
		return "", errors.New("the answer's content is neither text nor parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// arguments is a call's JSON input: the string's JSON ({} when empty), an
// object a server sent as is, or — a model can write broken JSON — the
// text as a JSON string, which the tool's schema check then refuses.
func arguments(raw json.RawMessage) json.RawMessage {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		if json.Valid(raw) && len(raw) > 0 && string(raw) != "null" {
			return raw
		}
		return json.RawMessage(`{}`)
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage(`{}`)
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func finish(r string) model.FinishReason {
	switch r {
	case "stop":
		return model.FinishStop
	case "tool_calls", "function_call":
		return model.FinishToolUse
	case "length":
		return model.FinishLength
	case "":
		return ""
	}
	return model.FinishOther // content_filter, and what a server invents
}

// redirectError is a 3xx answer, which the client did not follow. Where
// it points is left out (the server chose it); the fix is the endpoint.
func redirectError(resp *http.Response) *model.Error {
	return &model.Error{
		Status: resp.StatusCode,
		Message: fmt.Sprintf("chat completions: the endpoint redirected (HTTP %d), and redirects are not followed: "+
			"they would take the API key and the conversation along; set the Model's endpoint to the URL it redirects to", resp.StatusCode),
	}
}

// statusError maps a non-2xx answer: status, the provider's code, its
// retry hint — and not its message.
func statusError(resp *http.Response) *model.Error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := "chat completions: " + strings.ToLower(http.StatusText(resp.StatusCode))
	if msg == "chat completions: " {
		msg += "error"
	}
	if id := resp.Header.Get("X-Request-Id"); id != "" {
		msg += " (request id " + awserr.Token(id) + ")"
	}
	return &model.Error{
		Status:     resp.StatusCode,
		Code:       errorCode(raw),
		Message:    msg,
		Retryable:  model.RetryableStatus(resp.StatusCode),
		RetryAfter: model.RetryAfter(resp.Header, time.Now()),
	}
}

// knownCodes are the error codes and types OpenAI documents for its API
// (and vLLM's error types): the only codes an error carries. A model
// error ends in a turn failure, which API callers, webhooks and — through
// a delegation — another agent's model read, so an endpoint's own words
// never get there: any other code is awserr.OtherCode.
var knownCodes = map[string]bool{
	// error.type
	"invalid_request_error": true, "authentication_error": true, "permission_error": true,
	"not_found_error": true, "conflict_error": true, "rate_limit_error": true, "insufficient_quota": true,
	"server_error": true, "api_error": true, "service_unavailable_error": true, "requests": true, "tokens": true,
	// error.code
	"invalid_api_key": true, "invalid_organization": true, "model_not_found": true, "context_length_exceeded": true,
	"rate_limit_exceeded": true, "billing_hard_limit_reached": true, "invalid_value": true, "invalid_type": true,
	"missing_required_parameter": true, "unknown_parameter": true, "unsupported_parameter": true,
	"unsupported_value": true, "integer_below_min_value": true, "integer_above_max_value": true,
	"string_above_max_length": true, "array_above_max_length": true, "empty_array": true, "invalid_prompt": true,
	"content_filter": true, "content_policy_violation": true, "server_is_overloaded": true, "slow_down": true,
	"unsupported_country_region_territory": true, "account_deactivated": true,
	// vLLM's error types
	"BadRequestError": true, "NotFoundError": true, "InternalServerError": true,
}

// knownCode is code when knownCodes lists it or it is an HTTP status
// (vLLM and LiteLLM send the status as the code), else
// awserr.OtherCode; "" stays "".
func knownCode(code string) string {
	if len(code) == 3 && code[0] >= '1' && code[0] <= '5' && code[1] >= '0' && code[1] <= '9' && code[2] >= '0' && code[2] <= '9' {
		return code
	}
	return awserr.Listed(code, knownCodes)
}

// errorCode is the code, else the type, of an error body that knownCode
// keeps (OtherCode when it keeps neither): OpenAI's and LiteLLM's
// {"error":{"code","type"}}, vLLM's top-level {"code","type"}; a code
// may be a number.
func errorCode(raw []byte) string {
	code, typ := bodyCode(raw)
	for _, c := range []string{knownCode(code), knownCode(typ)} {
		if c != "" && c != awserr.OtherCode {
			return c
		}
	}
	if code != "" || typ != "" {
		return awserr.OtherCode
	}
	return ""
}

// bodyCode is the code and the type an error body names.
func bodyCode(raw []byte) (code, typ string) {
	var body struct {
		Error json.RawMessage `json:"error"`
		Code  json.RawMessage `json:"code"`
		Type  json.RawMessage `json:"type"`
	}
	if json.Unmarshal(raw, &body) != nil {
		return "", ""
	}
	var inner struct {
		Code json.RawMessage `json:"code"`
		Type json.RawMessage `json:"type"`
	}
	if json.Unmarshal(body.Error, &inner) == nil && (scalar(inner.Code) != "" || scalar(inner.Type) != "") {
		body.Code, body.Type = inner.Code, inner.Type
	}
	return scalar(body.Code), scalar(body.Type)
}

// scalar is a JSON string or number as a short token ("" otherwise):
// awserr.Token, the one rule for identifiers a server sent.
func scalar(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return ""
		}
		s = n.String()
	}
	if s == "" {
		return ""
	}
	return awserr.Token(s)
}

// transportError maps a request that got no (whole) answer: retryable,
// unless the caller's own context ended.
func (m *Model) transportError(ctx context.Context, err error) *model.Error {
	if ctx.Err() != nil {
		return &model.Error{Message: "chat completions: " + ctx.Err().Error()}
	}
	var op *net.OpError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return &model.Error{Message: fmt.Sprintf("chat completions: no answer within %s", m.cfg.Timeout), Retryable: true}
	case errors.As(err, &op):
		// Names addresses, never request content.
		return &model.Error{Message: "chat completions: " + op.Error(), Retryable: true}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &model.Error{Message: "chat completions: the connection closed before the answer", Retryable: true}
	}
	return &model.Error{Message: fmt.Sprintf("chat completions: the request failed (%T)", innermost(err)), Retryable: true}
}

func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
