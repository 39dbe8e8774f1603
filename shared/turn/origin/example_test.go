package origin_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/turn/origin"
)

// A receiver checks the signature over the raw body before it reads the
// body as JSON (VerifyBody does both), drops a delivery it has handled by
// the signed body's key — never by the unsigned X-Agentauth-Delivery
// header — and answers 2xx once it has taken the event.
func ExampleVerify() {
	secret := "the connector's secret, 32 bytes or more" // from your secret store
	seen := map[string]bool{}                            // DedupKeys handled (keep them longer than the tolerance)
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		d, err := origin.VerifyBody(secret, r.Header.Get(origin.HeaderTimestamp), string(body), r.Header.Get(origin.HeaderSignature), time.Now(), 5*time.Minute)
		switch {
		case errors.Is(err, origin.ErrReplay), errors.Is(err, origin.ErrMalformed), errors.Is(err, origin.ErrMismatch):
			fmt.Println("refused:", err)
			http.Error(w, "bad signature", http.StatusUnauthorized) // a 4xx is not retried
			return
		case seen[d.DedupKey()]:
			w.WriteHeader(http.StatusNoContent) // a retry (or a replay) of one already handled
			return
		}
		seen[d.DedupKey()] = true
		var data struct {
			Final            string `json:"final"`
			AuthorizationURL string `json:"authorizationUrl"`
		}
		_ = json.Unmarshal(d.Event.Data, &data)
		fmt.Printf("%s of %s in %v: %q%s\n", d.Event.Type, d.TurnID, d.Origin["channel"], data.Final, data.AuthorizationURL)
		w.WriteHeader(http.StatusNoContent)
	})

	// A delivery as agentauth signs it, and the same body tampered with.
	body := `{"connector":"chat-ui","swarm":"default","instanceKey":"1712345678.000100","agent":"assistant",` +
		`"turnId":"turn-9a","traceId":"4bf9","event":{"type":"turn.completed","seq":8,"at":"2026-11-24T10:00:09Z",` +
		`"data":{"final":"You are alice."}},"origin":{"connector":"chat-ui","channel":"C123"}}`
	post := func(body, signedBody, delivery string) int {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		req := httptest.NewRequest(http.MethodPost, "/hooks/agentauth", strings.NewReader(body))
		req.Header.Set(origin.HeaderTimestamp, ts)
		req.Header.Set(origin.HeaderSignature, origin.Sign(secret, ts, []byte(signedBody)))
		req.Header.Set(origin.HeaderDelivery, delivery)
		rec := httptest.NewRecorder()
		hook.ServeHTTP(rec, req)
		return rec.Code
	}
	fmt.Println(post(body, body, "turn-9a:8"))
	fmt.Println(post(strings.Replace(body, "alice", "mallory", 1), body, "turn-9a:8"))
	fmt.Println(post(body, body, "turn-9a:8"))         // the retry of a delivery already handled
	fmt.Println(post(body, body, "replayed-as-new:1")) // a replay under another delivery header: the same delivery
	// Output:
	// turn.completed of turn-9a in C123: "You are alice."
	// 204
	// refused: origin: signature does not match
	// 401
	// 204
	// 204
}
