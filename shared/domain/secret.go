package domain

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
)

// Redacted is what a Secret prints, logs and marshals as.
const Redacted = "[REDACTED]"

// Secret holds a sensitive string (token, verifier, client secret). It prints,
// logs and marshals as [REDACTED]; only Reveal returns the value.
type Secret struct{ v string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{v: s} }

// Reveal returns the secret value. Call it only where the value leaves the
// process on purpose (a provider request, the ready result).
func (s Secret) Reveal() string { return s.v }

// IsZero reports whether the secret is empty.
func (s Secret) IsZero() bool { return s.v == "" }

// Equal compares two secrets in constant time.
func (s Secret) Equal(o Secret) bool {
	return subtle.ConstantTimeCompare([]byte(s.v), []byte(o.v)) == 1
}

func (Secret) String() string   { return Redacted }
func (Secret) GoString() string { return Redacted }

// Format makes every verb, %v %+v %#v %s %q %x included, print the redaction.
func (Secret) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(Redacted)) }

// LogValue keeps the value out of slog output.
func (Secret) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON keeps the value out of JSON output.
func (Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// MarshalText keeps the value out of text encodings.
func (Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }
