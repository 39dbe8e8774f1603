package jwtauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	testIssuer   = "https://idp.example.test/"
	testAudience = "agentauth-tools"
)

// epoch is the fixed "now" of most tests.
var epoch = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type testKey struct {
	kid  string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

func (k testKey) jwk() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.priv.Public(), KeyID: k.kid, Algorithm: string(k.alg), Use: "sig"}
}

// Keys are generated once per test binary; RSA generation is slow.
var (
	keysOnce sync.Once
	rsaKey1  testKey
	rsaKey2  testKey
	ecKey    testKey
	edKey    testKey
	rogueRSA testKey // same kid as rsaKey1, never published
)

func keys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		r1, err := rsa.GenerateKey(rand.Reader, 2048)
		must(t, err)
		r2, err := rsa.GenerateKey(rand.Reader, 2048)
		must(t, err)
		r3, err := rsa.GenerateKey(rand.Reader, 2048)
		must(t, err)
		ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(t, err)
		_, ed, err := ed25519.GenerateKey(rand.Reader)
		must(t, err)
		rsaKey1 = testKey{"rsa-1", jose.RS256, r1}
		rsaKey2 = testKey{"rsa-2", jose.RS256, r2}
		ecKey = testKey{"ec-1", jose.ES256, ec}
		edKey = testKey{"ed-1", jose.EdDSA, ed}
		rogueRSA = testKey{"rsa-1", jose.RS256, r3}
	})
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// jwksServer is an httptest JWKS endpoint on 127.0.0.1 whose key set can be
// swapped and whose requests are counted.
type jwksServer struct {
	*httptest.Server
	mu       sync.Mutex
	body     []byte
	status   int
	delay    time.Duration
	requests atomic.Int64
}

func newJWKSServer(t testing.TB, ks ...jose.JSONWebKey) *jwksServer {
	t.Helper()
	s := &jwksServer{status: http.StatusOK}
	s.setKeys(t, ks...)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		s.mu.Lock()
		body, status, delay := s.body, s.status, s.delay
		s.mu.Unlock()
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setKeys(t testing.TB, ks ...jose.JSONWebKey) {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: ks})
	must(t, err)
	s.setBody(http.StatusOK, b)
}

func (s *jwksServer) setBody(status int, body []byte) {
	s.mu.Lock()
	s.status, s.body = status, body
	s.mu.Unlock()
}

// clock is an injectable, movable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

func newTestVerifier(t testing.TB, srv *jwksServer, clk *clock, mutate ...func(*Config)) *Verifier {
	t.Helper()
	cfg := Config{
		JWKSURL:    srv.URL,
		Issuer:     testIssuer,
		Audience:   testAudience,
		HTTPClient: srv.Client(),
		Now:        clk.Now,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	v, err := New(cfg)
	must(t, err)
	return v
}

// claimsAt returns standard valid claims around now.
func claimsAt(now time.Time) map[string]any {
	return map[string]any{
		"iss":   testIssuer,
		"aud":   testAudience,
		"sub":   "agent-7",
		"iat":   now.Unix(),
		"nbf":   now.Unix(),
		"exp":   now.Add(10 * time.Minute).Unix(),
		"scope": "tools:read agentauth:admin",
	}
}

// sign makes a compact JWS over claims with k, naming kid in the header.
func sign(t testing.TB, k testKey, kid string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT")
	if kid != "" {
		opts = opts.WithHeader("kid", kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.priv}, opts)
	must(t, err)
	payload, err := json.Marshal(claims)
	must(t, err)
	jws, err := signer.Sign(payload)
	must(t, err)
	out, err := jws.CompactSerialize()
	must(t, err)
	return out
}
