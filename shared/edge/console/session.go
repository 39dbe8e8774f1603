package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Cookie names. The session cookie is scoped to the console's path; the
// pending one to its callback, and lives only for the sign-in round trip.
const (
	sessionCookie = "agentauth_console"
	pendingCookie = "agentauth_console_signin"
)

// maxSession bounds a session whatever the ID token says: an operator
// signs in again at least this often, so rights taken away at the
// provider stop within it.
const maxSession = 12 * time.Hour

// session is what the console keeps of a signed-in operator, sealed in
// the session cookie.
type session struct {
	Subject string `json:"sub"`
	Name    string `json:"name,omitempty"`
	Tenant  string `json:"tenant,omitempty"`
	// Platform: the operator holds agentauth:platform-admin.
	Platform bool `json:"platform,omitempty"`
	// CSRF is the token every state-changing request must carry.
	CSRF    string `json:"csrf"`
	Expires int64  `json:"exp"`
}

// sealer seals and opens cookie values with AES-256-GCM under keys
// derived (HKDF-SHA256) from the session keys with a purpose label, so a
// console cookie is never the same key as any other use of those keys.
// The first key seals; every key opens, so a rotation keeps sessions.
type sealer struct {
	aeads []cipher.AEAD
}

const sealPurpose = "agentauth console session v1"

func newSealer(keys [][]byte) (*sealer, error) {
	if len(keys) == 0 {
		return nil, errors.New("console: no session keys")
	}
	s := &sealer{}
	for i, k := range keys {
		if len(k) < 32 {
			return nil, fmt.Errorf("console: session key %d is %d bytes, want at least 32", i, len(k))
		}
		dk, err := hkdf.Key(sha256.New, k, nil, sealPurpose, 32)
		if err != nil {
			return nil, fmt.Errorf("console: derive key %d: %w", i, err)
		}
		block, err := aes.NewCipher(dk)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		s.aeads = append(s.aeads, aead)
	}
	return s, nil
}

// seal encrypts v's JSON; the cookie name is the additional data, so a
// value sealed for one cookie never opens as another.
func (s *sealer) seal(name string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	a := s.aeads[0]
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plain)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(a.Seal(nonce, nonce, plain, []byte(name))), nil
}

var errBadCookie = errors.New("console: cookie does not open")

func (s *sealer) open(name, value string, v any) error {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil {
		return errBadCookie
	}
	for _, a := range s.aeads {
		if len(raw) < a.NonceSize()+a.Overhead() {
			return errBadCookie
		}
		plain, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], []byte(name))
		if err != nil {
			continue
		}
		if json.Unmarshal(plain, v) != nil {
			return errBadCookie
		}
		return nil
	}
	return errBadCookie
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sameToken compares two CSRF tokens in constant time.
func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
