// Package jwttest is a local JWT issuer for tests: an ES256 key published
// by a JWKS server on 127.0.0.1 and a Mint that signs claims with it, as a
// real OpenID provider would. Only for tests.
package jwttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer and Audience of minted tokens.
const (
	Issuer   = "https://issuer.agentauth.test"
	Audience = "agentauth-tools"
)

// IssuerServer signs tokens; its JWKS is served at URL until the test ends.
type IssuerServer struct {
	URL    string // the JWKS URL
	signer jose.Signer
}

// Start starts the JWKS server and returns the issuer.
func Start(t testing.TB) *IssuerServer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "test-1", Algorithm: "ES256", Use: "sig"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(srv.Close)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "test-1"))
	if err != nil {
		t.Fatal(err)
	}
	return &IssuerServer{URL: srv.URL, signer: signer}
}

// Mint signs claims over the defaults iss, aud, iat and exp (one hour);
// a claim given overrides its default.
func (s *IssuerServer) Mint(t testing.TB, claims map[string]any) string {
	t.Helper()
	all := map[string]any{"iss": Issuer, "aud": Audience, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		all[k] = v
	}
	raw, err := jwt.Signed(s.signer).Claims(all).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// Env is the tools routes' JWT environment for this issuer.
func (s *IssuerServer) Env() map[string]string {
	return map[string]string{"AGENTAUTH_JWKS_URL": s.URL, "AGENTAUTH_JWT_ISSUER": Issuer, "AGENTAUTH_JWT_AUDIENCE": Audience}
}
