package eventtest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// recorder is a testing.TB that notes failures instead of stopping.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

const good = `{"version":"2.0","routeKey":"GET /x","rawPath":"/x","rawQueryString":"a=1",
"headers":{"x-request-id":"r-1"},"requestContext":{"requestId":"gw-1","http":{"method":"GET","path":"/x"}},
"isBase64Encoded":false}`

func TestHTTPRequest(t *testing.T) {
	want := Request{Method: "GET", RawPath: "/x", RawQuery: "a=1", Headers: map[string]string{"x-request-id": "r-1"}, RequestID: "gw-1"}
	tests := []struct {
		name    string
		fixture string // "": no file
		want    Request
		fails   bool
	}{
		{name: "good", fixture: good, want: want},
		{name: "missing file", want: want, fails: true},
		{name: "not JSON", fixture: `{"version":`, want: want, fails: true},
		{name: "unknown key", fixture: `{"version":"2.0","rawPth":"/x"}`, want: want, fails: true},
		{name: "unknown nested key", fixture: `{"requestContext":{"http":{"verb":"GET"}}}`, want: want, fails: true},
		{name: "a field differs", fixture: good, want: Request{Method: "POST", RawPath: "/x", RawQuery: "a=1", Headers: want.Headers, RequestID: "gw-1"}, fails: true},
		{name: "base64 flag differs", fixture: good, want: Request{Method: "GET", RawPath: "/x", RawQuery: "a=1", Headers: want.Headers, RequestID: "gw-1", Base64: true}, fails: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "event.json")
			if tc.fixture != "" {
				if err := os.WriteFile(path, []byte(tc.fixture), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			r := &recorder{TB: t}
			HTTPRequest(r, path, tc.want)
			if failed := len(r.failures) > 0; failed != tc.fails {
				t.Fatalf("failed = %v, want %v (%q)", failed, tc.fails, r.failures)
			}
		})
	}
}

// A scheduled event round-trips through the EventBridge type.
func TestRoundTripScheduledEvent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "scheduled.json")
	raw := `{"version":"0","id":"e-1","detail-type":"Scheduled Event","source":"aws.events","account":"123456789012",
"time":"2026-11-24T10:15:00Z","region":"eu-west-1","resources":["arn:aws:events:eu-west-1:123456789012:rule/r"],"detail":{}}`
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	ev := RoundTrip[events.EventBridgeEvent](t, path)
	if ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" || ev.Time.IsZero() || string(ev.Detail) != "{}" {
		t.Fatalf("%+v", ev)
	}
}
