package jwtauth

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"math"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// maxTokenBytes bounds the work an unauthenticated caller can ask for.
const maxTokenBytes = 64 << 10

// Verifier checks bearer JWTs against one issuer's JWKS. It is safe for
// concurrent use; build one per process and share it.
type Verifier struct {
	issuer   string
	audience string
	leeway   time.Duration
	now      func() time.Time
	allowed  map[string]bool
	algs     []jose.SignatureAlgorithm
	keys     *keyCache
}

// New validates cfg and returns a Verifier. It does not fetch the JWKS; the
// first Verify does.
func New(cfg Config) (*Verifier, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	v := &Verifier{
		issuer:   cfg.Issuer,
		audience: cfg.Audience,
		leeway:   cfg.Leeway,
		now:      cfg.Now,
		allowed:  make(map[string]bool, len(cfg.Algorithms)),
		keys:     newKeyCache(cfg),
	}
	for _, alg := range cfg.Algorithms {
		if !v.allowed[alg] {
			v.allowed[alg] = true
			v.algs = append(v.algs, jose.SignatureAlgorithm(alg))
		}
	}
	return v, nil
}

// Verify checks raw (a compact JWS, without the "Bearer " prefix) and
// returns its claims. Any failure is a *Error whose Reason says why.
func (v *Verifier) Verify(ctx context.Context, raw string) (Claims, error) {
	if strings.TrimSpace(raw) == "" {
		return nil, reject(ReasonMissingToken)
	}
	if len(raw) > maxTokenBytes {
		return nil, reject(ReasonMalformed)
	}
	// Look at the header first only to tell a refused algorithm apart from
	// garbage; go-jose's parse below is what the decision rests on.
	alg, ok := peekAlg(raw)
	if !ok {
		return nil, reject(ReasonMalformed)
	}
	if !v.allowed[alg] {
		return nil, reject(ReasonWrongAlgorithm)
	}
	jws, err := jose.ParseSignedCompact(raw, v.algs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, reject(ReasonMalformed)
	}
	header := jws.Signatures[0].Header
	alg = header.Algorithm
	if !v.allowed[alg] {
		return nil, reject(ReasonWrongAlgorithm)
	}

	keys, err := v.keys.lookup(ctx, header.KeyID)
	if err != nil {
		return nil, err
	}
	var payload []byte
	fits := false
	for _, k := range keys {
		if !keyFits(k, alg) {
			continue
		}
		fits = true
		if p, err := jws.Verify(k.Key); err == nil {
			payload = p
			break
		}
	}
	switch {
	case !fits && header.KeyID != "":
		return nil, reject(ReasonWrongAlgorithm)
	case !fits:
		return nil, reject(ReasonUnknownKey)
	case payload == nil:
		return nil, reject(ReasonBadSignature)
	}

	claims, err := decodeClaims(payload)
	if err != nil {
		return nil, err
	}
	if err := v.checkClaims(claims); err != nil {
		return nil, err
	}
	return claims, nil
}

// peekAlg reads alg from the unverified header of a compact JWS.
func peekAlg(raw string) (string, bool) {
	if strings.Count(raw, ".") != 2 {
		return "", false
	}
	head, _, _ := strings.Cut(raw, ".")
	b, err := base64.RawURLEncoding.DecodeString(head)
	if err != nil {
		return "", false
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return "", false
	}
	return h.Alg, true
}

func decodeClaims(payload []byte) (Claims, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var claims map[string]any
	if err := dec.Decode(&claims); err != nil || claims == nil {
		return nil, reject(ReasonMalformed)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, reject(ReasonMalformed)
	}
	return Claims(claims), nil
}

func (v *Verifier) checkClaims(c Claims) error {
	now := float64(v.now().UnixNano()) / 1e9
	leeway := v.leeway.Seconds()

	exp, ok, err := numericDate(c, "exp")
	switch {
	case err != nil || !ok:
		// A token without exp would never expire; refuse it.
		return reject(ReasonMalformed)
	case now >= exp+leeway:
		return reject(ReasonExpired)
	}
	nbf, ok, err := numericDate(c, "nbf")
	switch {
	case err != nil:
		return reject(ReasonMalformed)
	case ok && now+leeway < nbf:
		return reject(ReasonNotYetValid)
	}
	iat, ok, err := numericDate(c, "iat")
	switch {
	case err != nil:
		return reject(ReasonMalformed)
	case ok && now+leeway < iat:
		return reject(ReasonNotYetValid)
	}

	if iss, _ := c["iss"].(string); iss != v.issuer {
		return reject(ReasonWrongIssuer)
	}
	if !audienceHas(c["aud"], v.audience) {
		return reject(ReasonWrongAudience)
	}
	return nil
}

// numericDate reads a NumericDate claim (seconds since the epoch, possibly
// fractional). ok is false when the claim is absent.
func numericDate(c Claims, name string) (float64, bool, error) {
	raw, present := c[name]
	if !present {
		return 0, false, nil
	}
	n, isNum := raw.(json.Number)
	if !isNum {
		return 0, false, reject(ReasonMalformed)
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false, reject(ReasonMalformed)
	}
	return f, true, nil
}

func audienceHas(aud any, want string) bool {
	switch a := aud.(type) {
	case string:
		return a == want
	case []any:
		for _, e := range a {
			if s, ok := e.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}
