package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type sample struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
	Inner *struct {
		Tag string `json:"tag"`
	} `json:"inner"`
}

// serve runs h behind Observe, as every route runs.
func serve(h http.HandlerFunc, req *http.Request) (*httptest.ResponseRecorder, ErrorBody) {
	rec := httptest.NewRecorder()
	Observe(nil, h).ServeHTTP(rec, req)
	var b ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &b)
	return rec, b
}

func TestDecodeJSON(t *testing.T) {
	const limit = 64
	for _, tc := range []struct {
		name, body, contentType string
		status                  int
		code, mentions          string
	}{
		{"valid", `{"name":"a","count":2}`, "application/json", 200, "", ""},
		{"no content type", `{"name":"a"}`, "", 200, "", ""},
		{"content type with charset", `{"name":"a"}`, "Application/JSON; charset=utf-8", 200, "", ""},
		{"trailing spaces", "{\"name\":\"a\"} \n\t", "", 200, "", ""},
		{"form post", `{"name":"a"}`, "application/x-www-form-urlencoded", 415, CodeUnsupportedMediaType, "application/json"},
		{"text", `{"name":"a"}`, "text/plain", 415, CodeUnsupportedMediaType, "application/json"},
		{"json look-alike type", `{"name":"a"}`, "application/jsonx", 415, CodeUnsupportedMediaType, "application/json"},
		{"over the limit", `{"name":"` + strings.Repeat("a", limit) + `"}`, "", 413, CodePayloadTooLarge, "larger than 64 bytes"},
		{"empty", ``, "", 400, CodeInvalidRequest, "empty body"},
		{"syntax", `{"name":"a",}`, "", 400, CodeInvalidRequest, "invalid JSON at byte 13"},
		{"truncated", `{"name":"a"`, "", 400, CodeInvalidRequest, "truncated JSON"},
		{"unknown field", `{"name":"a","nmae":"b"}`, "", 400, CodeInvalidRequest, `unknown field "nmae"`},
		{"unknown nested field", `{"inner":{"tag":"x","tga":"y"}}`, "", 400, CodeInvalidRequest, `unknown field "tga"`},
		{"wrong type", `{"count":"2"}`, "", 400, CodeInvalidRequest, "field count: cannot decode a JSON string into int"},
		{"wrong nested type", `{"inner":{"tag":7}}`, "", 400, CodeInvalidRequest, "field inner.tag: cannot decode a JSON number into string"},
		{"not an object", `["name"]`, "", 400, CodeInvalidRequest, "want a JSON object, not array"},
		{"trailing object", `{"name":"a"} {}`, "", 400, CodeInvalidRequest, "after the JSON object"},
		{"trailing bracket", `{"name":"a"}]`, "", 400, CodeInvalidRequest, "after the JSON object"},
		{"trailing brace", `{"name":"a"}}`, "", 400, CodeInvalidRequest, "after the JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/x", strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			var got sample
			rec, b := serve(func(w http.ResponseWriter, r *http.Request) {
				if DecodeJSON(w, r, limit, &got) {
					WriteJSON(w, 200, got)
				}
			}, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status == 200 {
				if got.Name != "a" {
					t.Fatalf("decoded %+v", got)
				}
				return
			}
			if b.Error.Code != tc.code || !strings.Contains(b.Error.Message, tc.mentions) {
				t.Fatalf("error %+v, want code %s and a message mentioning %q", b.Error, tc.code, tc.mentions)
			}
			if b.Error.RequestID == "" || b.Error.RequestID != rec.Header().Get("X-Request-Id") {
				t.Fatalf("request id %q in the body, %q in the header", b.Error.RequestID, rec.Header().Get("X-Request-Id"))
			}
		})
	}
}

func TestReadBodyLimitIsThePerRouteLimit(t *testing.T) {
	for _, tc := range []struct {
		size   int
		status int
	}{{256, 200}, {257, 413}} {
		req := httptest.NewRequest("POST", "/x", strings.NewReader(strings.Repeat("x", tc.size)))
		rec, _ := serve(func(w http.ResponseWriter, r *http.Request) {
			if b, ok := ReadBody(w, r, 256); ok {
				WriteJSON(w, 200, len(b))
			}
		}, req)
		if rec.Code != tc.status {
			t.Fatalf("%d bytes: status %d, want %d", tc.size, rec.Code, tc.status)
		}
	}
}

// failingBody is a request body whose read fails midway (a client that
// hangs up).
type failingBody struct{}

func (failingBody) Read([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

func TestReadBodyReadFailure(t *testing.T) {
	req := httptest.NewRequest("POST", "/x", failingBody{})
	rec, b := serve(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := ReadBody(w, r, 256); ok {
			t.Error("ReadBody reported a failed read as usable")
		}
	}, req)
	if rec.Code != 400 || b.Error.Code != CodeInvalidRequest || b.Error.Message != "request body could not be read" {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
}

func TestWriteError(t *testing.T) {
	const secret = "dial tcp 10.0.0.7:5432: password=hunter2"
	for _, tc := range []struct {
		name    string
		status  int
		message string
		want    string
	}{
		{"a 4xx keeps its message", 400, "field x is required", "field x is required"},
		{"a 500 is generic", 500, secret, "internal error; quote the request id when reporting it"},
		{"a 501 is generic", 501, secret, "not enabled on this server"},
		{"a 503 is generic", 503, secret, "temporarily unavailable; retry later"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/x", nil)
			req.Header.Set("X-Request-Id", "req-7")
			rec, b := serve(func(w http.ResponseWriter, r *http.Request) {
				WriteErrorDetails(w, r, tc.status, "someCode", tc.message, map[string]any{"field": "x"})
			}, req)
			if rec.Code != tc.status || b.Error.Code != "someCode" || b.Error.Message != tc.want || b.Error.RequestID != "req-7" || b.Error.Details["field"] != "x" {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if rec.Header().Get("Content-Type") != "application/json" || rec.Header().Get("Cache-Control") != "no-store" {
				t.Fatalf("headers %v", rec.Header())
			}
		})
	}
	rec, b := serve(func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, 401, CodeUnauthenticated, "a bearer token is required")
	}, httptest.NewRequest("GET", "/x", nil))
	if rec.Header().Get("WWW-Authenticate") == "" || b.Error.Details != nil || strings.Contains(rec.Body.String(), `"details"`) {
		t.Fatalf("401: %v %s", rec.Header(), rec.Body)
	}
}

