package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// fakellm is an OpenAI-compatible mock server from PyPI (`make
// model-mock-deps` installs the pinned version into .tools/): written by
// others, it checks the adapter against someone else's reading of the
// wire, where the scripted model can only repeat ours.
const fakellmVersion = "0.3.5" // = FAKELLM_VERSION in the Makefile

func fakellmBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("AGENTAUTH_FAKELLM")
	if bin == "" {
		bin = filepath.Join("..", "..", "..", "..", ".tools", "fakellm-"+fakellmVersion, "bin", "fakellm")
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("AGENTAUTH_REQUIRE_FAKELLM") == "1" {
			t.Fatalf("fakellm is missing (%s): make model-mock-deps", bin)
		}
		t.Skipf("fakellm is missing (%s): make model-mock-deps", bin)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// startFakellm runs fakellm with rules on a free loopback port until the
// test ends, and returns its base URL.
func startFakellm(t *testing.T, rules string) string {
	t.Helper()
	bin := fakellmBinary(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "fakellm.yaml")
	if err := os.WriteFile(cfg, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	log, _ := os.Create(filepath.Join(dir, "fakellm.log"))
	cmd := exec.Command(bin, "serve", "--host", "127.0.0.1", "--port", fmt.Sprint(port), "--config", cfg)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(20 * time.Second); ; {
		if resp, err := http.Get(base + "/_fakellm/stats"); err == nil {
			resp.Body.Close()
			return base + "/v1"
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(dir, "fakellm.log"))
			t.Fatalf("fakellm did not start:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fakellmRequests is how many requests fakellm has answered.
func fakellmRequests(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(strings.TrimSuffix(base, "/v1") + "/_fakellm/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats struct {
		Total int `json:"total_requests"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	return stats.Total
}

func TestAgainstFakellm(t *testing.T) {
	const lookup = "acme/orders.lookup"
	names, _ := model.NewNames([]string{lookup})
	wire := names.Wire(lookup)
	base := startFakellm(t, `version: 1
rules:
  - name: throttled
    when: {messages_contain: "throttle me"}
    respond: {status: 429, error: "Rate limit exceeded for throttle me (mock)"}
  - name: refused
    when: {messages_contain: "refuse me"}
    respond: {status: 400, error: "Invalid request: refuse me"}
  - name: answer the result
    when: {tool_result_contains: "shipped"}
    respond: {content: "Your order has shipped."}
  - name: call the tool
    when: {tools_include: "`+wire+`"}
    respond:
      tool_calls:
        - name: "`+wire+`"
          arguments: {id: 7}
  - name: greeting
    when: {messages_contain: "hello"}
    respond: {content: "Hi there"}
`)
	m := newModel(t, base)
	ctx := context.Background()

	t.Run("text", func(t *testing.T) {
		resp, err := m.Call(ctx, model.Request{Messages: []message.Message{user("u", "hello")}})
		if err != nil {
			t.Fatal(err)
		}
		u := resp.Usage
		if resp.Message.TextOf() != "Hi there" || resp.Finish != model.FinishStop || u.CompletionTokens == 0 || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Fatalf("%+v", resp)
		}
	})

	t.Run("a tool call, its result, the answer", func(t *testing.T) {
		tools := []model.ToolSpec{{Name: lookup, InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"integer"}}}`)}}
		conv := []message.Message{user("u1", "where is my order?")}
		resp, err := m.Call(ctx, model.Request{Messages: conv, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		uses := resp.Message.ToolUses()
		if resp.Finish != model.FinishToolUse || len(uses) != 1 || uses[0].Name != lookup || !sameJSON(uses[0].Input, `{"id":7}`) || uses[0].CallID == "" {
			t.Fatalf("%+v", resp)
		}
		resp.Message.ID = "a1"
		conv = append(conv, resp.Message, message.Message{ID: "t1", Role: message.Tool, Content: []message.Part{
			{Type: message.ToolResult, CallID: uses[0].CallID, Output: json.RawMessage(`{"id":7,"state":"shipped"}`)},
		}})
		resp, err = m.Call(ctx, model.Request{Messages: conv, Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Message.TextOf() != "Your order has shipped." || resp.Finish != model.FinishStop {
			t.Fatalf("%+v", resp)
		}
	})

	t.Run("429 is retryable and its message stays out", func(t *testing.T) {
		_, err := m.Call(ctx, model.Request{Messages: []message.Message{user("u", "throttle me")}})
		var me *model.Error
		// fakellm's code, mock_error, is none OpenAI documents: other.
		if !errors.As(err, &me) || me.Status != 429 || !me.Retryable || me.Code != awserr.OtherCode || strings.Contains(err.Error(), "throttle me") || strings.Contains(err.Error(), apiKey) {
			t.Fatalf("%#v", err)
		}
	})

	t.Run("400 is not retried", func(t *testing.T) {
		before := fakellmRequests(t, base)
		_, err := model.WithRetry(m, fast).Call(ctx, model.Request{Messages: []message.Message{user("u", "refuse me")}})
		var me *model.Error
		if !errors.As(err, &me) || me.Status != 400 || me.Retryable {
			t.Fatalf("%#v", err)
		}
		if n := fakellmRequests(t, base) - before; n != 1 {
			t.Fatalf("%d requests for one refused call", n)
		}
	})
}

func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && fmt.Sprint(a) == fmt.Sprint(b)
}
