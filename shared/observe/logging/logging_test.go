package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

func TestRedactsSecretKeysAndCarriesRequestAttrs(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo)
	ctx := WithAttrs(context.Background(), slog.String("requestId", "r1"), slog.String("traceId", "t1"))
	log.InfoContext(ctx, "m",
		"access_token", "AT-SECRET", "Refresh_Token", "RT-SECRET", "authorization_code", "CODE-SECRET",
		"state", "STATE-SECRET", "client_secret", "CS-SECRET", "Authorization", "Bearer X-SECRET",
		"grantId", "grant-1")
	log.With("component", "x").WithGroup("g").InfoContext(ctx, "grouped", "token", "T-SECRET")
	out := buf.String()
	if strings.Contains(out, "SECRET") {
		t.Fatalf("secret in log: %s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first["requestId"] != "r1" || first["traceId"] != "t1" || first["grantId"] != "grant-1" || first["access_token"] != "[REDACTED]" {
		t.Fatalf("line %v", first)
	}
	if !strings.Contains(lines[1], `"requestId":"r1"`) {
		t.Fatalf("derived logger lost the request id: %s", lines[1])
	}
}

// The key "code" is an error result's code almost everywhere; the OAuth
// authorization code travels in the callback query, so that is where it is
// redacted: in any URL or query string a log line carries (issue 9.3).
func TestCodeKeyIsKeptAuthorizationCodeIsNot(t *testing.T) {
	const authCode, state = "AUTHCODE-SECRET-1", "STATE-SECRET-2"
	cb, _ := url.Parse("https://agentauth.example/oauth/callback/app?code=" + authCode + "&state=" + state + "&iss=https%3A%2F%2Fidp")
	for _, tc := range []struct {
		name string
		attr slog.Attr
		keep string // must still be in the line
	}{
		{"error result code", slog.String("code", "refreshFailed"), `"code":"refreshFailed"`},
		{"callback URL as a string", slog.String("url", cb.String()), `iss=https%3A%2F%2Fidp`},
		{"raw query", slog.String("query", cb.RawQuery), `iss=`},
		{"query upper case", slog.String("query", "CODE="+authCode+"&State="+state), `CODE=[REDACTED]`},
		{"query after a path", slog.String("request", "GET /oauth/callback/app?state="+state+";code="+authCode+" HTTP/1.1"), `GET /oauth/callback/app?state=[REDACTED]`},
		{"*url.URL", slog.Any("url", cb), `/oauth/callback/app`},
		{"url.URL", slog.Any("url", *cb), `/oauth/callback/app`},
		{"url.Values", slog.Any("query", cb.Query()), `https://idp`},
		{"error quoting the URL", slog.Any("err", &url.Error{Op: "Get", URL: cb.String(), Err: errors.New("connection refused")}), `connection refused`},
		{"fragment", slog.String("url", "https://app.example/cb#state="+state+"&access_token="+authCode), `https://app.example/cb#state=[REDACTED]`},
		{"secret key names", slog.String("authorization_code", authCode), `"authorization_code":"[REDACTED]"`},
		{"a word ending in code", slog.String("msg2", "errorcode="+authCode), authCode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			New(&buf, slog.LevelInfo).Info("m", tc.attr)
			out := buf.String()
			if tc.keep != authCode && (strings.Contains(out, authCode) || strings.Contains(out, state)) {
				t.Fatalf("authorization code or state in the log: %s", out)
			}
			if !strings.Contains(out, tc.keep) {
				t.Fatalf("log %s lost %q", out, tc.keep)
			}
		})
	}
	t.Run("the message itself", func(t *testing.T) {
		var buf bytes.Buffer
		New(&buf, slog.LevelInfo).Info("callback " + cb.String())
		if strings.Contains(buf.String(), authCode) || strings.Contains(buf.String(), state) {
			t.Fatalf("authorization code in the message: %s", buf.String())
		}
	})
}

// TestContextAttrsNeverRepeatAKey: a line holds each key once — the
// record's or the logger's value wins over the context's, and a later
// context attribute over an earlier one.
func TestContextAttrsNeverRepeatAKey(t *testing.T) {
	request := WithAttrs(context.Background(), slog.String("requestId", "r1"), slog.String("traceId", "from-request"))
	for _, tc := range []struct {
		name string
		log  func(l *slog.Logger)
		want map[string]string // key → the one value of the line
	}{
		{"the context's attributes are added", func(l *slog.Logger) { l.InfoContext(request, "m") },
			map[string]string{"requestId": "r1", "traceId": "from-request"}},
		{"the record's own value wins", func(l *slog.Logger) { l.InfoContext(request, "m", "traceId", "explicit") },
			map[string]string{"requestId": "r1", "traceId": "explicit"}},
		{"the logger's With value wins", func(l *slog.Logger) { l.With("traceId", "with").InfoContext(request, "m") },
			map[string]string{"requestId": "r1", "traceId": "with"}},
		{"a later context attribute replaces an earlier one", func(l *slog.Logger) {
			l.InfoContext(WithTraceID(request, "turn-trace"), "m")
		}, map[string]string{"requestId": "r1", "traceId": "turn-trace"}},
		{"With keys outside a group do not hide the context's inside it", func(l *slog.Logger) {
			l.With("traceId", "outer").WithGroup("g").InfoContext(request, "m")
		}, map[string]string{"traceId": "outer", "g.traceId": "from-request", "g.requestId": "r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			tc.log(New(&buf, slog.LevelInfo))
			line := buf.String()
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
			for key, want := range tc.want {
				var got any = rec
				for _, part := range strings.Split(key, ".") {
					m, _ := got.(map[string]any)
					got = m[part]
				}
				if got != want {
					t.Errorf("%s = %v, want %s: %s", key, got, want, line)
				}
				// Each key once per namespace: as often as the want list names it.
				leaf, times := leafOf(key), 0
				for k := range tc.want {
					if leafOf(k) == leaf {
						times++
					}
				}
				if n := strings.Count(line, `"`+leaf+`":`); n != times {
					t.Errorf("%q appears %d times, want %d: %s", leaf, n, times, line)
				}
			}
		})
	}
}

func leafOf(key string) string { return key[strings.LastIndex(key, ".")+1:] }
