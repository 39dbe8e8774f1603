// Package bedrock is the model adapter for Amazon Bedrock's Converse API
// (aws-sdk-go-v2/service/bedrockruntime): a model.Request becomes one
// Converse call and its output a model.Response.
//
// Converse wants what the neutral messages do not promise: a system prompt
// apart, roles that alternate (so consecutive same-role messages are
// merged, and tool results travel in a user message), no empty or blank
// content. The SDK's own retries are off on every call: model.WithRetry is
// the one retry policy, and a retry under it would multiply the attempts.
//
// It must never put an SDK error's message into an error (it can echo the
// request): errors are described by shared/aws/awserr.
package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	smithydocument "github.com/aws/smithy-go/document"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// converseAPI is what the adapter needs of the Bedrock runtime client.
type converseAPI interface {
	Converse(ctx context.Context, params *bedrockruntime.ConverseInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
}

// Config is one Bedrock model.
type Config struct {
	// ModelID is a model id, an inference profile id or an ARN.
	ModelID string
	// MaxTokens and Temperature are the defaults a Request's own override.
	MaxTokens   int
	Temperature *float64
	// Timeout bounds each call (0: the caller's context only).
	Timeout time.Duration
}

// Model calls one Bedrock model through Converse.
type Model struct {
	api converseAPI
	cfg Config
	// status: the model takes a toolResult's status (Bedrock refuses it
	// from the models that do not).
	status bool
}

var _ model.Model = (*Model)(nil)

// New checks cfg; api is a *bedrockruntime.Client.
func New(api converseAPI, cfg Config) (*Model, error) {
	if api == nil {
		return nil, errors.New("bedrock model: no client")
	}
	if cfg.ModelID == "" {
		return nil, errors.New("bedrock model: no model id")
	}
	return &Model{api: api, cfg: cfg, status: takesStatus(cfg.ModelID)}, nil
}

// takesStatus: only Anthropic Claude and Amazon Nova models take a
// toolResult's status (the Converse API reference); to the others an
// error result says so in its content, as chat completions does.
func takesStatus(modelID string) bool {
	id := strings.ToLower(modelID)
	return strings.Contains(id, "anthropic.claude") || strings.Contains(id, "amazon.nova")
}

// noSDKRetries switches the client's retryer off for one call.
func noSDKRetries(o *bedrockruntime.Options) { o.Retryer = aws.NopRetryer{} }

// Call sends req and maps the output; errors are *model.Error.
func (m *Model) Call(ctx context.Context, req model.Request) (model.Response, error) {
	names, err := model.NamesFor(req)
	if err != nil {
		return model.Response{}, &model.Error{Message: "converse: " + err.Error()}
	}
	in, err := m.input(req, names)
	if err != nil {
		return model.Response{}, &model.Error{Message: "converse: " + err.Error()}
	}
	callCtx := ctx
	if m.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, m.cfg.Timeout)
		defer cancel()
	}
	out, err := m.api.Converse(callCtx, in, noSDKRetries)
	if err != nil {
		return model.Response{}, callError(ctx, err)
	}
	resp, err := output(out, names)
	if err != nil {
		return model.Response{}, &model.Error{Message: "converse: " + err.Error()}
	}
	resp.ModelID = m.cfg.ModelID
	return resp, nil
}

