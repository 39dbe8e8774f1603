package main

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestDebugAddrLoopbackOnly: profiles need no credential, so --debug-addr
// takes loopback addresses only, and says so.
func TestDebugAddrLoopbackOnly(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:6060", true}, {"[::1]:0", true}, {"localhost:6060", true},
		{"0.0.0.0:6060", false}, {":6060", false}, {"10.0.0.5:6060", false}, {"example.com:6060", false}, {"6060", false},
	} {
		err := checkDebugAddr(tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.addr, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--debug-addr") {
			t.Errorf("%q: the error does not name the flag: %v", tc.addr, err)
		}
	}
	if _, _, err := runCmd(t, "serve", "--debug-addr", "0.0.0.0:6060"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("serve with a public debug address: %v", err)
	}
}

// TestDebugVars: /debug/vars answers the goroutine count and the heap as
// JSON; the pprof index is there.
func TestDebugVars(t *testing.T) {
	h := debugHandler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/vars", nil))
	var v map[string]float64
	if rec.Code != 200 || json.Unmarshal(rec.Body.Bytes(), &v) != nil || v["goroutines"] < 1 || v["heapAlloc"] <= 0 {
		t.Fatalf("/debug/vars: %d %s", rec.Code, rec.Body)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/debug/pprof/", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "goroutine") {
		t.Fatalf("/debug/pprof/: %d", rec.Code)
	}
}
