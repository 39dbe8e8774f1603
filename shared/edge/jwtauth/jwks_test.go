package jwtauth

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestJWKSSizeLimit: a key set of exactly maxJWKSBytes is read whole; one
// byte more is refused.
func TestJWKSSizeLimit(t *testing.T) {
	keys(t)
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{rsaKey1.jwk()}})
	must(t, err)
	for _, tt := range []struct {
		name   string
		size   int
		reason string
	}{
		{"at the limit", maxJWKSBytes, ""},
		{"one byte past it", maxJWKSBytes + 1, ReasonJWKSUnavailable},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t)
			// Trailing blanks keep the set valid JSON of the size wanted.
			srv.setBody(http.StatusOK, append(bytes.Clone(set), bytes.Repeat([]byte(" "), tt.size-len(set))...))
			v := newTestVerifier(t, srv, &clock{t: epoch})
			_, err := v.Verify(context.Background(), sign(t, rsaKey1, "rsa-1", claimsAt(epoch)))
			if got := Reason(err); got != tt.reason {
				t.Fatalf("reason = %q (%v), want %q", got, err, tt.reason)
			}
		})
	}
}

// TestKeySetUnusableFromItsTTL: once the key set is CacheTTL old it is not
// used, whether the refetch fails or falls within the refetch interval, so
// a withdrawn key stops working; before that, a failed refetch keeps the
// cached set. The refusal says why, for the operator.
func TestKeySetUnusableFromItsTTL(t *testing.T) {
	keys(t)
	const ttl = 10 * time.Minute
	for _, tt := range []struct {
		name     string
		interval time.Duration // refetch interval; longer than ttl: no refetch at the TTL
		down     bool          // the endpoint fails after the first fetch
		advance  time.Duration
		kid      string
		reason   string
		cause    string // in the error text, for the operator
	}{
		{"endpoint down, a second before the TTL", 0, true, ttl - time.Second, "rsa-1", "", ""},
		{"endpoint down, at the TTL", 0, true, ttl, "rsa-1", ReasonJWKSUnavailable, "status 500"},
		{"endpoint down, past the TTL", 0, true, ttl + time.Hour, "rsa-1", ReasonJWKSUnavailable, "status 500"},
		{"endpoint down, a new kid before the TTL: the cached set stays", 0, true, DefaultRefetchInterval, "rsa-2", ReasonUnknownKey, ""},
		{"within the interval, a second before the TTL", 2 * ttl, false, ttl - time.Second, "rsa-1", "", ""},
		{"within the interval, at the TTL", 2 * ttl, false, ttl, "rsa-1", ReasonJWKSUnavailable, "key set expired"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := newJWKSServer(t, rsaKey1.jwk())
			clk := &clock{t: epoch}
			v := newTestVerifier(t, srv, clk, func(c *Config) { c.CacheTTL, c.RefetchInterval = ttl, tt.interval })
			if _, err := v.Verify(context.Background(), sign(t, rsaKey1, "rsa-1", claimsAt(epoch))); err != nil {
				t.Fatalf("first verify: %v", err)
			}
			if tt.down {
				srv.setBody(http.StatusInternalServerError, []byte("oops"))
			}
			clk.Advance(tt.advance)
			_, err := v.Verify(context.Background(), sign(t, rsaKey1, tt.kid, claimsAt(clk.Now())))
			if got := Reason(err); got != tt.reason {
				t.Fatalf("reason = %q (%v), want %q", got, err, tt.reason)
			}
			if tt.cause != "" && !strings.Contains(err.Error(), tt.cause) {
				t.Fatalf("error %q does not say %q", err, tt.cause)
			}
		})
	}
}