// input maps the request to Converse.
func (m *Model) input(req model.Request, names *model.Names) (*bedrockruntime.ConverseInput, error) {
	in := &bedrockruntime.ConverseInput{ModelId: aws.String(m.cfg.ModelID)}
	maxTokens, temp := m.cfg.MaxTokens, m.cfg.Temperature
	if req.MaxTokens > 0 {
		maxTokens = req.MaxTokens
	}
	if req.Temperature != nil {
		temp = req.Temperature
	}
	if maxTokens > 0 || temp != nil {
		in.InferenceConfig = &types.InferenceConfiguration{}
		if maxTokens > 0 {
			in.InferenceConfig.MaxTokens = aws.Int32(int32(min(maxTokens, 1<<31-1)))
		}
		if temp != nil {
			in.InferenceConfig.Temperature = aws.Float32(float32(*temp))
		}
	}
	if len(req.Tools) > 0 {
		tc := &types.ToolConfiguration{}
		for _, t := range req.Tools {
			schema := t.InputSchema
			if len(bytes.TrimSpace(schema)) == 0 || string(schema) == "null" {
				schema = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			doc, err := toDocument(schema)
			if err != nil {
				return nil, fmt.Errorf("tool %s: input schema: %w", t.Name, err)
			}
			spec := types.ToolSpecification{Name: aws.String(names.Wire(t.Name)), InputSchema: &types.ToolInputSchemaMemberJson{Value: doc}}
			if t.Description != "" {
				spec.Description = aws.String(t.Description)
			}
			tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
		}
		in.ToolConfig = tc
	}
	for _, msg := range req.Messages {
		if msg.Role == message.System {
			for _, p := range msg.Content {
				if p.Type == message.Text && strings.TrimSpace(p.Text) != "" {
					in.System = append(in.System, &types.SystemContentBlockMemberText{Value: p.Text})
				}
			}
			continue
		}
		role := types.ConversationRoleUser
		if msg.Role == message.Assistant {
			role = types.ConversationRoleAssistant
		}
		var blocks []types.ContentBlock
		for _, p := range msg.Content {
			b, err := m.block(p, names)
			if err != nil {
				return nil, fmt.Errorf("message %s: %w", msg.ID, err)
			}
			if b != nil {
				blocks = append(blocks, b)
			}
		}
		if len(blocks) == 0 {
			continue // Converse refuses empty content
		}
		if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == role {
			in.Messages[n-1].Content = append(in.Messages[n-1].Content, blocks...)
			continue
		}
		in.Messages = append(in.Messages, types.Message{Role: role, Content: blocks})
	}
	for i := range in.Messages {
		resultsFirst(in.Messages[i].Content)
	}
	return in, nil
}

// resultsFirst puts a user message's tool results before its other
// blocks, in order: Claude wants the results a turn answers first.
func resultsFirst(blocks []types.ContentBlock) {
	var results, rest []types.ContentBlock
	for _, b := range blocks {
		if _, ok := b.(*types.ContentBlockMemberToolResult); ok {
			results = append(results, b)
		} else {
			rest = append(rest, b)
		}
	}
	copy(blocks, append(results, rest...))
}

// block maps one part (nil: nothing to send).
func (m *Model) block(p message.Part, names *model.Names) (types.ContentBlock, error) {
	switch p.Type {
	case message.Text:
		if strings.TrimSpace(p.Text) == "" {
			return nil, nil // Converse refuses blank text
		}
		return &types.ContentBlockMemberText{Value: p.Text}, nil
	case message.ToolUse:
		input := p.Input
		if t := bytes.TrimSpace(input); len(t) == 0 || t[0] != '{' {
			// Converse takes an object only; a model's non-object input
			// is kept under a key rather than lost.
			input = wrapInput(input)
		}
		doc, err := toDocument(input)
		if err != nil {
			return nil, fmt.Errorf("tool call %s: input: %w", p.CallID, err)
		}
		return &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{ToolUseId: aws.String(p.CallID), Name: aws.String(names.Wire(p.Name)), Input: doc}}, nil
	case message.ToolResult:
		content, err := m.resultContent(p)
		if err != nil {
			return nil, fmt.Errorf("tool result %s: %w", p.CallID, err)
		}
		r := types.ToolResultBlock{ToolUseId: aws.String(p.CallID), Content: []types.ToolResultContentBlock{content}}
		if m.status {
			r.Status = types.ToolResultStatusSuccess
			if p.IsError {
				r.Status = types.ToolResultStatusError
			}
		}
		return &types.ContentBlockMemberToolResult{Value: r}, nil
	}
	return nil, fmt.Errorf("unknown part type %q", p.Type)
}

func wrapInput(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return json.RawMessage(`{}`)
	}
	return json.RawMessage(`{"input":` + string(raw) + `}`)
}

// resultContent is a result as a json block when it is an object (what
// Converse's json takes), else as text; an error result for a model
// without a status is wrapped as {"isError":true,"output":…}.
func (m *Model) resultContent(p message.Part) (types.ToolResultContentBlock, error) {
	out := bytes.TrimSpace(p.Output)
	if len(out) == 0 {
		out = []byte("null")
	}
	if !json.Valid(out) {
		return nil, errors.New("output is not JSON")
	}
	if p.IsError && !m.status {
		out = []byte(`{"isError":true,"output":` + string(out) + `}`)
	}
	if out[0] == '{' {
		doc, err := toDocument(out)
		if err != nil {
			return nil, err
		}
		return &types.ToolResultContentBlockMemberJson{Value: doc}, nil
	}
	var s string
	if json.Unmarshal(out, &s) == nil && strings.TrimSpace(s) != "" {
		return &types.ToolResultContentBlockMemberText{Value: s}, nil
	}
	return &types.ToolResultContentBlockMemberText{Value: string(out)}, nil
}

// toDocument turns JSON into a document with its numbers as written (a
// large id stays exact; a float64 would round it).
func toDocument(raw json.RawMessage) (document.Interface, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("not JSON")
	}
	v, err := numbers(v)
	if err != nil {
		return nil, err
	}
	return document.NewLazyDocument(v), nil
}

// numbers swaps json.Number for the document's number type, which the
// document encoder writes verbatim (json.Number it would quote).
func numbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return smithydocument.Number(x), nil
	case map[string]any:
		for k, e := range x {
			if k == "" {
				return nil, errors.New("an empty object key, which a document cannot hold")
			}
			n, err := numbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := numbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}

