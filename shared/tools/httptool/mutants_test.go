package httptool

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// TestIdempotencyKeyBounds: a key of visible ASCII ('!' to '~') up to 255
// bytes is sent as it is; one byte outside that range, or one byte more,
// and the call is refused before a token is fetched or the upstream is
// called.
func TestIdempotencyKeyBounds(t *testing.T) {
	for _, tc := range []struct {
		name, key string
		sent      bool
	}{
		{"the lowest and highest visible bytes", "!agentauth~", true},
		{"255 bytes", strings.Repeat("k", 255), true},
		{"256 bytes", strings.Repeat("k", 256), false},
		{"a space", "agent auth", false},
		{"DEL", "agentauth\x7f", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv, last, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1); io.WriteString(w, `{}`) })
			tk := &tokens{res: ready()}
			_, err := New(Options{Tokens: tk}).CallInvoker(tool(srv.URL, "POST", "/orders", true), Call{IdempotencyKey: tc.key})(context.Background(), json.RawMessage(`{}`))
			if tc.sent {
				if err != nil || calls.Load() != 1 || last.Header.Get("Idempotency-Key") != tc.key {
					t.Fatalf("err %v, %d upstream calls, key sent %q", err, calls.Load(), last.Header.Get("Idempotency-Key"))
				}
				return
			}
			var te *toolhooks.ToolError
			if !errors.As(err, &te) || te.Code != toolhooks.CodeTool || calls.Load() != 0 || len(tk.reqs) != 0 {
				t.Fatalf("err %v, %d upstream calls, %d token requests: want a refusal before anything runs", err, calls.Load(), len(tk.reqs))
			}
		})
	}
}

// TestShortestTokenScrubbedInEveryJSONSpelling: a token of 8 bytes, the
// shortest scrub replaces, is also found when the upstream spells it
// with JSON escapes.
func TestShortestTokenScrubbedInEveryJSONSpelling(t *testing.T) {
	const short = "k7/2xZ9p"
	for _, body := range []string{
		`{"seen":"k7\/2xZ9p"}`,
		`{"seen":"` + escapeAll(short) + `"}`,
	} {
		t.Run(body, func(t *testing.T) {
			srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
			res := ready()
			res.AccessToken = domain.NewSecret(short)
			out, err := New(Options{Tokens: &tokens{res: res}}).Invoker(tool(srv.URL, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
			var decoded struct{ Seen string }
			if err != nil || json.Unmarshal(out, &decoded) != nil || decoded.Seen != redacted {
				t.Fatalf("output %s, err %v: the 8-byte token must be scrubbed", out, err)
			}
		})
	}
}
