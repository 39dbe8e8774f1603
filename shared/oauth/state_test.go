package oauth

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"
)

// signedBody is the state c issues for the payload json: correctly signed,
// whatever json holds.
func signedBody(c *StateCodec, json string) string {
	return c.sign(base64.RawURLEncoding.EncodeToString([]byte(json)))
}

const testSessionID = "as-0123456789abcdef0123456789abcdef"

func TestStateCodec(t *testing.T) {
	k1 := []byte(strings.Repeat("1", 32))
	k2 := []byte(strings.Repeat("2", 32))
	c, err := NewStateCodec([][]byte{k1})
	if err != nil {
		t.Fatal(err)
	}
	id := testSessionID
	s := c.Encode(id, time.Unix(100, 0))
	p, err := c.Parse(s)
	if err != nil || p.SessionID != id || p.IssuedAt != 100 || p.Nonce == "" {
		t.Fatalf("round trip: %+v %v", p, err)
	}
	if c.Encode(id, time.Unix(100, 0)) == s {
		t.Fatal("two states for one session are equal")
	}
	rotated, _ := NewStateCodec([][]byte{k2, k1})
	if _, err := rotated.Parse(s); err != nil {
		t.Fatal("state signed before a rotation no longer verifies")
	}
	other, _ := NewStateCodec([][]byte{k2})
	body, sig, _ := strings.Cut(s, ".")

	// Correctly signed, but with its payload padded (unknown fields are
	// ignored) to a chosen length: only the length can refuse it.
	padded := func(n int) string {
		for pad := 0; ; pad++ {
			st := signedBody(c, `{"sid":"`+id+`","n":"00","iat":100,"x":"`+strings.Repeat("x", pad)+`"}`)
			if len(st) >= n {
				return st
			}
		}
	}
	atLimit, overLimit := padded(maxStateLen), padded(maxStateLen+1)
	if len(atLimit) != maxStateLen {
		t.Fatalf("padded state is %d bytes, want exactly %d", len(atLimit), maxStateLen)
	}
	if _, err := c.Parse(atLimit); err != nil {
		t.Fatalf("a signed state of exactly %d bytes is refused: %v", maxStateLen, err)
	}

	for name, bad := range map[string]string{
		"empty":            "",
		"no signature":     body,
		"other key":        other.Encode(id, time.Now()),
		"swapped body":     strings.Split(other.Encode(id, time.Now()), ".")[0] + "." + sig,
		"bad base64":       "!!!." + sig,
		"too long":         overLimit,
		"much too long":    padded(4 * maxStateLen),
		"truncated sig":    s[:len(s)-3],
		"dots":             "...",
		"newline in sig":   body + "." + sig[:10] + "\n" + sig[10:],
		"signed, bad sid":  signedBody(c, `{"sid":"as-1","n":"00","iat":1}`),
		"signed, not json": signedBody(c, `{"sid":`),
	} {
		if _, err := c.Parse(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewStateCodec([][]byte{[]byte("short")}); err == nil {
		t.Fatal("short key accepted")
	}
}

// FuzzStateParse: no state that we did not issue, or that was altered in
// any byte, is ever accepted. Issued states are made here, deterministically
// (every fuzz worker rebuilds the same set), with the current key and with
// a retired one that still verifies.
func FuzzStateParse(f *testing.F) {
	current := []byte(strings.Repeat("k", 32))
	retired := []byte(strings.Repeat("r", 32))
	c, _ := NewStateCodec([][]byte{current, retired})
	old, _ := NewStateCodec([][]byte{retired})
	forger, _ := NewStateCodec([][]byte{[]byte(strings.Repeat("f", 32))})

	payload := func(sid, nonce string, iat int) string {
		return `{"sid":"` + sid + `","n":"` + nonce + `","iat":` + strconv.Itoa(iat) + `}`
	}
	issued := map[string]StatePayload{}
	for i, codec := range []*StateCodec{c, old} {
		for j, sid := range []string{testSessionID, "as-ffffffffffffffffffffffffffffffff"} {
			st := signedBody(codec, payload(sid, "0123456789abcdef0123456789abcdef", 1700000000+10*i+j))
			p, err := c.Parse(st)
			if err != nil {
				f.Fatalf("issued state refused: %v", err)
			}
			issued[st] = p
			f.Add(st)
			body, sig, _ := strings.Cut(st, ".")
			// Altered copies: each must be refused.
			f.Add(body[:5] + string(body[5]^1) + body[6:] + "." + sig)                              // one body byte
			f.Add(body + "." + sig[:len(sig)-1] + string(sig[len(sig)-1]^1))                        // the signature's last character
			f.Add(body + "." + sig[:20] + "\n" + sig[20:])                                          // a byte a lenient decoder skips
			f.Add(strings.Split(signedBody(forger, payload(sid, "00", 1)), ".")[0] + "." + sig)     // another body, our signature
			f.Add(signedBody(forger, payload(sid, "0123456789abcdef0123456789abcdef", 1700000000))) // signed by someone else
		}
	}
	f.Add("")
	f.Add("a.b")
	f.Add("eyJzaWQiOiJhcy0xIn0.AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := c.Parse(s)
		if err != nil {
			return
		}
		want, ok := issued[s]
		if !ok {
			t.Fatalf("accepted a state we did not issue: %q → %+v", s, p)
		}
		if p != want {
			t.Fatalf("state %q parsed to %+v, issued as %+v", s, p, want)
		}
	})
}
