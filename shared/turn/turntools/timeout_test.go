package turntools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/turn/engine"
)

// withToolTimeout gives the agent assistant limits.toolTimeoutSeconds: 1.
func withToolTimeout(b string) string {
	return strings.Replace(b, "  modelRef: Model/m\n  tools:", "  modelRef: Model/m\n  limits: {toolTimeoutSeconds: 1}\n  tools:", 1)
}

// slowTool is how long the slow tools take unless cancelled: longer than
// the agent's limit of 1 s (the case: a 3 s tool answered ok).
const slowTool = 3 * time.Second

// TestToolTimeout: the agent's limits.toolTimeoutSeconds ends every kind
// of tool call — an http tool's request to a real upstream slower than
// the limit is cancelled (the upstream sees it go), a native tool's
// context ends — and the model gets E_TOOL_TIMEOUT naming the limit. The
// test waits on the tools' cancellation, never on a clock.
func TestToolTimeout(t *testing.T) {
	ready := oauth.Result{Status: oauth.StatusReady, AccessToken: domain.NewSecret(tokenCanary), TokenType: "bearer"}
	for _, tc := range []struct {
		name, tool, args string
	}{
		{"http", "get_menu", `{"day":"mon"}`},
		{"native", "echo", `{"x":"` + argCanary + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cancelled := make(chan error, 1) // how the upstream's request, or the native tool's context, ended
			h := newHarnessWith(t, harnessOptions{
				bundle: withToolTimeout,
				upstream: func(w http.ResponseWriter, r *http.Request) {
					select {
					case <-r.Context().Done():
						cancelled <- r.Context().Err()
					case <-time.After(slowTool):
						_, _ = w.Write([]byte(`{"late":true}`))
					}
				},
				native: map[string]toolhooks.Invoker{"demo:echo": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
					select {
					case <-ctx.Done():
						cancelled <- ctx.Err()
						return nil, ctx.Err()
					case <-time.After(slowTool):
						return json.RawMessage(`{"late":true}`), nil
					}
				}},
			})
			h.tokens.res = ready
			in := invocation(turnOf("assistant", alice), "call-slow", tc.tool, tc.args, "echo", "get_menu")
			start := time.Now()
			out := h.tools.Invoke(context.Background(), in)
			elapsed := time.Since(start)
			if out.Kind != engine.OutcomeError || errorCode(t, out) != toolhooks.CodeTimeout {
				t.Fatalf("after %s: outcome %s %s, want an %s error result", elapsed, out.Kind, out.Result, toolhooks.CodeTimeout)
			}
			if elapsed >= slowTool {
				t.Fatalf("the call took %s with a limit of 1 s", elapsed)
			}
			for _, want := range []string{"1 s", "limits.toolTimeoutSeconds"} {
				if !strings.Contains(string(out.Result), want) {
					t.Fatalf("result %s does not name the limit (%q)", out.Result, want)
				}
			}
			select {
			case err := <-cancelled:
				if tc.name == "native" && !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("the tool's context ended with %v", err)
				}
			case <-time.After(10 * time.Second): // only a failure waits this long
				t.Fatal("the tool's request or context was not cancelled at the limit")
			}
			h.checkAudit(t, in)
			h.checkNoSecret(t, out)
		})
	}
}

// TestToolTimeoutDefault: an agent without limits gives each tool call
// the bundle's default, 60 s.
func TestToolTimeoutDefault(t *testing.T) {
	deadline := make(chan time.Duration, 1)
	h := newHarnessWith(t, harnessOptions{native: map[string]toolhooks.Invoker{"demo:echo": func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("no deadline")
		}
		deadline <- time.Until(dl)
		return json.RawMessage(`{}`), nil
	}}})
	out := h.tools.Invoke(context.Background(), invocation(turnOf("assistant", alice), "c1", "echo", `{}`, "echo"))
	if out.Kind != engine.OutcomeOK {
		t.Fatalf("outcome %s %s", out.Kind, out.Result)
	}
	if d := <-deadline; d <= 50*time.Second || d > 60*time.Second {
		t.Fatalf("the call had %s, want the default 60 s", d)
	}
}

// TestToolTimeoutReplacesTheRunners: a turn's http call is bounded by the
// agent's limit, not by the runner's own request timeout (20 s by
// default: an agent's limit of 60 s would otherwise end at 20 s). Here
// the runner's is over before any upstream could answer.
func TestToolTimeoutReplacesTheRunners(t *testing.T) {
	h := newHarnessWith(t, harnessOptions{runnerTimeout: time.Nanosecond})
	h.tokens.res = oauth.Result{Status: oauth.StatusReady, AccessToken: domain.NewSecret(tokenCanary), TokenType: "bearer"}
	out := h.tools.Invoke(context.Background(), invocation(turnOf("assistant", alice), "c1", "get_menu", `{"day":"mon"}`, "get_menu"))
	if out.Kind != engine.OutcomeOK {
		t.Fatalf("outcome %s %s", out.Kind, out.Result)
	}
}
