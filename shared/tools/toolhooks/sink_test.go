package toolhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

// TestMultiSinkReturnsTheFirstError: every sink gets the event, and the
// first failure is the one returned.
func TestMultiSinkReturnsTheFirstError(t *testing.T) {
	first, second := errors.New("first down"), errors.New("second down")
	ok1, ok2 := &recSink{}, &recSink{}
	m := MultiSink{ok1, errSink{first}, errSink{second}, ok2}
	if err := m.Emit(context.Background(), "ev"); err != first {
		t.Fatalf("Emit = %v, want %v", err, first)
	}
	if len(ok1.events) != 1 || len(ok2.events) != 1 {
		t.Fatalf("sinks got %d and %d events, want one each", len(ok1.events), len(ok2.events))
	}
	if err := (MultiSink{ok1, ok2}).Emit(context.Background(), "ev"); err != nil {
		t.Fatalf("all well: Emit = %v", err)
	}
}

type errSink struct{ err error }

func (s errSink) Emit(context.Context, any) error { return s.err }
