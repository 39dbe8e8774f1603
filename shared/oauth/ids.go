package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"

	"github.com/agentauth/agentauth/shared/domain"
)

// GrantID is the spec's grant id: "grant-" + the first 16 hex digits of
// sha256("<kind>/<name>:<subject>").
func GrantID(ref domain.ObjectRef, subject string) string {
	sum := sha256.Sum256([]byte(ref.Kind + "/" + ref.Name + ":" + subject))
	return "grant-" + hex.EncodeToString(sum[:8])
}

// newSessionID returns "as-" + 32 random hex digits.
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "as-" + hex.EncodeToString(b[:])
}

// IsSubset reports whether every scope in sub is in super.
func IsSubset(sub, super []string) bool {
	set := make(map[string]struct{}, len(super))
	for _, s := range super {
		set[s] = struct{}{}
	}
	for _, s := range sub {
		if _, ok := set[s]; !ok {
			return false
		}
	}
	return true
}
