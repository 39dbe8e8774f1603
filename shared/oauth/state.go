package oauth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// StateCodec signs and verifies the OAuth state parameter. The state is
// base64url(JSON payload) "." base64url(HMAC-SHA256(payload)); the payload
// names the session, so the callback finds its session without an index,
// and the signature stops a forged or tampered state before any store read.
// Single use comes from the session: it completes at most once.
type StateCodec struct {
	keys [][]byte // first signs; all verify (so states survive a key rotation)
}

// StatePayload is the signed content of a state.
type StatePayload struct {
	SessionID string `json:"sid"`
	Nonce     string `json:"n"`
	IssuedAt  int64  `json:"iat"`
}

// ErrInvalidState: the state is malformed, forged or tampered with.
var ErrInvalidState = errors.New("invalid state")

var sessionIDPattern = regexp.MustCompile(`^as-[0-9a-f]{32}$`)

// maxStateLen bounds the work done on untrusted input.
const maxStateLen = 512

// NewStateCodec returns a codec; keys[0] signs, every key verifies. Each
// key must be at least 32 bytes.
func NewStateCodec(keys [][]byte) (*StateCodec, error) {
	if len(keys) == 0 {
		return nil, errors.New("state codec: no keys")
	}
	for i, k := range keys {
		if len(k) < 32 {
			return nil, fmt.Errorf("state codec: key %d is %d bytes, want at least 32", i, len(k))
		}
	}
	return &StateCodec{keys: keys}, nil
}

// Encode returns a fresh signed state for sessionID.
func (c *StateCodec) Encode(sessionID string, now time.Time) string {
	var n [16]byte
	_, _ = rand.Read(n[:])
	p, _ := json.Marshal(StatePayload{SessionID: sessionID, Nonce: hex.EncodeToString(n[:]), IssuedAt: now.Unix()})
	return c.sign(base64.RawURLEncoding.EncodeToString(p))
}

// sign returns body "." the base64url MAC of body under the current key.
func (c *StateCodec) sign(body string) string {
	return body + "." + base64.RawURLEncoding.EncodeToString(c.mac(c.keys[0], body))
}

// Parse verifies state and returns its payload, or ErrInvalidState.
func (c *StateCodec) Parse(state string) (StatePayload, error) {
	if state == "" || len(state) > maxStateLen {
		return StatePayload{}, ErrInvalidState
	}
	body, sig, ok := strings.Cut(state, ".")
	if !ok || body == "" || sig == "" {
		return StatePayload{}, ErrInvalidState
	}
	// Compare the signature as text, not decoded: a decoder skips
	// newlines and ignores the last character's spare bits, so several
	// strings decode to one MAC. Exactly one string per body is ours.
	valid := false
	for _, k := range c.keys {
		if hmac.Equal([]byte(sig), []byte(base64.RawURLEncoding.EncodeToString(c.mac(k, body)))) {
			valid = true
			break
		}
	}
	if !valid {
		return StatePayload{}, ErrInvalidState
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return StatePayload{}, ErrInvalidState
	}
	var p StatePayload
	if err := json.Unmarshal(raw, &p); err != nil || !sessionIDPattern.MatchString(p.SessionID) {
		return StatePayload{}, ErrInvalidState
	}
	return p, nil
}

func (c *StateCodec) mac(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("agentauth/state/v1|"))
	m.Write([]byte(body))
	return m.Sum(nil)
}

// nonceFor derives the OIDC nonce of a session, so it needs no storage:
// only this deployment can compute it, and it is bound to the session.
func (c *StateCodec) nonceFor(sessionID string) string {
	m := hmac.New(sha256.New, c.keys[0])
	m.Write([]byte("agentauth/nonce/v1|" + sessionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// nonceValid checks a nonce against every key.
func (c *StateCodec) nonceValid(sessionID, nonce string) bool {
	for _, k := range c.keys {
		m := hmac.New(sha256.New, k)
		m.Write([]byte("agentauth/nonce/v1|" + sessionID))
		if hmac.Equal([]byte(nonce), []byte(base64.RawURLEncoding.EncodeToString(m.Sum(nil)))) {
			return true
		}
	}
	return false
}
