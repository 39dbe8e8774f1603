package jwtauth

import "errors"

// Reason codes carried by *Error. They are stable and safe to show to the
// caller in a 401 body.
const (
	ReasonMissingToken    = "missing_token"
	ReasonMalformed       = "malformed"
	ReasonBadSignature    = "bad_signature"
	ReasonUnknownKey      = "unknown_key"
	ReasonWrongAlgorithm  = "wrong_algorithm"
	ReasonExpired         = "expired"
	ReasonNotYetValid     = "not_yet_valid"
	ReasonWrongIssuer     = "wrong_issuer"
	ReasonWrongAudience   = "wrong_audience"
	ReasonJWKSUnavailable = "jwks_unavailable"
)

// Error is why a token was refused. Its text is built from the reason code
// and, for jwks_unavailable only, the JWKS fetch failure; it never holds the
// token or anything taken from it.
type Error struct {
	Reason string
	err    error // fetch failure behind jwks_unavailable; nil otherwise
}

func (e *Error) Error() string {
	if e.err != nil {
		return "jwtauth: token rejected: " + e.Reason + ": " + e.err.Error()
	}
	return "jwtauth: token rejected: " + e.Reason
}

// Unwrap returns the JWKS fetch failure behind jwks_unavailable, if any.
func (e *Error) Unwrap() error { return e.err }

// Reason returns the reason code of a *Error in err's chain, or "" if there
// is none.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func reject(reason string) *Error { return &Error{Reason: reason} }
