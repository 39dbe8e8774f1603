package domain

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// The shapes of grant and session ids. Every store builds keys and file
// names only from ids that pass ValidateGrantID or ValidateSessionID, so no
// id can reach outside its store or into an expression.
const (
	grantIDPrefix   = "grant-"
	grantIDHex      = 16
	sessionIDPrefix = "as-"
	sessionIDHex    = 32
	reuseKeyPrefix  = "rk-"
	reuseKeyHex     = 64
	targetKeyPrefix = "rt-"
	targetKeyHex    = 64
)

// GrantID is the spec's grant id: "grant-" + the first 16 hex digits of
// sha256("<kind>/<name>:<subject>"). One app and subject always share one
// grant, in every process and backend.
func GrantID(ref ObjectRef, subject string) string {
	sum := sha256.Sum256([]byte(ref.Kind + "/" + ref.Name + ":" + subject))
	return grantIDPrefix + hex.EncodeToString(sum[:grantIDHex/2])
}

// NewSessionID returns a new auth session id: "as-" + 32 hex digits from
// crypto/rand (the only source this package reads).
func NewSessionID() string {
	var b [sessionIDHex / 2]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return sessionIDPrefix + hex.EncodeToString(b[:])
}

// ValidateGrantID checks ^grant-[0-9a-f]{16}$. The error wraps ErrInvalidID.
func ValidateGrantID(id string) error { return validateID(id, grantIDPrefix, grantIDHex, "grant") }

// ValidateSessionID checks ^as-[0-9a-f]{32}$. The error wraps ErrInvalidID.
func ValidateSessionID(id string) error {
	return validateID(id, sessionIDPrefix, sessionIDHex, "session")
}

// SessionReuseKey is the key under which a pending auth session answers a
// repeated request for the same consent: a hash of the OAuth app, the
// subject, the requested scopes as a set (order and repeats do not count)
// and the resume target (swarm, instance, agent), "rk-" + 64 hex digits.
// Requests with equal keys ask the same user for the same thing and wake
// the same agent, so they share one session (Session.ReuseKey). Each part
// is length-prefixed before hashing, so no choice of text makes two
// different tuples hash alike; the stores key records and files by the
// hash, never by the text.
func SessionReuseKey(app ObjectRef, subject string, scopes []string, resume ResumeInfo) string {
	set := slices.Clone(scopes)
	slices.Sort(set)
	set = slices.Compact(set)
	h := sha256.New()
	part := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	part("agentauth/session-reuse/v1")
	part(app.Kind)
	part(app.Name)
	part(subject)
	h.Write(binary.AppendUvarint(nil, uint64(len(set))))
	for _, sc := range set {
		part(sc)
	}
	part(resume.SwarmRef.Kind)
	part(resume.SwarmRef.Name)
	part(resume.InstanceKey)
	part(resume.AgentName)
	return reuseKeyPrefix + hex.EncodeToString(h.Sum(nil))
}

// ResumeTargetKey is the key under which the stores index a pending
// session by its resume target (ResumeInfo.Target): "rt-" + 64 hex digits
// of a hash of the swarm (kind and name), the instance key and the agent
// name, each length-prefixed as in SessionReuseKey, so that no two targets
// share a key and no caller's text reaches a file name or a table key.
func ResumeTargetKey(t ResumeTarget) string {
	h := sha256.New()
	for _, s := range []string{"agentauth/resume-target/v1", t.SwarmRef.Kind, t.SwarmRef.Name, t.InstanceKey, t.AgentName} {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	return targetKeyPrefix + hex.EncodeToString(h.Sum(nil))
}

// ValidateResumeTargetKey checks ^rt-[0-9a-f]{64}$, the shape
// ResumeTargetKey returns. The error wraps ErrInvalidID.
func ValidateResumeTargetKey(k string) error {
	return validateID(k, targetKeyPrefix, targetKeyHex, "resume target key")
}

// ValidateReuseKey checks ^rk-[0-9a-f]{64}$, the shape SessionReuseKey
// returns. The error wraps ErrInvalidID.
func ValidateReuseKey(k string) error {
	return validateID(k, reuseKeyPrefix, reuseKeyHex, "session reuse key")
}

func validateID(id, prefix string, hexLen int, what string) error {
	ok := len(id) == len(prefix)+hexLen && strings.HasPrefix(id, prefix)
	for i := len(prefix); ok && i < len(id); i++ {
		c := id[i]
		ok = c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
	}
	if !ok {
		// %q keeps control characters in a hostile id from reaching logs raw.
		return fmt.Errorf("%s id %.80q: want %s followed by %d lowercase hex digits: %w", what, id, prefix, hexLen, ErrInvalidID)
	}
	return nil
}

// MaxDeadLetterIDLength bounds a dead letter's id (DeadLetter.ID).
const MaxDeadLetterIDLength = 128

// ValidateDeadLetterID checks a dead letter's id: 1 to 128 of
// [A-Za-z0-9._-], and not only dots, so it is safe as a URL path segment
// and as a file name (no separator, never "." or ".."). The error wraps
// ErrInvalidID.
func ValidateDeadLetterID(id string) error {
	ok := id != "" && len(id) <= MaxDeadLetterIDLength && strings.Trim(id, ".") != ""
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("dead letter id %.80q: want 1 to %d of A-Z, a-z, 0-9, '.', '_' and '-', not only dots: %w", id, MaxDeadLetterIDLength, ErrInvalidID)
	}
	return nil
}
