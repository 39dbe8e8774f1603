package toolsapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// downLimiter is a rate limit store that cannot be reached.
type downLimiter struct{}

func (downLimiter) Allow(context.Context, string, string) (bool, time.Duration, error) {
	return false, 0, errors.New("dial tcp 10.0.0.9:443: connection refused")
}

func TestHookVerdictsMapToHTTP(t *testing.T) {
	for _, tc := range []struct {
		verdict toolhooks.Verdict
		status  int
	}{
		{toolhooks.VerdictOK, 200},
		{toolhooks.VerdictError, 200},
		{toolhooks.VerdictForbidden, 403},
		{toolhooks.VerdictRateLimited, 429},
		{toolhooks.VerdictUnavailable, 503},
		{"", 500},
		{"something-new", 500},
	} {
		t.Run(string(tc.verdict), func(t *testing.T) {
			if got := hookStatus(tc.verdict); got != tc.status {
				t.Fatalf("hookStatus(%q) = %d, want %d", tc.verdict, got, tc.status)
			}
		})
	}
	// Through the route: a rate limit that cannot be checked refuses the
	// call with 503 and a generic message, the result says why.
	hs := newHarness(t, defaultVerifier(), false)
	hs.api.cfg.Hooks.Limiter = downLimiter{}
	rec, m := call(t, hs.h, "POST", "/v1/tools/invoke", "alice", `{"toolName":"echo","args":{}}`)
	e, _ := m["error"].(map[string]any)
	if rec.Code != 503 || e["code"] != "unavailable" || m["result"].(map[string]any)["error"].(map[string]any)["code"] != "E_TOOL_RATE_LIMIT_UNAVAILABLE" ||
		m["toolReturned"].(map[string]any)["status"] != "error" || strings.Contains(rec.Body.String(), "10.0.0.9") {
		t.Fatalf("limit down: %d %v", rec.Code, m)
	}
}