func TestObserve(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	mux := http.NewServeMux()
	mux.HandleFunc("GET /boom", func(http.ResponseWriter, *http.Request) { panic("secret-panic-value") })
	mux.HandleFunc("/", NotFound)
	h := Observe(log, mux)

	req := httptest.NewRequest("GET", "/boom?code=abc", nil)
	req.Header.Set("X-Request-Id", "bad id with spaces")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	id := rec.Header().Get("X-Request-Id")
	var b ErrorBody
	_ = json.Unmarshal(rec.Body.Bytes(), &b)
	if rec.Code != 500 || b.Error.Code != CodeInternal || b.Error.RequestID != id || id == "" || strings.Contains(id, " ") {
		t.Fatalf("panic: %d %s (X-Request-Id %q)", rec.Code, rec.Body, id)
	}
	if strings.Contains(rec.Body.String(), "secret-panic-value") {
		t.Fatal("the panic value is in the answer")
	}
	if !strings.Contains(logs.String(), `"route":"/boom"`) || strings.Contains(logs.String(), "code=abc") {
		t.Fatalf("access log: %s", logs.String())
	}

	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("DELETE", "/nowhere", nil))
	_ = json.Unmarshal(rec.Body.Bytes(), &b)
	if rec.Code != 404 || b.Error.Code != CodeNotFound || b.Error.RequestID == "" {
		t.Fatalf("unmatched: %d %s", rec.Code, rec.Body)
	}
}

// TestObserveAccessLog: the access line has the status the caller got
// (the first one written; 200 when the handler only writes a body), the
// bytes written and the duration in milliseconds; a panic after the
// handler answered leaves that answer alone.
func TestObserveAccessLog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		h      http.HandlerFunc
		status int
		body   string
		minMs  float64
	}{
		{"body only", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("hello")) }, 200, "hello", 0},
		{"status then body", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(201)
			w.Write([]byte("made"))
		}, 201, "made", 0},
		{"second status ignored", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(404)
			w.WriteHeader(200)
		}, 404, "", 0},
		{"panic after answering", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(202)
			w.Write([]byte("queued"))
			panic("late")
		}, 202, "queued", 0},
		{"slow", func(w http.ResponseWriter, _ *http.Request) {
			time.Sleep(30 * time.Millisecond)
			w.WriteHeader(204)
		}, 204, "", 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			rec := httptest.NewRecorder()
			Observe(slog.New(slog.NewJSONHandler(&logs, nil)), tc.h).ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
			if rec.Code != tc.status || rec.Body.String() != tc.body {
				t.Fatalf("answer %d %q, want %d %q", rec.Code, rec.Body, tc.status, tc.body)
			}
			var line struct {
				Msg        string  `json:"msg"`
				Status     int     `json:"status"`
				Bytes      int     `json:"bytes"`
				DurationMs float64 `json:"durationMs"`
			}
			for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if err := json.Unmarshal([]byte(l), &line); err != nil {
					t.Fatalf("log line %q: %v", l, err)
				}
			}
			// A minute is far above any run of this test, and far below
			// the same duration in microseconds.
			if line.Msg != "request" || line.Status != tc.status || line.Bytes != len(tc.body) || line.DurationMs < tc.minMs || line.DurationMs > 60_000 {
				t.Fatalf("access line %+v, want status %d, %d bytes, at least %vms", line, tc.status, len(tc.body), tc.minMs)
			}
		})
	}
}

// FuzzDecodeJSON: whatever the body, the answer is the decoded value or
// one of the edge's error bodies, and an error never quotes the body's
// values.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"name":"a","count":1}`, `{"inner":{"tag":"x"}}`, `{"name":`, `[1]`, `{} {}`, `null`, `{"count":1e999}`, "\xff"} {
		f.Add(s)
	}
	const canary = "zq-canary-value-zq"
	f.Fuzz(func(t *testing.T, body string) {
		body = strings.ReplaceAll(body, "CANARY", canary)
		var got sample
		rec, b := serve(func(w http.ResponseWriter, r *http.Request) {
			if DecodeJSON(w, r, DefaultMaxBody, &got) {
				w.WriteHeader(204)
			}
		}, httptest.NewRequest("POST", "/x", strings.NewReader(`{"name":"CANARY","inner":`+body)))
		switch rec.Code {
		case 204:
		case 400, 413:
			if b.Error.Code == "" || b.Error.RequestID == "" {
				t.Fatalf("%d without the error body: %s", rec.Code, rec.Body)
			}
			if strings.Contains(rec.Body.String(), canary) {
				t.Fatalf("the answer quotes the body: %s", rec.Body)
			}
		default:
			t.Fatalf("status %d", rec.Code)
		}
	})
}
