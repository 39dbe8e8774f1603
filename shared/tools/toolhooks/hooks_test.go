package toolhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type recSink struct {
	mu     sync.Mutex
	events []any
}

func (s *recSink) Emit(_ context.Context, e any) error {
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	return nil
}

type fixedLimiter struct {
	allow bool
	err   error
	calls []string
}

func (l *fixedLimiter) Allow(_ context.Context, principal, tool string) (bool, time.Duration, error) {
	l.calls = append(l.calls, principal+"/"+tool)
	return l.allow, 7 * time.Second, l.err
}

type codedErr struct{}

func (codedErr) Error() string         { return "upstream said no" }
func (codedErr) ToolErrorName() string { return "UpstreamError" }
func (codedErr) ToolErrorCode() string { return "E_UPSTREAM" }

const canary = "canary-s3cr3t-7f1e9a2b4c6d8e0f"

func TestInvokeScenarios(t *testing.T) {
	schema := compile(t, `{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}}`)
	tool := Tool{Name: "web.search", RequiredScopes: []string{"web:read"}, Transport: "http", ErrorMessageLimit: 40, Schema: schema}
	args := json.RawMessage(`{"q":"` + canary + `","auth":"Bearer ` + canary + `"}`)
	base := Call{AgentID: "planner", ToolName: "web.search", CallID: "c1", Principal: "user:alice", Args: args,
		GrantedScopes: []string{"web:read"}, KnownSecrets: []string{canary}}
	okTool := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"hits":1}`), nil
	}

	for _, tc := range []struct {
		name      string
		call      func(Call) Call
		limiter   *fixedLimiter
		run       Invoker
		status    string
		verdict   Verdict
		ran       bool
		errorCode string
	}{
		{"allowed call runs", nil, &fixedLimiter{allow: true}, okTool, StatusOK, VerdictOK, true, ""},
		{"missing scope: forbidden, never runs", func(c Call) Call { c.GrantedScopes = []string{"web:write"}; return c }, &fixedLimiter{allow: true}, okTool, StatusForbidden, VerdictForbidden, false, ""},
		{"no scopes at all (no decision): forbidden", func(c Call) Call { c.GrantedScopes = nil; return c }, &fixedLimiter{allow: true}, okTool, StatusForbidden, VerdictForbidden, false, ""},
		{"bucket exhausted: rate limited, never runs", nil, &fixedLimiter{allow: false}, okTool, StatusRateLimited, VerdictRateLimited, false, ""},
		{"limiter down: fail closed", nil, &fixedLimiter{err: errors.New("store down")}, okTool, StatusError, VerdictUnavailable, false, "E_TOOL_RATE_LIMIT_UNAVAILABLE"},
		{"not in catalog", func(c Call) Call { c.Catalog = []string{"other"}; return c }, nil, okTool, StatusError, VerdictError, false, CodeNotInCatalog},
		{"invalid args", func(c Call) Call { c.Args = json.RawMessage(`{"x":1}`); return c }, nil, okTool, StatusError, VerdictError, false, CodeInvalidArgs},
		{"tool error is a result, cut to the limit", nil, nil, func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New(strings.Repeat("boom ", 50))
		}, StatusError, VerdictError, true, CodeTool},
		{"coded tool error keeps name and code", nil, nil, func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, codedErr{} }, StatusError, VerdictError, true, "E_UPSTREAM"},
		{"a panicking tool is an error result", nil, nil, func(context.Context, json.RawMessage) (json.RawMessage, error) { panic("x") }, StatusError, VerdictError, true, CodeTool},
		{"an error echoing a known secret is scrubbed", nil, nil, func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("401 for token " + canary)
		}, StatusError, VerdictError, true, CodeTool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recSink{}
			var logs bytes.Buffer
			h := &Hooks{Sink: sink, Log: slog.New(slog.NewJSONHandler(&logs, nil))}
			if tc.limiter != nil {
				h.Limiter = tc.limiter
			}
			call := base
			if tc.call != nil {
				call = tc.call(call)
			}
			ran := false
			run := func(ctx context.Context, a json.RawMessage) (json.RawMessage, error) {
				ran = true
				return tc.run(ctx, a)
			}
			out := h.Invoke(context.Background(), call, tool, run)
			if out.ToolReturned.Status != tc.status || out.Verdict != tc.verdict || ran != tc.ran {
				t.Fatalf("status %s verdict %s ran %v", out.ToolReturned.Status, out.Verdict, ran)
			}
			if (out.ToolReturned.DurationMs != nil) != tc.ran {
				t.Fatalf("durationMs present = %v, tool ran = %v", out.ToolReturned.DurationMs != nil, tc.ran)
			}
			if tc.errorCode != "" && (out.Result == nil || out.Result.Error == nil || out.Result.Error.Code != tc.errorCode) {
				t.Fatalf("result %+v, want code %s", out.Result, tc.errorCode)
			}
			if out.Result != nil && out.Result.Error != nil && len([]rune(out.Result.Error.Message)) > tool.ErrorMessageLimit {
				t.Fatalf("message longer than the limit: %q", out.Result.Error.Message)
			}
			// Failure honesty (openwop): an error's toolReturned says what
			// the result says, code and cut message; other statuses carry
			// no error object.
			if re := out.ToolReturned.Error; tc.status == StatusError {
				if re == nil || re.Code != tc.errorCode || re.Message != out.Result.Error.Message || re.Message == "" {
					t.Fatalf("toolReturned.error = %+v, result error %+v", re, out.Result.Error)
				}
			} else if re != nil {
				t.Fatalf("status %s with an error object %+v", tc.status, re)
			}
			if tc.status == StatusForbidden && strings.Join(out.RequiredScopes, ",") != "web:read" {
				t.Fatalf("required scopes %v", out.RequiredScopes)
			}
			if tc.status == StatusRateLimited && out.RetryAfter != 7*time.Second {
				t.Fatalf("retry after %s", out.RetryAfter)
			}
			if len(sink.events) != 2 {
				t.Fatalf("%d events, want toolCalled and toolReturned", len(sink.events))
			}
			called := sink.events[0].(ToolCalled)
			if called.ArgsHash == "" && tc.name != "invalid JSON" || called.Principal != "user:alice" || called.Transport != "http" || called.CallID != "c1" {
				t.Fatalf("toolCalled %+v", called)
			}
			raw, _ := json.Marshal(append(sink.events, out))
			if strings.Contains(string(raw), canary) || strings.Contains(logs.String(), canary) {
				t.Fatal("the canary secret reached an event, the outcome or a log")
			}
			if strings.Contains(string(raw), `"q"`) {
				t.Fatal("a raw argument reached an event")
			}
		})
	}
}

func TestSameArgsSameHashAcrossCalls(t *testing.T) {
	h := &Hooks{}
	tool := Tool{Name: "t", Transport: "native"}
	run := func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	a := h.Invoke(context.Background(), Call{ToolName: "t", Args: json.RawMessage(`{"a":1,"b":[true,null]}`)}, tool, run)
	b := h.Invoke(context.Background(), Call{ToolName: "t", Args: json.RawMessage(`{ "b":[true,null], "a":1.0 }`)}, tool, run)
	c := h.Invoke(context.Background(), Call{ToolName: "t", Args: json.RawMessage(`{"a":2,"b":[true,null]}`)}, tool, run)
	if a.ToolCalled.ArgsHash != b.ToolCalled.ArgsHash || a.ToolCalled.ArgsHash == c.ToolCalled.ArgsHash {
		t.Fatalf("hashes %s %s %s", a.ToolCalled.ArgsHash, b.ToolCalled.ArgsHash, c.ToolCalled.ArgsHash)
	}
}

// TestVia: what made the call goes on toolCalled beside the tool's
// transport, and the tool routes' calls (no Via) keep the RFC 0064 shape.
func TestVia(t *testing.T) {
	h := &Hooks{}
	tool := Tool{Name: "t", Transport: "http"}
	run := func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }
	for via, want := range map[string]string{
		ViaTurn: `{"type":"agent.toolCalled","agentId":"","toolName":"t","callId":"","argsHash":"%s","principal":"","transport":"http","via":"turn"}`,
		"":      `{"type":"agent.toolCalled","agentId":"","toolName":"t","callId":"","argsHash":"%s","principal":"","transport":"http"}`,
	} {
		out := h.Invoke(context.Background(), Call{ToolName: "t", Via: via}, tool, run)
		raw, _ := json.Marshal(out.ToolCalled)
		if want = fmt.Sprintf(want, out.ToolCalled.ArgsHash); string(raw) != want {
			t.Errorf("via %q: toolCalled\n %s\nwant\n %s", via, raw, want)
		}
	}
}

// TestAuthorizationRequiredIsAResult: a tool that needs a consent first
// answers with the link as its result, not an error; the event says the
// tool ran.
func TestAuthorizationRequiredIsAResult(t *testing.T) {
	sink := &recSink{}
	h := &Hooks{Sink: sink}
	link := json.RawMessage(`{"authorizationUrl":"https://idp/authorize"}`)
	out := h.Invoke(context.Background(), Call{ToolName: "whoami", CallID: "c1", Principal: "alice"}, Tool{Name: "whoami", Transport: "http"},
		func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, fmt.Errorf("wrapped: %w", &AuthorizationRequired{Authorization: link})
		})
	if out.Verdict != VerdictOK || out.Result == nil || out.Result.Status != ResultAuthorizationRequired || out.Result.Error != nil ||
		string(out.Result.Authorization) != string(link) || out.ToolReturned.Status != StatusOK || out.ToolReturned.DurationMs == nil ||
		!out.ToolReturned.Consent {
		t.Fatalf("outcome = %+v, result %+v", out, out.Result)
	}
	if len(sink.events) != 2 {
		t.Fatalf("%d events, want toolCalled and toolReturned", len(sink.events))
	}
	// A call that did its work says no consent.
	if ok := h.Invoke(context.Background(), Call{ToolName: "whoami", CallID: "c2"}, Tool{Name: "whoami", Transport: "http"}, okTool); ok.ToolReturned.Consent {
		t.Fatal("an ok call's toolReturned says consent")
	}
}

// TestHooksLogWhatTheCallerCannotSee: a refused rate-limit check and an
// event the sink dropped go to the operator's log; a call that went well
// logs nothing. Without a log, the same calls run to the same verdict.
func TestHooksLogWhatTheCallerCannotSee(t *testing.T) {
	run := func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
	for _, tc := range []struct {
		name    string
		limiter Limiter
		sink    Sink
		verdict Verdict
		logged  []string
	}{
		{"all well", &fixedLimiter{allow: true}, &recSink{}, VerdictOK, nil},
		{"limiter down", &fixedLimiter{err: errors.New("store down")}, &recSink{}, VerdictUnavailable, []string{"rate limit unavailable; call refused"}},
		{"sink failing", &fixedLimiter{allow: true}, errSink{errors.New("stream closed")}, VerdictOK, []string{"audit event not emitted", "audit event not emitted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h := &Hooks{Limiter: tc.limiter, Sink: tc.sink, Log: slog.New(slog.NewJSONHandler(&logs, nil))}
			if out := h.Invoke(context.Background(), Call{ToolName: "t"}, Tool{Name: "t"}, run); out.Verdict != tc.verdict {
				t.Fatalf("verdict %s, want %s", out.Verdict, tc.verdict)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				var line struct{ Msg string }
				if l != "" && json.Unmarshal([]byte(l), &line) == nil {
					got = append(got, line.Msg)
				}
			}
			if strings.Join(got, "|") != strings.Join(tc.logged, "|") {
				t.Fatalf("logged %q, want %q", got, tc.logged)
			}
			h.Log = nil
			if out := h.Invoke(context.Background(), Call{ToolName: "t"}, Tool{Name: "t"}, run); out.Verdict != tc.verdict {
				t.Fatalf("without a log: verdict %s, want %s", out.Verdict, tc.verdict)
			}
		})
	}
}

// TestToolErrorScrubsEveryKnownSecret: each known secret in a tool's error
// message is replaced, and an empty known value changes nothing.
func TestToolErrorScrubsEveryKnownSecret(t *testing.T) {
	h := &Hooks{}
	out := h.Invoke(context.Background(), Call{ToolName: "t", KnownSecrets: []string{"", canary, "pw-0451-x"}}, Tool{Name: "t"},
		func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("401 for token " + canary + " and password pw-0451-x")
		})
	if out.Result == nil || out.Result.Error == nil || out.Result.Error.Message != "401 for token [REDACTED] and password [REDACTED]" {
		t.Fatalf("result %+v", out.Result)
	}
}