// output maps Converse's output.
func output(out *bedrockruntime.ConverseOutput, names *model.Names) (model.Response, error) {
	mo, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return model.Response{}, errors.New("the output holds no message")
	}
	msg := message.Message{Role: message.Assistant}
	for _, b := range mo.Value.Content {
		switch b := b.(type) {
		case *types.ContentBlockMemberText:
			if b.Value != "" {
				msg.Content = append(msg.Content, message.Part{Type: message.Text, Text: b.Value})
			}
		case *types.ContentBlockMemberToolUse:
			wire := aws.ToString(b.Value.Name)
			name, ok := names.Tool(wire)
			if !ok {
				name = wire // made up: the engine answers E_TOOL_NOT_IN_CATALOG
			}
			input := json.RawMessage(`{}`)
			if b.Value.Input != nil {
				raw, err := b.Value.Input.MarshalSmithyDocument()
				if err != nil {
					return model.Response{}, errors.New("a toolUse input is not JSON")
				}
				if len(bytes.TrimSpace(raw)) > 0 && string(raw) != "null" {
					input = raw
				}
			}
			msg.Content = append(msg.Content, message.Part{Type: message.ToolUse, CallID: aws.ToString(b.Value.ToolUseId), Name: name, Input: input})
		}
		// Reasoning and other blocks are not part of the conversation the
		// engine keeps.
	}
	resp := model.Response{Message: msg, Finish: model.SettleFinish(finish(out.StopReason), msg)}
	if u := out.Usage; u != nil {
		resp.Usage = model.Usage{PromptTokens: int64(aws.ToInt32(u.InputTokens)), CompletionTokens: int64(aws.ToInt32(u.OutputTokens)), TotalTokens: int64(aws.ToInt32(u.TotalTokens))}
		if resp.Usage.TotalTokens == 0 {
			resp.Usage.TotalTokens = resp.Usage.PromptTokens + resp.Usage.CompletionTokens
		}
	}
	return resp, nil
}

func finish(r types.StopReason) model.FinishReason {
	switch r {
	case types.StopReasonEndTurn, types.StopReasonStopSequence:
		return model.FinishStop
	case types.StopReasonToolUse:
		return model.FinishToolUse
	case types.StopReasonMaxTokens, types.StopReasonModelContextWindowExceeded:
		return model.FinishLength
	case "":
		return ""
	}
	return model.FinishOther // guardrail, content filter, malformed output
}

// retryableCodes are the Bedrock errors worth another attempt: throttled,
// busy, failing inside, not warmed up, slow.
var retryableCodes = map[string]bool{
	"ThrottlingException":         true,
	"ServiceUnavailableException": true,
	"InternalServerException":     true,
	"ModelNotReadyException":      true,
	"ModelTimeoutException":       true,
}

// knownCodes are the error codes Converse documents and the common
// errors of every AWS API (signing, credentials): the only codes an error
// carries, in its Code and its message. A model error ends in a turn
// failure, which API callers, webhooks and — through a delegation —
// another agent's model read, and the endpoint (an emulator, a proxy: the
// Model's endpoint is configurable) chooses the code: any other is
// awserr.OtherCode.
var knownCodes = map[string]bool{
	"AccessDeniedException": true, "InternalServerException": true, "ModelErrorException": true,
	"ModelNotReadyException": true, "ModelTimeoutException": true, "ResourceNotFoundException": true,
	"ServiceQuotaExceededException": true, "ServiceUnavailableException": true, "ThrottlingException": true,
	"ValidationException": true,
	// Common errors.
	"ExpiredTokenException": true, "IncompleteSignature": true, "InternalFailure": true, "InvalidClientTokenId": true,
	"InvalidSignatureException": true, "MissingAuthenticationTokenException": true, "NotAuthorized": true,
	"RequestExpired": true, "ServiceUnavailable": true, "UnrecognizedClientException": true,
}

// callError maps an SDK error: the code decides, then the status; a call
// that got no answer is retryable unless the caller's context ended.
func callError(ctx context.Context, err error) *model.Error {
	e := &model.Error{Message: "converse: " + awserr.DescribeListed(err, knownCodes), Code: awserr.Listed(awserr.Code(err), knownCodes)}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) {
		e.Status = resp.HTTPStatusCode()
		if r := resp.Response; r != nil && r.Response != nil {
			e.RetryAfter = model.RetryAfter(r.Header, time.Now())
		}
	}
	switch {
	case ctx.Err() != nil:
		e.Retryable = false
	case e.Code != "":
		// Validation, access denied, not found: 4xx, never retried.
		e.Retryable = retryableCodes[e.Code] || (e.Status != 0 && model.RetryableStatus(e.Status))
	case e.Status != 0:
		e.Retryable = model.RetryableStatus(e.Status)
	default:
		e.Retryable = true // no answer: a dropped connection or our own timeout
	}
	return e
}
