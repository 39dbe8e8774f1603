package toolhooks

import (
	"testing"
	"time"
)

func TestRefusalResult(t *testing.T) {
	for _, tc := range []struct {
		out  Outcome
		ok   bool
		code string
		msg  string
		secs int
	}{
		{Outcome{Verdict: VerdictForbidden, RequiredScopes: []string{"a", "b"}}, true, CodeForbidden, "the caller lacks a scope this tool requires (a b); the tool was not run", 0},
		{Outcome{Verdict: VerdictRateLimited, RetryAfter: 1500 * time.Millisecond}, true, CodeRateLimited, "too many calls of this tool; retry in 2 seconds; the tool was not run", 2},
		{Outcome{Verdict: VerdictRateLimited, RetryAfter: 0}, true, CodeRateLimited, "too many calls of this tool; retry in 1 seconds; the tool was not run", 1},
		{Outcome{Verdict: VerdictOK}, false, "", "", 0},
		{Outcome{Verdict: VerdictError}, false, "", "", 0},
	} {
		r, ok := RefusalResult(tc.out, "the caller", 1000)
		if ok != tc.ok {
			t.Fatalf("%s: ok %v", tc.out.Verdict, ok)
		}
		if !ok {
			continue
		}
		if r.Status != "error" || r.Error.Code != tc.code || r.Error.Message != tc.msg || r.Error.RetryAfterSeconds != tc.secs {
			t.Fatalf("%s: %+v", tc.out.Verdict, r.Error)
		}
	}
}
