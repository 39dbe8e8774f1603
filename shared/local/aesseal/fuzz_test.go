package aesseal

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

// FuzzParseEnvKeys: any input either parses to 32-byte keys or fails with
// an error that does not echo it.
func FuzzParseEnvKeys(f *testing.F) {
	for _, s := range []string{"", ",", "AAAA", strings.Repeat("ab", 32), strings.Repeat("A", 43), "x,y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		keys, err := ParseEnvKeys(s)
		if err != nil {
			for _, part := range strings.Split(s, ",") {
				if p := strings.TrimSpace(part); len(p) >= 8 && strings.Contains(err.Error(), p) {
					t.Fatalf("error echoes the input: %v", err)
				}
			}
			return
		}
		for _, k := range keys {
			if len(k) != KeySize {
				t.Fatalf("key of %d bytes", len(k))
			}
		}
	})
}

// FuzzOpen: arbitrary stored values never panic and never open to
// anything but what was sealed.
func FuzzOpen(f *testing.F) {
	k, _ := New(bytes.Repeat([]byte{1}, KeySize))
	b := domain.Binding{Record: "grant", RecordID: "grant-0123456789abcdef", Field: "accessToken"}
	v, _ := k.Seal(context.Background(), []byte("secret"), b)
	f.Add(v.Algorithm, v.IV, v.Ciphertext, v.Tag, v.KeyID)
	f.Add("aes-256-gcm", "", "", "", "")
	f.Fuzz(func(t *testing.T, alg, iv, ct, tag, keyID string) {
		in := domain.EncryptedValue{Algorithm: alg, IV: iv, Ciphertext: ct, Tag: tag, KeyID: keyID}
		// Only a genuine sealed value (the seed, possibly re-encoded) opens.
		if pt, err := k.Open(context.Background(), in, b); err == nil && string(pt) != "secret" {
			t.Fatalf("forged value opened to %d bytes", len(pt))
		}
	})
}
