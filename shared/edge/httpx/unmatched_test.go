package httpx

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// Issue 18: a known path with a wrong method is 405 with Allow, in the one
// error body — a catch-all "/" route made it 404.
func TestUnmatchedAnswers405WithAllow(t *testing.T) {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }
	mux.HandleFunc("POST /v1/oauth/token", ok)
	mux.HandleFunc("GET /v1/items/{id}", ok)
	mux.HandleFunc("DELETE /v1/items/{id}", ok)
	mux.Handle("/", Unmatched(mux))
	for _, tc := range []struct {
		method, path string
		status       int
		allow, code  string
	}{
		{"GET", "/v1/oauth/token", 405, "POST", CodeMethodNotAllowed},
		{"PUT", "/v1/items/x", 405, "GET, HEAD, DELETE", CodeMethodNotAllowed},
		{"POST", "/v1/items/x", 405, "GET, HEAD, DELETE", CodeMethodNotAllowed},
		{"HEAD", "/v1/items/x", 204, "", ""}, // GET serves HEAD
		{"GET", "/v1/items/x", 204, "", ""},
		{"GET", "/v1/nothing", 404, "", CodeNotFound},
		{"POST", "/", 404, "", CodeNotFound},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			Observe(nil, mux).ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.status || rec.Header().Get("Allow") != tc.allow {
				t.Fatalf("%d Allow %q, want %d Allow %q: %s", rec.Code, rec.Header().Get("Allow"), tc.status, tc.allow, rec.Body)
			}
			if tc.code == "" {
				return
			}
			var b ErrorBody
			if err := Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Error.Code != tc.code || b.Error.RequestID == "" ||
				rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("body %s (%v), want the one error body with code %s", rec.Body, err, tc.code)
			}
			if tc.status == 405 && b.Error.Message != tc.path+" takes "+tc.allow+", not "+tc.method {
				t.Fatalf("message %q", b.Error.Message)
			}
		})
	}
}
