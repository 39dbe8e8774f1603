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
