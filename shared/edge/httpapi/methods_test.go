package httpapi

import (
	"testing"
)

// Issue 18: a known route asked with another method is 405 with an Allow
// header and the one error body, not the catch-all's 404.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/v1/oauth/token", "POST"},
		{"DELETE", "/v1/oauth/revoke", "POST"},
		{"POST", "/v1/oauth/sessions/as-1", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
		{"POST", "/oauth/callback/team", "GET, HEAD"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rec := f.do(tc.method, tc.path, "", nil)
			if rec.Code != 405 || rec.Header().Get("Allow") != tc.allow {
				t.Fatalf("%d Allow %q, want 405 Allow %q: %s", rec.Code, rec.Header().Get("Allow"), tc.allow, rec.Body)
			}
			e := decode(t, rec)["error"].(map[string]any)
			if e["code"] != "methodNotAllowed" || e["requestId"] == "" {
				t.Fatalf("body %s", rec.Body)
			}
		})
	}
	if rec := f.do("GET", "/v1/no-such-route", "", nil); rec.Code != 404 || rec.Header().Get("Allow") != "" {
		t.Fatalf("unknown path: %d %s", rec.Code, rec.Body)
	}
}
