package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/model"
	"github.com/agentauth/agentauth/shared/turn/model/bedrock"
	"github.com/agentauth/agentauth/shared/turn/model/openai"
)

// The providers' documented rules on tool history, checked here on what
// the real adapters put on the wire:
//   - Bedrock Converse: a request whose messages hold toolUse or
//     toolResult blocks must carry a toolConfig ("The toolConfig field
//     must be defined when using toolUse and toolResult content blocks"),
//     and a toolUse names a tool of that toolConfig;
//   - OpenAI chat completions: a tool message answers a tool_call of the
//     assistant message right before the run of tool messages it is in.
//     (OpenAI does not check tool names against the request's tools.)

// stepTools offers echo in the turns' odd steps and nothing in the even
// ones; a call of anything else is refused as not in the catalog.
type stepTools struct{ fakeTools }

func (s *stepTools) Catalog(_ context.Context, t turn.Turn) ([]Tool, error) {
	if t.Steps%2 == 1 { // t.Steps is the steps before this one
		return nil, nil
	}
	return []Tool{{Spec: model.ToolSpec{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, nil
}

func (s *stepTools) Invoke(ctx context.Context, in Invocation) Outcome {
	if in.Call.Tool != "echo" {
		return Outcome{Kind: OutcomeError, Result: errorResult("E_TOOL_NOT_IN_CATALOG", "not in this step's catalog")}
	}
	return s.fakeTools.Invoke(ctx, in)
}

// converseRules is a Converse API that refuses what Bedrock documents it
// refuses, and answers: a call of ghost (not offered) and echo, then text.
type converseRules struct {
	mu      sync.Mutex
	calls   int
	refused []string
}

func (c *converseRules) Converse(_ context.Context, in *bedrockruntime.ConverseInput, _ ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	defined := map[string]bool{}
	if in.ToolConfig != nil {
		for _, tl := range in.ToolConfig.Tools {
			if spec, ok := tl.(*types.ToolMemberToolSpec); ok {
				defined[aws.ToString(spec.Value.Name)] = true
			}
		}
	}
	for i, m := range in.Messages {
		for _, b := range m.Content {
			switch b := b.(type) {
			case *types.ContentBlockMemberToolUse:
				if len(defined) == 0 {
					c.refused = append(c.refused, fmt.Sprintf("call %d message %d: toolUse without toolConfig", c.calls, i))
				} else if !defined[aws.ToString(b.Value.Name)] {
					c.refused = append(c.refused, fmt.Sprintf("call %d message %d: toolUse of %s, not in toolConfig", c.calls, i, aws.ToString(b.Value.Name)))
				}
			case *types.ContentBlockMemberToolResult:
				if len(defined) == 0 {
					c.refused = append(c.refused, fmt.Sprintf("call %d message %d: toolResult without toolConfig", c.calls, i))
				}
			}
		}
	}
	if len(c.refused) > 0 {
		return nil, fmt.Errorf("ValidationException: %s", c.refused[0])
	}
	msg := types.Message{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "done"}}}
	stop := types.StopReasonEndTurn
	if c.calls%2 == 1 {
		stop = types.StopReasonToolUse
		msg.Content = []types.ContentBlock{
			&types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{ToolUseId: aws.String(fmt.Sprint("tu-ghost-", c.calls)), Name: aws.String("ghost"), Input: document.NewLazyDocument(map[string]any{})}},
			&types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{ToolUseId: aws.String(fmt.Sprint("tu-echo-", c.calls)), Name: aws.String("echo"), Input: document.NewLazyDocument(map[string]any{})}},
		}
	}
	return &bedrockruntime.ConverseOutput{Output: &types.ConverseOutputMemberMessage{Value: msg}, StopReason: stop,
		Usage: &types.TokenUsage{InputTokens: aws.Int32(1), OutputTokens: aws.Int32(1), TotalTokens: aws.Int32(2)}}, nil
}

// openAIRules is a chat-completions server that refuses a tool message
// not answering the assistant message before its run, and answers like
// converseRules.
type openAIRules struct {
	mu      sync.Mutex
	calls   int
	refused []string
}

func (o *openAIRules) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	open := map[string]bool{}
	for i, m := range req.Messages {
		switch {
		case m.Role == "tool" && !open[m.ToolCallID]:
			o.refused = append(o.refused, fmt.Sprintf("call %d message %d: tool message for %s, which the assistant message before it did not call", o.calls, i, m.ToolCallID))
		case m.Role == "tool":
			delete(open, m.ToolCallID)
		default:
			if len(open) > 0 {
				o.refused = append(o.refused, fmt.Sprintf("call %d message %d: %d tool calls left unanswered", o.calls, i, len(open)))
			}
			open = map[string]bool{}
			for _, tc := range m.ToolCalls {
				open[tc.ID] = true
			}
		}
	}
	if len(o.refused) > 0 {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, o.refused[0])
		return
	}
	msg := map[string]any{"role": "assistant", "content": "done"}
	finish := "stop"
	if o.calls%2 == 1 {
		finish = "tool_calls"
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{
			{"id": fmt.Sprint("c-ghost-", o.calls), "type": "function", "function": map[string]string{"name": "ghost", "arguments": "{}"}},
			{"id": fmt.Sprint("c-echo-", o.calls), "type": "function", "function": map[string]string{"name": "echo", "arguments": "{}"}},
		}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion", "model": "m",
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]int{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
}

// TestHistoryEveryProviderAccepts: the model calls a tool it was not
// offered (refused E_TOOL_NOT_IN_CATALOG) next to one it was; the next
// step offers no tools at all; a later turn offers the tool again. Each
// request goes through the real Bedrock and OpenAI adapters to a server
// that applies the provider's documented rules: none is refused, and a
// refused call stays in the stored history (issue 16, item 5).
func TestHistoryEveryProviderAccepts(t *testing.T) {
	conv := &converseRules{}
	br, err := bedrock.New(conv, bedrock.Config{ModelID: "anthropic.claude-3-haiku-20240307-v1:0"})
	if err != nil {
		t.Fatal(err)
	}
	rules := &openAIRules{}
	srv := httptest.NewServer(rules)
	defer srv.Close()
	oa, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		model   model.Model
		refused func() []string
	}{
		{"bedrock", br, func() []string { return conv.refused }},
		{"openai", oa, func() []string { return rules.refused }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tools := &stepTools{}
			f.e.Tools = tools
			f.e.Config = fixedConfig{Agent{Model: tc.model, MaxSteps: 8}}
			f.send(t, "ev-1", "go")
			f.send(t, "ev-2", "again")
			if r := tc.refused(); len(r) > 0 {
				t.Fatalf("the provider refused: %v", r)
			}
			st := f.state(t)
			tr := lastTurn(st)
			if tr.Status != turn.TurnCompleted || tr.Final != "done" || tools.ran("echo") != 2 {
				t.Fatalf("turn %s %q (%+v), echo ran %d", tr.Status, tr.Final, tr.Error, tools.ran("echo"))
			}
			// The stored history keeps the refused calls as calls.
			if h := history(st); strings.Count(h, "use:ghost") != 2 || strings.Count(h, "use:echo") != 2 {
				t.Fatalf("history %s", h)
			}
		})
	}
}
