package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactsSecretKeysAndCarriesRequestAttrs(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, slog.LevelInfo)
	ctx := WithAttrs(context.Background(), slog.String("requestId", "r1"), slog.String("traceId", "t1"))
	log.InfoContext(ctx, "m",
		"access_token", "AT-SECRET", "Refresh_Token", "RT-SECRET", "code", "CODE-SECRET",
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
