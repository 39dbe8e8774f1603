package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

func start(t *testing.T, s Script) (*Server, string) {
	t.Helper()
	srv, err := New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return srv, hs.URL
}

func post(t *testing.T, url, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("status %d, body %s is not JSON", resp.StatusCode, raw)
	}
	return resp.StatusCode, resp.Header, out
}

// oaAnswer digs the first choice's message out of a chat completion.
func oaAnswer(t *testing.T, out map[string]any) (map[string]any, string) {
	t.Helper()
	choices, _ := out["choices"].([]any)
	if len(choices) != 1 {
		t.Fatalf("choices: %v", out)
	}
	c := choices[0].(map[string]any)
	return c["message"].(map[string]any), c["finish_reason"].(string)
}

const (
	oaUser = `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"who am I?"}],
		"tools":[{"type":"function","function":{"name":"whoami","parameters":{"type":"object"}}}]}`
	oaResult = `{"model":"m","messages":[{"role":"user","content":"who am I?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"whoami","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"{\"status\":\"ok\",\"output\":{\"sub\":\"alice\",\"name\":\"Alice\"}}"}]}`
	oaExpired = `{"model":"m","messages":[{"role":"user","content":"who am I?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"whoami","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"{\"status\":\"authorization_expired\"}"}]}`
	cvUser   = `{"system":[{"text":"be brief"}],"messages":[{"role":"user","content":[{"text":"who am I?"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"whoami","inputSchema":{"json":{"type":"object"}}}}]}}`
	cvResult = `{"messages":[{"role":"user","content":[{"text":"who am I?"}]},
		{"role":"assistant","content":[{"toolUse":{"toolUseId":"c1","name":"whoami","input":{}}}]},
		{"role":"user","content":[{"toolResult":{"toolUseId":"c1","content":[{"json":{"status":"ok","output":{"name":"Alice"}}}],"status":"success"}}]}]}`
)

func TestDemoScriptOnBothWires(t *testing.T) {
	srv, url := start(t, DemoScript())
	t.Run("openai: a user message calls whoami", func(t *testing.T) {
		status, _, out := post(t, url+"/v1/chat/completions", oaUser)
		msg, finish := oaAnswer(t, out)
		calls, _ := msg["tool_calls"].([]any)
		if status != 200 || finish != "tool_calls" || len(calls) != 1 || msg["content"] != nil {
			t.Fatalf("%d %v", status, out)
		}
		fn := calls[0].(map[string]any)["function"].(map[string]any)
		if fn["name"] != "whoami" || fn["arguments"] != "{}" {
			t.Fatalf("call %v", fn)
		}
	})
	t.Run("openai: the whoami result is answered naming the user", func(t *testing.T) {
		_, _, out := post(t, url+"/v1/chat/completions", oaResult)
		msg, finish := oaAnswer(t, out)
		if finish != "stop" || !strings.HasPrefix(msg["content"].(string), "You are Alice ") || msg["tool_calls"] != nil {
			t.Fatalf("%v", out)
		}
	})
	t.Run("openai: a result naming nobody does not loop back to whoami", func(t *testing.T) {
		_, _, out := post(t, url+"/v1/chat/completions", oaExpired)
		msg, finish := oaAnswer(t, out)
		if finish != "stop" || !strings.Contains(msg["content"].(string), "did not tell me") {
			t.Fatalf("%v", out)
		}
	})
	t.Run("converse: a user message calls whoami", func(t *testing.T) {
		status, _, out := post(t, url+"/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse", cvUser)
		content := out["output"].(map[string]any)["message"].(map[string]any)["content"].([]any)
		use := content[0].(map[string]any)["toolUse"].(map[string]any)
		if status != 200 || out["stopReason"] != "tool_use" || use["name"] != "whoami" || use["toolUseId"] == "" {
			t.Fatalf("%d %v", status, out)
		}
	})
	t.Run("converse: the whoami result is answered naming the user", func(t *testing.T) {
		_, _, out := post(t, url+"/model/m/converse", cvResult)
		content := out["output"].(map[string]any)["message"].(map[string]any)["content"].([]any)
		if out["stopReason"] != "end_turn" || !strings.HasPrefix(content[0].(map[string]any)["text"].(string), "You are Alice ") {
			t.Fatalf("%v", out)
		}
	})
	reqs := srv.Requests()
	if len(reqs) != 5 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	if r := reqs[3]; r.Wire != "converse" || r.Model != "anthropic.claude-3-haiku-20240307-v1:0" || r.Turn != 2 || r.Status != 200 ||
		len(r.Tools) != 1 || r.Tools[0].Name != "whoami" || r.Messages[0].Role != message.System || r.Messages[1].TextOf() != "who am I?" {
		t.Fatalf("recorded %+v", r)
	}
	if r := reqs[1]; r.Wire != "openai" || r.Turn != 0 || r.Messages[2].Role != message.Tool || r.Messages[2].Content[0].CallID != "c1" ||
		!strings.Contains(string(r.Messages[2].Content[0].Output), `"Alice"`) || r.Header.Get("Authorization") != "Bearer sk-test-key" {
		t.Fatalf("recorded %+v", r)
	}
}

