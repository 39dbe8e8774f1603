package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// These tests go through the real SDK client (its serializer, signer and
// error deserializer) to the scripted model's Converse wire.

const claude = "anthropic.claude-3-haiku-20240307-v1:0"

func sdkModel(t *testing.T, s scripted.Script, cfg Config) (*Model, *scripted.Server) {
	t.Helper()
	srv, err := scripted.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	// A client built the default way: its retryer would retry 429 and
	// 5xx itself, which the adapter must switch off.
	client := bedrockruntime.New(bedrockruntime.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(hs.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "aws-secret-key-test", ""),
		HTTPClient:   hs.Client(),
	})
	if cfg.ModelID == "" {
		cfg.ModelID = claude
	}
	m, err := New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, srv
}

func TestConverseRoundTripThroughTheSDK(t *testing.T) {
	const lookup = "acme/orders.lookup"
	names, _ := model.NewNames([]string{lookup})
	wireName := names.Wire(lookup)
	temp := 0.3
	m, srv := sdkModel(t, scripted.Script{Turns: []scripted.Turn{
		{ToolResult: lookup, Text: "order {{result.id}} has {{result.state}}", Usage: &model.Usage{PromptTokens: 40, CompletionTokens: 6, TotalTokens: 46}},
		{UserContains: "order", ToolCalls: []scripted.ToolCall{
			{Name: wireName, Args: json.RawMessage(`{"id":12345678901234567890}`)},
			{Name: "made_up", Args: json.RawMessage(`{}`)},
		}},
	}}, Config{MaxTokens: 300, Temperature: &temp})
	tools := []model.ToolSpec{{Name: lookup, Description: "Look an order up", InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)}}
	conv := []message.Message{
		msg("s", message.System, text("be brief")),
		msg("u1", message.User, text("where is my order?")),
	}
	resp, err := m.Call(context.Background(), model.Request{Messages: conv, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	uses := resp.Message.ToolUses()
	if resp.Finish != model.FinishToolUse || len(uses) != 2 || uses[0].Name != lookup || string(uses[0].Input) != `{"id":12345678901234567890}` || uses[1].Name != "made_up" {
		t.Fatalf("%+v", resp)
	}
	r := srv.Requests()[0]
	if r.Wire != "converse" || r.Model != claude || r.MaxTokens != 300 || r.Temperature == nil || math.Abs(*r.Temperature-0.3) > 1e-6 {
		t.Errorf("sent model %q max %d temp %v", r.Model, r.MaxTokens, r.Temperature)
	}
	if len(r.Tools) != 1 || r.Tools[0].Name != wireName || r.Tools[0].Description != "Look an order up" || !strings.Contains(string(r.Tools[0].InputSchema), `"integer"`) {
		t.Errorf("tools sent: %+v", r.Tools)
	}
	if len(r.Messages) != 2 || r.Messages[0].Role != message.System || r.Messages[0].TextOf() != "be brief" || r.Messages[1].TextOf() != "where is my order?" {
		t.Errorf("sent %+v", r.Messages)
	}
	if a := r.Header.Get("Authorization"); !strings.HasPrefix(a, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || strings.Contains(a, "aws-secret-key-test") {
		t.Errorf("Authorization %q", a)
	}

	resp.Message.ID = "a1"
	conv = append(conv, resp.Message,
		msg("t1", message.Tool, res(uses[0].CallID, `{"id":12345678901234567890,"state":"shipped"}`, false)),
		msg("t2", message.Tool, res(uses[1].CallID, `{"code":"E_TOOL_NOT_IN_CATALOG"}`, true)),
	)
	resp, err = m.Call(context.Background(), model.Request{Messages: conv, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Finish != model.FinishStop || resp.Message.TextOf() != "order 12345678901234567890 has shipped" || resp.Usage != (model.Usage{PromptTokens: 40, CompletionTokens: 6, TotalTokens: 46}) {
		t.Fatalf("%+v", resp)
	}
	got := srv.Requests()[1].Messages
	if len(got) != 4 || got[2].Role != message.Assistant || got[3].Role != message.User || len(got[3].Content) != 2 {
		t.Fatalf("sent %+v", got)
	}
	if u := got[2].ToolUses(); u[0].Name != wireName || u[1].Name != "made_up" {
		t.Errorf("assistant sent as %+v", got[2])
	}
	ok, bad := got[3].Content[0], got[3].Content[1]
	if ok.CallID != uses[0].CallID || ok.IsError || string(ok.Output) != `{"id":12345678901234567890,"state":"shipped"}` || bad.CallID != uses[1].CallID || !bad.IsError {
		t.Errorf("results sent as %+v", got[3])
	}
}

func TestConverseFinishThroughTheSDK(t *testing.T) {
	for _, tc := range []struct{ finish, want model.FinishReason }{
		{"", model.FinishStop},
		{model.FinishLength, model.FinishLength},
		{model.FinishOther, model.FinishOther},
	} {
		t.Run(string(tc.want), func(t *testing.T) {
			m, _ := sdkModel(t, scripted.Script{Turns: []scripted.Turn{{Text: "x", Finish: tc.finish}}}, Config{})
			resp, err := m.Call(context.Background(), model.Request{Messages: []message.Message{msg("u", message.User, text("x"))}})
			if err != nil || resp.Finish != tc.want || resp.Usage.TotalTokens == 0 {
				t.Fatalf("%v %+v", err, resp)
			}
		})
	}
}

var fast = model.RetryPolicy{MaxRetries: 3, InitialDelay: time.Millisecond, MaxDelay: 5 * time.Second}

func TestConverseErrorsThroughTheSDK(t *testing.T) {
	ask := model.Request{Messages: []message.Message{msg("u", message.User, text("my secret question"))}}
	for _, tc := range []struct {
		name      string
		fail      scripted.Failure
		retry     bool
		requests  int
		ok        bool
		status    int
		code      string
		retryable bool
	}{
		{"429: the SDK does not retry it", scripted.Failure{Status: 429, RetryAfter: "2"}, false, 1, false, 429, "ThrottlingException", true},
		{"429 then success under WithRetry", scripted.Failure{Status: 429}, true, 2, true, 0, "", false},
		{"503 twice then success under WithRetry", scripted.Failure{Status: 503, Times: 2}, true, 3, true, 0, "", false},
		{"500", scripted.Failure{Status: 500}, false, 1, false, 500, "InternalServerException", true},
		{"400 is not retried", scripted.Failure{Status: 400}, true, 1, false, 400, "ValidationException", false},
		{"403 is not retried", scripted.Failure{Status: 403}, true, 1, false, 403, "AccessDeniedException", false},
		{"404 is not retried", scripted.Failure{Status: 404}, true, 1, false, 404, "ResourceNotFoundException", false},
		{"408 model timeout is retried", scripted.Failure{Status: 408, Times: 4}, true, 4, false, 408, "ModelTimeoutException", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, srv := sdkModel(t, scripted.Script{Turns: []scripted.Turn{{Text: "ok"}}}, Config{})
			tc.fail.Message = "echo: my secret question"
			srv.FailNext(tc.fail)
			var mm model.Model = m
			if tc.retry {
				mm = model.WithRetry(m, fast)
			}
			resp, err := mm.Call(context.Background(), ask)
			if n := len(srv.Requests()); n != tc.requests {
				t.Fatalf("%d requests, want %d (%v)", n, tc.requests, err)
			}
			if tc.ok {
				if err != nil || resp.Message.TextOf() != "ok" {
					t.Fatalf("%v %+v", err, resp)
				}
				return
			}
			var me *model.Error
			if !errors.As(err, &me) || me.Status != tc.status || me.Code != tc.code || me.Retryable != tc.retryable {
				t.Fatalf("%#v", err)
			}
			if tc.fail.RetryAfter == "2" && me.RetryAfter != 2*time.Second {
				t.Errorf("Retry-After read as %s", me.RetryAfter)
			}
			for _, leak := range []string{"secret question", "aws-secret-key-test"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error holds %q: %v", leak, err)
				}
			}
		})
	}
}

func TestConverseRetryAfterIsHonoured(t *testing.T) {
	m, srv := sdkModel(t, scripted.Script{Turns: []scripted.Turn{{Text: "ok"}}}, Config{})
	srv.FailNext(scripted.Failure{Status: 429, RetryAfter: "0.3"})
	start := time.Now()
	if _, err := model.WithRetry(m, fast).Call(context.Background(), model.Request{Messages: []message.Message{msg("u", message.User, text("x"))}}); err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("retried after %s, the server asked for 300ms", waited)
	}
}
