package turnsapi_test

import (
	"net/http"
	"testing"

	"github.com/agentauth/agentauth/shared/edge/httpx"
)

// Issue 17 item 10 on the turn routes: "Auth" no longer fills "auth" (it
// decided who a turn acts for) and a duplicate key is no longer read as
// its last value; both are a 400 naming the key and where it is.
func TestTurnRoutesRefuseMiscasedAndDuplicateKeys(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name, path, body, message string
	}{
		{"event: auth in another case", postEvents, `{"agent":"assistant","text":"hi","Auth":{"subjects":{"user":"u"}}}`,
			`request body: unknown field "Auth" at $ (did you mean "auth"?)`},
		{"event: actor in another case", postEvents, `{"agent":"assistant","text":"hi","auth":{"actor":{"type":"user","ID":"alice"}}}`,
			`request body: unknown field "ID" at $.auth.actor (did you mean "id"?)`},
		{"event: duplicate auth", postEvents, `{"agent":"assistant","text":"hi","auth":{"subjects":{"user":"a"}},"auth":{"subjects":{"user":"b"}}}`,
			`request body: duplicate key "auth" at $`},
		{"event: duplicate subject", postEvents, `{"agent":"assistant","text":"hi","auth":{"subjects":{"user":"a","user":"b"}}}`,
			`request body: duplicate key "user" at $.auth.subjects`},
		{"event: duplicate origin key", postEvents, `{"agent":"assistant","text":"hi","auth":{},"origin":{"connector":"slack","thread":{"ts":"1","ts":"2"}}}`,
			`request body: duplicate key "ts" at $.origin.thread`},
		{"event: duplicate property", postEvents, `{"agent":"assistant","text":"hi","auth":{},"properties":{"k":"1","k":"2"}}`,
			`request body: duplicate key "k" at $.properties`},
		{"terminate: reason in another case", instance + "/terminate", `{"Reason":"done"}`,
			`request body: unknown field "Reason" at $ (did you mean "reason"?)`},
		{"terminate: duplicate reason", instance + "/terminate", `{"reason":"a","reason":"b"}`,
			`request body: duplicate key "reason" at $`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b httpx.ErrorBody
			rec := h.do(t, "POST", tc.path, tc.body, &b)
			if rec.Code != http.StatusBadRequest || b.Error.Code != httpx.CodeInvalidRequest || b.Error.Message != tc.message || b.Error.RequestID == "" {
				t.Fatalf("%d %+v, want 400 invalidRequest %q", rec.Code, b.Error, tc.message)
			}
		})
	}
	if n := len(h.Queue.Pending()); n != 0 {
		t.Fatalf("%d events queued from refused bodies", n)
	}
}
