package oauth

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

// The provider's error parameter is attacker-chosen text (anyone can send
// the browser to the callback with a valid-looking query): only a plain
// RFC 6749-style code may reach the status reason, the CallbackError (the
// page shows its ProviderCode) or a log line (issue 9.21).
func TestCallbackProviderErrorIsFiltered(t *testing.T) {
	const canary = "ZQXJ" // in every hostile value; must appear nowhere
	for _, tc := range []struct {
		name, value, want string
	}{
		{"plain code", "access_denied", "access_denied"},
		{"longest code", strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{"html", "<script>alert('" + canary + "')</script>", "unknown_error"},
		{"newline forging a log line", "access_denied\n{\"level\":\"ERROR\",\"msg\":\"" + canary + "\"}", "unknown_error"},
		{"carriage return", "access_denied\r" + canary, "unknown_error"},
		{"control characters", "\x00\x1b[31m" + canary + "\x07", "unknown_error"},
		{"JSON-breaking quotes", `access_denied","admin":true,"x":"` + canary, "unknown_error"},
		{"invalid UTF-8", "access_denied\xff\xfe" + canary, "unknown_error"},
		{"very long", strings.Repeat(canary, 5000), "unknown_error"},
		{"one past the longest code", strings.Repeat("a", 65) + canary, "unknown_error"},
		{"upper case", "ACCESS_DENIED_" + canary, "unknown_error"},
		{"spaces", "access denied " + canary, "unknown_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			res := h.request("global")
			_, state := h.p.approve(res.AuthorizationURL, "team")
			q := url.Values{"state": {state}, "error": {tc.value},
				"error_description": {"<b>" + canary + "</b>\n"}, "error_uri": {"javascript:" + canary}}
			_, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], q)
			var ce *CallbackError
			if !errors.As(err, &ce) || ce.Reason != ReasonProviderError || ce.ProviderCode != tc.want {
				t.Fatalf("err = %#v, want %s with provider code %q", err, ReasonProviderError, tc.want)
			}
			st, err := h.m.SessionStatus(context.Background(), res.AuthSessionID, 0)
			if err != nil || st.Status != domain.SessionFailed || st.StatusReason != ReasonProviderError+":"+tc.want {
				t.Fatalf("session status %+v %v, want failed with reason %s:%s", st, err, ReasonProviderError, tc.want)
			}
			stored, _ := h.store.GetSession(context.Background(), res.AuthSessionID)
			for where, text := range map[string]string{"error text": ce.Error(), "status reason": stored.StatusReason, "logs": h.logs.String()} {
				if strings.Contains(text, canary) || strings.Contains(text, "<") || strings.ContainsAny(text, "\x00\x1b\r\xff") {
					t.Fatalf("provider text reached the %s: %q", where, text)
				}
			}
		})
	}
}