// TestFailedFetchCauseKept: within the refetch interval after a failed
// fetch, a refusal still names that failure.
func TestFailedFetchCauseKept(t *testing.T) {
	keys(t)
	srv := newJWKSServer(t)
	srv.setBody(http.StatusBadGateway, nil)
	v := newTestVerifier(t, srv, &clock{t: epoch})
	raw := sign(t, rsaKey1, "rsa-1", claimsAt(epoch))
	for i := range 2 {
		_, err := v.Verify(context.Background(), raw)
		if Reason(err) != ReasonJWKSUnavailable || !strings.Contains(err.Error(), "status 502") {
			t.Fatalf("call %d: err = %v, want jwks_unavailable naming status 502", i+1, err)
		}
	}
	if got := srv.requests.Load(); got != 1 {
		t.Fatalf("JWKS requests = %d, want 1", got)
	}
}

// memJWKS serves a key set from memory at one URL, for a client that must
// be the one Config names (nothing listens at that URL).
type memJWKS struct {
	url  string
	body []byte
}

func (m memJWKS) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.String() != m.url {
		return &http.Response{StatusCode: http.StatusNotFound, Body: http.NoBody, Request: r}, nil
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(m.body)), Request: r}, nil
}

// TestHTTPClient: the configured client fetches the key set; without one,
// a default client does.
func TestHTTPClient(t *testing.T) {
	keys(t)
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{rsaKey1.jwk()}})
	must(t, err)
	const url = "https://idp.invalid/.well-known/jwks.json"
	srv := newJWKSServer(t, rsaKey1.jwk())
	for _, tt := range []struct {
		name string
		cfg  Config
	}{
		{"own client", Config{JWKSURL: url, HTTPClient: &http.Client{Transport: memJWKS{url, set}}}},
		{"default client", Config{JWKSURL: srv.URL}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Issuer, cfg.Audience, cfg.Now = testIssuer, testAudience, (&clock{t: epoch}).Now
			v, err := New(cfg)
			must(t, err)
			if _, err := v.Verify(context.Background(), sign(t, rsaKey1, "rsa-1", claimsAt(epoch))); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// TestECKeyFitsItsCurve: an ES256, ES384 or ES512 token verifies only with
// a key on the curve its algorithm is defined for, also when the published
// key declares no alg; a key on another curve is the wrong algorithm.
func TestECKeyFitsItsCurve(t *testing.T) {
	ec := map[string]*ecdsa.PrivateKey{}
	var published []jose.JSONWebKey
	for _, c := range []struct {
		kid   string
		curve elliptic.Curve
	}{{"p256", elliptic.P256()}, {"p384", elliptic.P384()}, {"p521", elliptic.P521()}} {
		k, err := ecdsa.GenerateKey(c.curve, rand.Reader)
		must(t, err)
		ec[c.kid] = k
		published = append(published, jose.JSONWebKey{Key: k.Public(), KeyID: c.kid, Use: "sig"})
	}
	srv := newJWKSServer(t, published...)
	v := newTestVerifier(t, srv, &clock{t: epoch}, func(c *Config) { c.Algorithms = []string{"ES256", "ES384", "ES512"} })
	for _, tt := range []struct {
		alg         jose.SignatureAlgorithm
		signer, kid string
		reason      string
	}{
		{jose.ES256, "p256", "p256", ""},
		{jose.ES384, "p384", "p384", ""},
		{jose.ES512, "p521", "p521", ""},
		{jose.ES256, "p256", "p384", ReasonWrongAlgorithm},
		{jose.ES384, "p384", "p256", ReasonWrongAlgorithm},
		{jose.ES512, "p521", "p384", ReasonWrongAlgorithm},
	} {
		t.Run(string(tt.alg)+" by "+tt.signer+" naming "+tt.kid, func(t *testing.T) {
			tok := sign(t, testKey{tt.kid, tt.alg, ec[tt.signer]}, tt.kid, claimsAt(epoch))
			_, err := v.Verify(context.Background(), tok)
			if got := Reason(err); got != tt.reason {
				t.Fatalf("reason = %q (%v), want %q", got, err, tt.reason)
			}
		})
	}
}
