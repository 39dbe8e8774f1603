package oauth

import (
	"strings"
	"testing"
	"time"
)

func TestStateCodec(t *testing.T) {
	k1 := []byte(strings.Repeat("1", 32))
	k2 := []byte(strings.Repeat("2", 32))
	c, err := NewStateCodec([][]byte{k1})
	if err != nil {
		t.Fatal(err)
	}
	id := "as-0123456789abcdef0123456789abcdef"
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
	for name, bad := range map[string]string{
		"empty":         "",
		"no signature":  strings.Split(s, ".")[0],
		"other key":     other.Encode(id, time.Now()),
		"swapped body":  other.Encode(id, time.Now())[:strings.Index(other.Encode(id, time.Now()), ".")] + s[strings.Index(s, "."):],
		"bad base64":    "!!!." + strings.Split(s, ".")[1],
		"too long":      strings.Repeat("a", 1000) + "." + strings.Split(s, ".")[1],
		"truncated sig": s[:len(s)-3],
		"dots":          "...",
	} {
		if _, err := c.Parse(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewStateCodec([][]byte{[]byte("short")}); err == nil {
		t.Fatal("short key accepted")
	}
}

func FuzzStateParse(f *testing.F) {
	c, _ := NewStateCodec([][]byte{[]byte(strings.Repeat("k", 32))})
	f.Add(c.Encode("as-0123456789abcdef0123456789abcdef", time.Unix(1, 0)))
	f.Add("")
	f.Add("a.b")
	f.Add("eyJzaWQiOiJhcy0xIn0.AAAA")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := c.Parse(s)
		if err == nil && !sessionIDPattern.MatchString(p.SessionID) {
			t.Fatalf("accepted state with session id %q", p.SessionID)
		}
	})
}
