package httptool

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/domain"
)

// escapeAll spells every character of s as a JSON \u escape.
func escapeAll(s string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// TestJSONEscapedTokenScrubbed: an upstream that echoes the token
// JSON-escaped — `\/` for '/', `\u00XX` for any character, in a value or a
// key — passes a byte-exact scrub, and every JSON reader after us decodes
// it back into the live token. The output must hold it in no spelling
// (issue 17, item 7).
func TestJSONEscapedTokenScrubbed(t *testing.T) {
	slashy := "tok/en+" + token // a token with characters JSON may escape
	for _, tc := range []struct {
		name, tok string
		body      func(tok string) string
	}{
		{"escaped slash", slashy, func(tok string) string {
			return `{"seen":"` + strings.ReplaceAll(tok, "/", `\/`) + `"}`
		}},
		{"unicode escapes", token, func(tok string) string { return `{"seen":"` + escapeAll(tok) + `"}` }},
		{"in a key", token, func(tok string) string { return `{"` + escapeAll(tok) + `":1}` }},
		{"nested in an array", token, func(tok string) string {
			return `{"a":[1,{"b":"x ` + escapeAll(tok[:4]) + tok[4:] + ` y"}],"n":12345678901234567890}`
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, tc.body(tc.tok)) })
			res := ready()
			res.AccessToken = domain.NewSecret(tc.tok)
			out, err := New(Options{Tokens: &tokens{res: res}}).Invoker(tool(srv.URL, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var decoded any
			if err := json.Unmarshal(out, &decoded); err != nil {
				t.Fatalf("output %s is not JSON: %v", out, err)
			}
			again, _ := json.Marshal(decoded)
			if strings.Contains(string(again), tc.tok) || strings.Contains(string(out), tc.tok) || !strings.Contains(string(again), "[REDACTED]") {
				t.Fatalf("output %s decodes to %s: the token must be scrubbed", out, again)
			}
			if strings.Contains(tc.name, "array") && !strings.Contains(string(out), "12345678901234567890") {
				t.Fatalf("a number changed: %s", out)
			}
		})
	}
}

// TestScrubBodyKeepsCleanAnswers: an answer without the token is handed on
// byte for byte, escapes and all.
func TestScrubBodyKeepsCleanAnswers(t *testing.T) {
	for _, body := range []string{`{"a":"x\/y","b":"\u00e9"}`, `not json \u0041`, `[1, 2.50, "x"]`} {
		if got := scrubBody(body, token); got != body {
			t.Fatalf("%q became %q", body, got)
		}
	}
}

// FuzzScrubBody: whatever an upstream answers, nothing that decodes to
// the token is left.
func FuzzScrubBody(f *testing.F) {
	f.Add(`{"seen":"` + escapeAll(token) + `"}`)
	f.Add(`["` + token + `"]`)
	f.Add(`{"k":"a\/b"}`)
	f.Fuzz(func(t *testing.T, body string) {
		if !utf8.ValidString(body) {
			return
		}
		out := scrubBody(body, token)
		if strings.Contains(out, token) {
			t.Fatalf("token left in %q", out)
		}
		var v any
		if json.Unmarshal([]byte(out), &v) == nil {
			b, _ := json.Marshal(v)
			if strings.Contains(string(b), token) {
				t.Fatalf("%q decodes to the token", out)
			}
		}
	})
}
