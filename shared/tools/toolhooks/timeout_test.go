package toolhooks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestTimeout: Call.Timeout ends the tool's context at the deadline and
// the call in an E_TOOL_TIMEOUT result that names the limit, whether the
// tool honours its context or not; a tool that answers in time, a call
// without a limit and the caller's own cancellation are not timeouts.
// The tools block on their context or on a channel, never on a clock.
func TestTimeout(t *testing.T) {
	const limit = 20 * time.Millisecond
	release := make(chan struct{}) // holds the tool that ignores its context
	t.Cleanup(func() { close(release) })
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		cancel  bool // the caller's context is cancelled once the tool runs
		run     func(ctx context.Context, started chan<- struct{}) (json.RawMessage, error)
		code    string // "" for an ok result
		// ctxErr: the tool saw its context end with this error.
		ctxErr error
	}{
		{"a tool waiting on its context is cancelled", limit, false, func(ctx context.Context, started chan<- struct{}) (json.RawMessage, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}, CodeTimeout, context.DeadlineExceeded},
		{"a tool that fails once cancelled (an http tool) still times out", limit, false, func(ctx context.Context, started chan<- struct{}) (json.RawMessage, error) {
			close(started)
			<-ctx.Done()
			return nil, NewToolError("UpstreamUnreachable", "E_TOOL_UPSTREAM_UNREACHABLE", "GET example.com: context deadline exceeded")
		}, CodeTimeout, context.DeadlineExceeded},
		{"a tool that ignores its context is not waited for", limit, false, func(_ context.Context, started chan<- struct{}) (json.RawMessage, error) {
			close(started)
			<-release
			return json.RawMessage(`{"late":true}`), nil
		}, CodeTimeout, nil},
		{"a tool that answers in time", time.Minute, false, func(_ context.Context, started chan<- struct{}) (json.RawMessage, error) {
			close(started)
			return json.RawMessage(`{"ok":true}`), nil
		}, "", nil},
		{"a tool's own error in time stays its own", time.Minute, false, func(_ context.Context, started chan<- struct{}) (json.RawMessage, error) {
			close(started)
			return nil, errors.New("no such dish")
		}, CodeTool, nil},
		{"no limit: the tool's context has no deadline", 0, false, func(ctx context.Context, started chan<- struct{}) (json.RawMessage, error) {
			close(started)
			if _, ok := ctx.Deadline(); ok {
				return nil, errors.New("a deadline without a limit")
			}
			return json.RawMessage(`{}`), nil
		}, "", nil},
		{"the caller's cancellation is the tool's answer, not a timeout", time.Minute, true, func(ctx context.Context, started chan<- struct{}) (json.RawMessage, error) {
			close(started)
			<-ctx.Done()
			return nil, ctx.Err()
		}, CodeTool, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &recSink{}
			h := &Hooks{Sink: sink}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan struct{})
			saw := make(chan error, 1)
			run := func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
				out, err := tc.run(ctx, started)
				saw <- ctx.Err()
				return out, err
			}
			if tc.cancel {
				go func() { <-started; cancel() }()
			}
			out := h.Invoke(ctx, Call{ToolName: "slow", CallID: "c1", Timeout: tc.timeout}, Tool{Name: "slow", Transport: "native"}, run)
			code := ""
			if out.Result != nil && out.Result.Error != nil {
				code = out.Result.Error.Code
			}
			if code != tc.code {
				t.Fatalf("code %q, want %q (result %+v)", code, tc.code, out.Result)
			}
			if tc.ctxErr != nil {
				if got := <-saw; !errors.Is(got, tc.ctxErr) {
					t.Fatalf("the tool's context ended with %v, want %v", got, tc.ctxErr)
				}
			}
			if tc.code != CodeTimeout {
				return
			}
			if out.Verdict != VerdictError || out.Result.Status != StatusError || out.Result.Error.Name != "ToolTimeout" ||
				!strings.Contains(out.Result.Error.Message, limit.String()) || !strings.Contains(out.Result.Error.Message, "limits.toolTimeoutSeconds") {
				t.Fatalf("outcome %s, result %+v", out.Verdict, out.Result.Error)
			}
			if out.ToolReturned.Status != StatusError || out.ToolReturned.Error == nil || out.ToolReturned.Error.Code != CodeTimeout || out.ToolReturned.DurationMs == nil {
				t.Fatalf("toolReturned %+v", out.ToolReturned)
			}
			if len(sink.events) != 2 {
				t.Fatalf("%d events, want toolCalled and toolReturned", len(sink.events))
			}
		})
	}
}

// TestTimeoutMessage names the limit in whole seconds as the bundle
// writes it, else as a duration.
func TestTimeoutMessage(t *testing.T) {
	for limit, want := range map[time.Duration]string{
		time.Second:             "time limit of 1 s (the agent's limits.toolTimeoutSeconds)",
		60 * time.Second:        "time limit of 60 s (",
		1500 * time.Millisecond: "time limit of 1.5s (",
	} {
		if got := timeoutMessage(limit); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want it to hold %q", limit, got, want)
		}
	}
}

// TestNotInCatalogSuggests: the refusal of a tool outside the step's
// catalog says what to do instead (Goondan's ToolError.suggestion), in the
// result the model reads.
func TestNotInCatalogSuggests(t *testing.T) {
	h := &Hooks{}
	out := h.Invoke(context.Background(), Call{ToolName: "order", Catalog: []string{"echo"}, Via: ViaTurn}, Tool{Name: "order"},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil })
	if out.Result == nil || out.Result.Error == nil || out.Result.Error.Code != CodeNotInCatalog {
		t.Fatalf("result %+v", out.Result)
	}
	raw, _ := json.Marshal(out.Result)
	var r struct {
		Error struct {
			Suggestion string `json:"suggestion"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || !strings.Contains(r.Error.Suggestion, "step.tools") {
		t.Fatalf("result %s: want error.suggestion naming step.tools", raw)
	}
	// A direct call has no step: its refusal names what the caller may
	// see, and the nearest of those names.
	out = h.Invoke(context.Background(), Call{ToolName: "ecoh", Catalog: []string{"echo", "order"}}, Tool{Name: "ecoh"},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil })
	if e := out.Result.Error; e == nil || e.Suggestion != SuggestionNotVisible || e.Message != `tool "ecoh" is not among the tools this caller may see (did you mean "echo"?)` {
		t.Fatalf("a direct call's refusal: %+v", out.Result)
	}
	// Other error results carry none.
	out = h.Invoke(context.Background(), Call{ToolName: "echo"}, Tool{Name: "echo"},
		func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, errors.New("boom") })
	if raw, _ := json.Marshal(out.Result); strings.Contains(string(raw), "suggestion") {
		t.Fatalf("a tool's own error with a suggestion: %s", raw)
	}
}
