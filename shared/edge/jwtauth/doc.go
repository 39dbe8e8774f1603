// Package jwtauth verifies the bearer JWTs that agents present to the tools
// function.
//
// A Verifier checks the signature against the issuer's JWKS (fetched lazily,
// cached, and refetched on an unknown key id at most once per interval so key
// rotation works but a flood of bogus key ids cannot hammer the JWKS
// endpoint), the algorithm against an allow list of asymmetric algorithms,
// the issuer, the audience, and exp/nbf/iat with a small leeway. Failures are
// a *Error carrying a reason code fit for a 401 body.
//
// This package must never accept "none" or an HMAC algorithm, never trust a
// claim before the signature is checked, and never put the token, or any
// part of it, into an error, a log line or a response.
package jwtauth
