package origin

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	now := time.Unix(1_800_000_000, 0)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := `{"connector":"chat","event":{"type":"turn.completed","seq":7}}`
	sig := Sign(secret, ts, []byte(body))

	// An independent computation of the documented scheme: a known answer
	// (python3 -c 'import hmac,hashlib; print(hmac.new(b"k", b"1.{}", hashlib.sha256).hexdigest())').
	if got := Sign("k", "1", []byte("{}")); got != "v1=3dd49b2593d0f9a349e9e71c4bde3e2b862c2be4003fe9b4ba81332029310158" {
		t.Fatalf("Sign = %q", got)
	}

	flip := func(s string) string { // the last hex digit changed
		b := []byte(s)
		if b[len(b)-1] == '0' {
			b[len(b)-1] = '1'
		} else {
			b[len(b)-1] = '0'
		}
		return string(b)
	}
	for _, tc := range []struct {
		name                  string
		secret, ts, body, sig string
		now                   time.Time
		tolerance             time.Duration
		want                  error
	}{
		{"as signed", secret, ts, body, sig, now, 0, nil},
		{"received 4 minutes later, default tolerance", secret, ts, body, sig, now.Add(4 * time.Minute), 0, nil},
		{"the body changed", secret, ts, strings.Replace(body, "7", "8", 1), sig, now, 0, ErrMismatch},
		{"a byte added to the body", secret, ts, body + " ", sig, now, 0, ErrMismatch},
		{"the timestamp changed", secret, strconv.FormatInt(now.Unix()+1, 10), body, sig, now, 0, ErrMismatch},
		{"another secret", secret + "x", ts, body, sig, now, 0, ErrMismatch},
		{"the signature changed", secret, ts, body, flip(sig), now, 0, ErrMismatch},
		{"replayed after the tolerance", secret, ts, body, sig, now.Add(5*time.Minute + time.Second), 0, ErrReplay},
		{"replayed after a shorter tolerance", secret, ts, body, sig, now.Add(31 * time.Second), 30 * time.Second, ErrReplay},
		{"within a longer tolerance", secret, ts, body, sig, now.Add(9 * time.Minute), 10 * time.Minute, nil},
		{"signed in the future", secret, ts, body, sig, now.Add(-6 * time.Minute), 0, ErrReplay},
		{"no v1= prefix", secret, ts, body, strings.TrimPrefix(sig, "v1="), now, 0, ErrMalformed},
		{"another scheme", secret, ts, body, "v2=" + strings.TrimPrefix(sig, "v1="), now, 0, ErrMalformed},
		{"uppercase hex", secret, ts, body, "v1=" + strings.ToUpper(strings.TrimPrefix(sig, "v1=")), now, 0, ErrMalformed},
		{"short hex", secret, ts, body, sig[:len(sig)-2], now, 0, ErrMalformed},
		{"not hex", secret, ts, body, sig[:len(sig)-1] + "g", now, 0, ErrMalformed},
		{"two signatures", secret, ts, body, sig + "," + sig, now, 0, ErrMalformed},
		{"empty signature", secret, ts, body, "", now, 0, ErrMalformed},
		{"empty timestamp", secret, "", body, sig, now, 0, ErrMalformed},
		{"signed timestamp", secret, "+" + ts, body, Sign(secret, "+"+ts, []byte(body)), now, 0, ErrMalformed},
		{"fractional timestamp", secret, ts + ".5", body, Sign(secret, ts+".5", []byte(body)), now, 0, ErrMalformed},
		{"milliseconds", secret, ts + "000", body, Sign(secret, ts+"000", []byte(body)), now, 0, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.secret, tc.ts, tc.body, tc.sig, tc.now, tc.tolerance)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if err != nil && (strings.Contains(err.Error(), tc.secret) || strings.Contains(err.Error(), strings.TrimPrefix(sig, "v1="))) {
				t.Errorf("the error %q shows the secret or the expected signature", err)
			}
		})
	}
}

// Issue 17 item 12: X-Agentauth-Delivery is not signed, so a replay inside
// the tolerance may carry any value there; the key a receiver
// deduplicates on is the signed body's turnId and event.seq
// (VerifyBody, Body.DedupKey), which a replay cannot change.
func TestReplayUnderAnotherDeliveryHeaderIsTheSameDelivery(t *testing.T) {
	rv := newReceiver(t)
	var logs logBuffer
	d := start(t, testConfig(&logs, connector("chat", rv.srv.URL)))
	d.Notify(context.Background(), aTurn("turn-1", map[string]any{"connector": "chat"}), turnEvents("turn-1")[4:5])
	closeNow(t, d)
	got := rv.deliveries()
	if len(got) != 1 {
		t.Fatalf("%d deliveries", len(got))
	}
	sent := got[0]
	// The receiver of the recipe: verify, then drop a key it has handled.
	seen := map[string]int{}
	receive := func(h http.Header, body []byte) (string, error) {
		b, err := VerifyBody(testSecret, h.Get(HeaderTimestamp), string(body), h.Get(HeaderSignature), time.Now(), 0)
		if err != nil {
			return "", err
		}
		seen[b.DedupKey()]++
		return b.DedupKey(), nil
	}
	first, err := receive(sent.header, sent.body)
	if err != nil || first != sent.header.Get(HeaderDelivery) || first != DeliveryID("turn-1", turnEvents("turn-1")[4].Seq) {
		t.Fatalf("key %q (%v), want the delivery's id %q", first, err, sent.header.Get(HeaderDelivery))
	}
	for _, delivery := range []string{"", "turn-1:999", "someone-else:1", sent.header.Get(HeaderDelivery) + "x"} {
		replay := sent.header.Clone()
		replay.Set(HeaderDelivery, delivery)
		key, err := receive(replay, sent.body)
		if err != nil || key != first {
			t.Fatalf("a replay under %q: key %q (%v), want %q", delivery, key, err, first)
		}
	}
	if len(seen) != 1 || seen[first] != 5 {
		t.Fatalf("keys seen %v: every replay must be the one delivery", seen)
	}
}

func TestVerifyBodyRefuses(t *testing.T) {
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	body := `{"turnId":"turn-9a","event":{"type":"turn.completed","seq":8}}`
	for _, tc := range []struct {
		name, body, sig string
		want            error
	}{
		{"a delivery", body, Sign(testSecret, ts, []byte(body)), nil},
		{"another body", strings.Replace(body, "8", "9", 1), Sign(testSecret, ts, []byte(body)), ErrMismatch},
		{"signed, not JSON", "not json", Sign(testSecret, ts, []byte("not json")), ErrMalformed},
		{"signed, no turn", `{"event":{"seq":8}}`, Sign(testSecret, ts, []byte(`{"event":{"seq":8}}`)), ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := VerifyBody(testSecret, ts, tc.body, tc.sig, time.Now(), 0)
			switch {
			case tc.want == nil && (err != nil || b.DedupKey() != "turn-9a:8"):
				t.Fatalf("%v, key %q", err, b.DedupKey())
			case tc.want != nil && (!errors.Is(err, tc.want) || b.TurnID != ""):
				t.Fatalf("%v %+v, want %v and no body", err, b, tc.want)
			}
		})
	}
}
