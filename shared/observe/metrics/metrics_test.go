package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestEMFDocument(t *testing.T) {
	var buf bytes.Buffer
	e := &EMF{W: &buf, Function: "tools", Now: func() time.Time { return time.UnixMilli(1_800_000_000_123) }}
	e.Resolution(context.Background(), Resolution{Denied: true, Tools: 0, Duration: 1500 * time.Microsecond, Route: "tools"})
	e.Resolution(context.Background(), Resolution{Tools: 7, Duration: 20 * time.Microsecond, Cached: true, Route: "invoke"})
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", buf.String())
	}
	var doc struct {
		AWS struct {
			Timestamp         int64
			CloudWatchMetrics []struct {
				Namespace  string
				Dimensions [][]string
				Metrics    []struct{ Name, Unit string }
			}
		} `json:"_aws"`
		Function    string  `json:"function"`
		Resolutions int     `json:"agent_access_resolutions"`
		Denied      int     `json:"agent_access_denied"`
		Tools       int     `json:"agent_tools_resolved"`
		Time        float64 `json:"agent_resolution_time"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &doc); err != nil {
		t.Fatal(err)
	}
	m := doc.AWS.CloudWatchMetrics
	if doc.AWS.Timestamp != 1_800_000_000_123 || len(m) != 1 || m[0].Namespace != "agentauth" || len(m[0].Metrics) != 4 ||
		m[0].Dimensions[0][0] != "function" || doc.Function != "tools" {
		t.Fatalf("EMF envelope = %+v", doc)
	}
	// Every metric named in the envelope is a top-level member (EMF rule).
	var top map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &top)
	for _, x := range m[0].Metrics {
		if _, ok := top[x.Name]; !ok {
			t.Errorf("metric %s has no value member", x.Name)
		}
	}
	if doc.Resolutions != 1 || doc.Denied != 1 || doc.Tools != 0 || doc.Time != 1.5 {
		t.Fatalf("values = %+v", doc)
	}
	_ = json.Unmarshal([]byte(lines[1]), &doc)
	if doc.Denied != 0 || doc.Tools != 7 || doc.Time != 0.02 {
		t.Fatalf("second document = %+v", doc)
	}
}

func TestLogLine(t *testing.T) {
	var buf bytes.Buffer
	Log{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}.Resolution(context.Background(), Resolution{Tools: 3, Duration: time.Millisecond, Route: "tools"})
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	if rec["msg"] != "metrics" || rec["agent_tools_resolved"] != float64(3) || rec["agent_access_resolutions"] != float64(1) || rec["agent_resolution_time"] != float64(1) {
		t.Fatalf("log record = %v", rec)
	}
}
