package toolhooks

import (
	"context"
	"log/slog"
)

// LogSink writes audit events as structured log lines (the local server's
// event stream; in Lambda the function log). Events are content-free by
// construction, so the line holds no argument.
type LogSink struct{ Log *slog.Logger }

// Emit logs ev with its type as the message.
func (s LogSink) Emit(ctx context.Context, ev any) error {
	switch e := ev.(type) {
	case ToolCalled:
		attrs := []any{"agentId", e.AgentID, "toolName", e.ToolName, "callId", e.CallID,
			"argsHash", e.ArgsHash, "principal", e.Principal, "transport", e.Transport}
		if e.Tenant != "" {
			attrs = append(attrs, "tenant", e.Tenant)
		}
		if e.Via != "" {
			attrs = append(attrs, "via", e.Via)
		}
		s.Log.InfoContext(ctx, e.Type, attrs...)
	case ToolReturned:
		attrs := []any{"agentId", e.AgentID, "toolName", e.ToolName, "callId", e.CallID, "status", e.Status}
		if e.DurationMs != nil {
			attrs = append(attrs, "durationMs", *e.DurationMs)
		}
		if e.Consent {
			attrs = append(attrs, "consent", true)
		}
		s.Log.InfoContext(ctx, e.Type, attrs...)
	default:
		s.Log.InfoContext(ctx, "audit event", "event", ev)
	}
	return nil
}

// MultiSink emits to every sink; the first error is returned after all ran.
type MultiSink []Sink

// Emit emits ev to each sink.
func (m MultiSink) Emit(ctx context.Context, ev any) error {
	var first error
	for _, s := range m {
		if err := s.Emit(ctx, ev); err != nil && first == nil {
			first = err
		}
	}
	return first
}
