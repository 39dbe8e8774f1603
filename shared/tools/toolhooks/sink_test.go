package toolhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestLogSink(t *testing.T) {
	var buf bytes.Buffer
	h := &Hooks{Sink: MultiSink{LogSink{Log: slog.New(slog.NewJSONHandler(&buf, nil))}, &recSink{}}}
	h.Invoke(context.Background(), Call{AgentID: "a", ToolName: "t", CallID: "c", Principal: "p", Args: json.RawMessage(`{"x":"` + canary + `"}`), KnownSecrets: []string{canary}, Via: ViaTurn},
		Tool{Name: "t", Transport: "native"}, func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil })
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"msg":"agent.toolCalled"`) || !strings.Contains(lines[0], `"argsHash":"`) || !strings.Contains(lines[0], `"via":"turn"`) ||
		!strings.Contains(lines[1], `"msg":"agent.toolReturned"`) || !strings.Contains(lines[1], `"durationMs":`) {
		t.Fatalf("log lines:\n%s", buf.String())
	}
	if strings.Contains(buf.String(), canary) {
		t.Fatal("canary in the log")
	}
}
