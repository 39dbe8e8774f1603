package origin

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The headers of a delivery.
const (
	// HeaderTimestamp is the time of the attempt, in Unix seconds: it is
	// signed with the body, so a receiver can refuse a replay.
	HeaderTimestamp = "X-Agentauth-Timestamp"
	// HeaderSignature is "v1=" and the lowercase hex HMAC-SHA256, keyed
	// with the Connector's secret, of timestamp + "." + body.
	HeaderSignature = "X-Agentauth-Signature"
	// HeaderDelivery is "<turnId>:<seq>": the same on every attempt of one
	// delivery, for logs and support. No signature covers it, so a
	// receiver must not deduplicate on it (a replay may carry any value):
	// the signed body's turnId and event.seq are the delivery's identity
	// (VerifyBody, Body.DedupKey).
	HeaderDelivery = "X-Agentauth-Delivery"
	// UserAgent is the User-Agent of every delivery.
	UserAgent = "agentauth-webhook/1"
)

// DefaultTolerance is the replay window Verify uses when it is given none:
// a delivery signed more than this long before (or after) the receiver's
// clock is refused.
const DefaultTolerance = 5 * time.Minute

// signaturePrefix names the scheme: HMAC-SHA256 over timestamp "." body.
const signaturePrefix = "v1="

// Why Verify refused a delivery. The errors say which rule failed and
// never carry the secret or the expected signature.
var (
	// ErrMalformed: a header is not of the documented form.
	ErrMalformed = errors.New("origin: malformed signature header")
	// ErrReplay: the timestamp is outside the tolerance.
	ErrReplay = errors.New("origin: timestamp outside the tolerance")
	// ErrMismatch: the signature is not the body's under this secret.
	ErrMismatch = errors.New("origin: signature does not match")
)

// Sign is the signature header value of body sent at timestamp (Unix
// seconds, as in HeaderTimestamp): "v1=" + hex(HMAC-SHA256(secret,
// timestamp + "." + body)).
func Sign(secret, timestamp string, body []byte) string {
	return signaturePrefix + hex.EncodeToString(mac(secret, timestamp, body))
}

func mac(secret, timestamp string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write([]byte(timestamp))
	h.Write([]byte{'.'})
	h.Write(body)
	return h.Sum(nil)
}

// Verify checks a delivery as its receiver gets it: the raw body, the
// HeaderTimestamp and HeaderSignature values, the receiver's clock and
// the replay window (DefaultTolerance when 0 or less). It answers nil,
// or an error wrapping ErrMalformed, ErrReplay or ErrMismatch. The
// comparison takes constant time. A receiver should also drop a delivery
// it has handled — a retry is signed anew, and a replay inside the window
// verifies — by the signed body's key (VerifyBody, Body.DedupKey), never
// by HeaderDelivery, which is not signed.
func Verify(secret, timestamp, body, signature string, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	ts, err := parseTimestamp(timestamp)
	if err != nil {
		return err
	}
	hexSig, ok := strings.CutPrefix(signature, signaturePrefix)
	if !ok {
		return fmt.Errorf("%w: %s does not start with %q", ErrMalformed, HeaderSignature, signaturePrefix)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size || hexSig != strings.ToLower(hexSig) {
		return fmt.Errorf("%w: %s is not %q and %d lowercase hex digits", ErrMalformed, HeaderSignature, signaturePrefix, 2*sha256.Size)
	}
	if age := now.Sub(time.Unix(ts, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed at %s, %s from now (tolerance %s)", ErrReplay, time.Unix(ts, 0).UTC().Format(time.RFC3339), age.Round(time.Second), tolerance)
	}
	if !hmac.Equal(got, mac(secret, timestamp, []byte(body))) {
		return ErrMismatch
	}
	return nil
}

// VerifyBody is Verify, and then the body read as a delivery: its TurnID
// and Event.Seq, which the signature covers, name the delivery
// (Body.DedupKey). A body that verifies but is not a delivery's is
// ErrMalformed.
func VerifyBody(secret, timestamp, body, signature string, now time.Time, tolerance time.Duration) (Body, error) {
	if err := Verify(secret, timestamp, body, signature, now, tolerance); err != nil {
		return Body{}, err
	}
	var b Body
	if err := json.Unmarshal([]byte(body), &b); err != nil || b.TurnID == "" {
		return Body{}, fmt.Errorf("%w: the signed body is not a delivery (no turnId)", ErrMalformed)
	}
	return b, nil
}

// parseTimestamp reads Unix seconds written as decimal digits only (no
// sign, space or fraction: the value is signed as written).
func parseTimestamp(s string) (int64, error) {
	if s == "" || len(s) > 12 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%w: %s is not Unix seconds", ErrMalformed, HeaderTimestamp)
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s is not Unix seconds", ErrMalformed, HeaderTimestamp)
	}
	return ts, nil
}