func TestMatching(t *testing.T) {
	script := Script{Turns: []Turn{
		{ToolResult: "acme/orders.lookup", ResultHas: "ticket", ToolCalls: []ToolCall{{Name: "acme/orders.lookup", Args: json.RawMessage(`{"ticket":"{{result.ticket}}","note":"x{{result.missing}}"}`)}}},
		{ToolResult: "acme/orders.lookup", Text: "order {{result.id}} is {{result.state}}{{result.missing}}"},
		{UserContains: "order", ToolCalls: []ToolCall{{Name: "acme/orders.lookup", Args: json.RawMessage(`{"id":7}`)}, {Name: "made_up"}}},
		{UserContains: "long", Text: "cut", Finish: model.FinishLength, Usage: &model.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}},
		{UserContains: "hello", Text: "hi"},
	}}
	n, _ := model.NewNames([]string{"acme/orders.lookup"})
	wire := n.Wire("acme/orders.lookup")
	_, url := start(t, script)
	tools := `"tools":[{"type":"function","function":{"name":"` + wire + `","parameters":{"type":"object"}}}]`
	for _, tc := range []struct {
		name, body string
		status     int
		check      func(t *testing.T, out map[string]any)
	}{
		{"a catalog name answers with the wire name offered; a made-up one as is", `{"model":"m",` + tools + `,"messages":[{"role":"user","content":"my order?"}]}`, 200,
			func(t *testing.T, out map[string]any) {
				msg, _ := oaAnswer(t, out)
				calls := msg["tool_calls"].([]any)
				f0 := calls[0].(map[string]any)["function"].(map[string]any)
				f1 := calls[1].(map[string]any)["function"].(map[string]any)
				if f0["name"] != wire || f0["arguments"] != `{"id":7}` || f1["name"] != "made_up" || f1["arguments"] != "{}" {
					t.Fatalf("%v", calls)
				}
				if calls[0].(map[string]any)["id"] == calls[1].(map[string]any)["id"] {
					t.Fatal("two calls share an id")
				}
			}},
		{"the result of a mapped tool fills the template", `{"model":"m","messages":[{"role":"user","content":"my order?"},
			{"role":"assistant","content":"looking","tool_calls":[{"id":"c9","type":"function","function":{"name":"` + wire + `","arguments":"{\"id\":7}"}}]},
			{"role":"tool","tool_call_id":"c9","content":"{\"order\":{\"id\":7,\"state\":\"shipped\"}}"}]}`, 200,
			func(t *testing.T, out map[string]any) {
				if msg, _ := oaAnswer(t, out); msg["content"] != "order 7 is shipped" {
					t.Fatalf("%v", msg)
				}
			}},
		{"a result's value fills a call's argument, escaped for its string", `{"model":"m",` + tools + `,"messages":[{"role":"user","content":"my order?"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c9","type":"function","function":{"name":"` + wire + `","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c9","content":"{\"ticket\":\"T-1 \\\"quoted\\\"\"}"}]}`, 200,
			func(t *testing.T, out map[string]any) {
				msg, _ := oaAnswer(t, out)
				f := msg["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
				if f["arguments"] != `{"ticket":"T-1 \"quoted\"","note":"x"}` {
					t.Fatalf("arguments %v", f["arguments"])
				}
			}},
		{"a user message after a tool result is a user message", `{"model":"m","messages":[{"role":"user","content":"my order?"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c9","type":"function","function":{"name":"` + wire + `","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c9","content":"{}"},{"role":"user","content":"hello"}]}`, 200,
			func(t *testing.T, out map[string]any) {
				if msg, _ := oaAnswer(t, out); msg["content"] != "hi" {
					t.Fatalf("%v", msg)
				}
			}},
		{"finish and usage overrides", `{"model":"m","messages":[{"role":"user","content":"a long one"}]}`, 200,
			func(t *testing.T, out map[string]any) {
				_, finish := oaAnswer(t, out)
				u := out["usage"].(map[string]any)
				if finish != "length" || u["prompt_tokens"] != 3.0 || u["completion_tokens"] != 4.0 || u["total_tokens"] != 7.0 {
					t.Fatalf("%v", out)
				}
			}},
		{"no turn answers", `{"model":"m","messages":[{"role":"user","content":"nothing scripted"}]}`, 400,
			func(t *testing.T, out map[string]any) {
				if out["error"].(map[string]any)["code"] != "no_scripted_turn" {
					t.Fatalf("%v", out)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, out := post(t, url+"/v1/chat/completions", tc.body)
			if status != tc.status {
				t.Fatalf("status %d: %v", status, out)
			}
			tc.check(t, out)
		})
	}
}

// TestRefusesWhatProvidersRefuse: the checks that give the adapter tests
// their teeth.
func TestRefusesWhatProvidersRefuse(t *testing.T) {
	_, url := start(t, Script{Turns: []Turn{{Text: "ok"}, {ToolResult: "t", Text: "ok"}}})
	call := `{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"t","arguments":"{}"}}]}`
	for _, tc := range []struct{ name, path, body string }{
		{"openai: no model", "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`},
		{"openai: no messages", "/v1/chat/completions", `{"model":"m","messages":[]}`},
		{"openai: an unknown field", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokenz":1}`},
		{"openai: streaming", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`},
		{"openai: a tool name outside the alphabet", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a/b.c"}}]}`},
		{"openai: arguments as an object", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"t","arguments":{}}}]}]}`},
		{"openai: a call left unanswered", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"},` + call + `,{"role":"user","content":"y"}]}`},
		{"openai: a result answering no call", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"tool","tool_call_id":"c1","content":"{}"}]}`},
		{"openai: an unknown role", "/v1/chat/completions", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`},
		{"converse: starts with the assistant", "/model/m/converse", `{"messages":[{"role":"assistant","content":[{"text":"x"}]}]}`},
		{"converse: two user messages in a row", "/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"user","content":[{"text":"y"}]}]}`},
		{"converse: blank text", "/model/m/converse", `{"messages":[{"role":"user","content":[{"text":" "}]}]}`},
		{"converse: empty content", "/model/m/converse", `{"messages":[{"role":"user","content":[]}]}`},
		{"converse: a tool result in the wrong place", "/model/m/converse", `{"messages":[{"role":"user","content":[{"toolResult":{"toolUseId":"c1","content":[{"text":"x"}]}}]}]}`},
		{"converse: a toolUse left unanswered", "/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"c1","name":"t","input":{}}}]},{"role":"user","content":[{"text":"y"}]}]}`},
		{"converse: toolUse input not an object", "/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"c1","name":"t","input":"{}"}}]}]}`},
		{"converse: a schema that is not an object", "/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"x"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"t","inputSchema":{"json":"{}"}}}]}}`},
		{"converse: a block with two members", "/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"x","image":{}}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, out := post(t, url+tc.path, tc.body)
			refused := h.Get("X-Amzn-ErrorType") == "ValidationException"
			if e, ok := out["error"].(map[string]any); ok {
				refused = e["type"] == "invalid_request_error" && e["code"] == nil
			}
			if status != 400 || !refused {
				t.Fatalf("status %d %v: %v", status, h, out)
			}
		})
	}
	t.Run("a well-formed tool round trip passes both", func(t *testing.T) {
		if status, _, out := post(t, url+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"},`+call+`,{"role":"tool","tool_call_id":"c1","content":"not json"}]}`); status != 200 {
			t.Fatalf("%d %v", status, out)
		}
		if status, _, out := post(t, url+"/model/m/converse", `{"messages":[{"role":"user","content":[{"text":"x"}]},{"role":"assistant","content":[{"toolUse":{"toolUseId":"c1","name":"t","input":{}}}]},{"role":"user","content":[{"toolResult":{"toolUseId":"c1","content":[{"text":"not json"}],"status":"error"}}]}]}`); status != 200 {
			t.Fatalf("%d %v", status, out)
		}
	})
}

func TestFailures(t *testing.T) {
	srv, url := start(t, Script{Turns: []Turn{{Text: "ok"}}})
	srv.FailNext(Failure{Status: 429, Times: 2, RetryAfter: "3"})
	srv.FailNext(Failure{Status: 503, Message: "down"})
	want := []struct {
		path, code string
		status     int
	}{
		{"/v1/chat/completions", "rate_limit_exceeded", 429},
		{"/model/m/converse", "ThrottlingException", 429},
		{"/v1/chat/completions", "", 503},
		{"/model/m/converse", "", 200},
	}
	bodies := map[string]string{"/v1/chat/completions": `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "/model/m/converse": `{"messages":[{"role":"user","content":[{"text":"x"}]}]}`}
	for i, w := range want {
		status, h, out := post(t, url+w.path, bodies[w.path])
		if status != w.status {
			t.Fatalf("request %d: %d %v", i, status, out)
		}
		switch {
		case w.status == 429 && h.Get("Retry-After") != "3":
			t.Errorf("request %d: Retry-After %q", i, h.Get("Retry-After"))
		case w.code == "rate_limit_exceeded" && out["error"].(map[string]any)["code"] != w.code:
			t.Errorf("request %d: %v", i, out)
		case w.code == "ThrottlingException" && h.Get("X-Amzn-ErrorType") != w.code:
			t.Errorf("request %d: %v", i, h)
		case w.status == 503 && out["error"].(map[string]any)["message"] != "down":
			t.Errorf("request %d: %v", i, out)
		}
	}
	if r := srv.Requests(); r[0].Status != 429 || r[0].Turn != -1 || r[3].Status != 200 {
		t.Fatalf("%+v", r)
	}
}

func TestDeterministic(t *testing.T) {
	_, url := start(t, Script{Turns: []Turn{{ToolCalls: []ToolCall{{Name: "whoami"}}}}})
	raw := func() string {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(oaUser))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if a, b := raw(), raw(); a != b {
		t.Fatalf("two answers to one request differ:\n%s\n%s", a, b)
	}
}

func TestNewRefusesABadScript(t *testing.T) {
	for name, s := range map[string]Script{
		"resultHas without toolResult": {Turns: []Turn{{ResultHas: "x"}}},
		"a call without a name":        {Turns: []Turn{{ToolCalls: []ToolCall{{}}}}},
		"arguments that are not JSON":  {Turns: []Turn{{ToolCalls: []ToolCall{{Name: "t", Args: json.RawMessage(`{`)}}}}},
		"an unknown finish":            {Turns: []Turn{{Finish: "maybe"}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(s, nil); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestServeNamesItselfAndLogsNoContent: the log says what it is, and
// carries neither the conversation nor the key.
func TestServeNamesItselfAndLogsNoContent(t *testing.T) {
	logs := &lockedBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port for Serve
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, addr, DemoScript(), log) }()
	status := 0
	for i := 0; i < 100 && status == 0; i++ {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(oaUser))
		req.Header.Set("Authorization", "Bearer sk-test-key")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			status = resp.StatusCode
			resp.Body.Close()
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	cancel()
	if err := <-done; err != nil || status != 200 {
		t.Fatalf("serve: %v, status %d", err, status)
	}
	out := logs.String()
	if !strings.Contains(out, "the scripted model") || !strings.Contains(out, "not a language model") {
		t.Errorf("the log does not name the scripted model:\n%s", out)
	}
	for _, leak := range []string{"sk-test-key", "who am I", "be brief"} {
		if strings.Contains(out, leak) {
			t.Errorf("the log holds %q:\n%s", leak, out)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
