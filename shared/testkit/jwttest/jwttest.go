// Package jwttest is a local JWT issuer for tests: an ES256 key published
// by a JWKS server on 127.0.0.1 and a Mint that signs claims with it, as a
// real OpenID provider would. Only for tests.
package jwttest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net"
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

// Start starts the JWKS server on a free port (any path serves the key
// set) and returns the issuer.
func Start(t testing.TB) *IssuerServer {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	iss := start(t, srv, "", "test-1")
	iss.URL = srv.URL
	return iss
}

// StartAt serves the JWKS at http://<addr><path> only, for a verifier
// configured before the test runs (a deployed function whose JWKS URL was
// fixed at deploy time); addr is host:port, e.g. 127.0.0.1:4591, and path
// starts with a slash. The key id is new each time: a verifier that still
// holds an earlier issuer's key under the same id would check this
// issuer's tokens against it and refuse them, where an unknown id makes it
// fetch the key set again.
func StartAt(t testing.TB, addr, path string) *IssuerServer {
	t.Helper()
	if path == "" || path[0] != '/' {
		t.Fatalf("jwttest: JWKS path %q: want an absolute path like /jwks", path)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("jwttest: serve the JWKS on %s: %v (is another test or process using the port?)", addr, err)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Listener.Close()
	srv.Listener = ln
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		t.Fatal(err)
	}
	iss := start(t, srv, path, "test-"+hex.EncodeToString(id[:]))
	iss.URL = srv.URL + path
	return iss
}

// start generates the key, serves its JWKS from srv (at path, or at every
// path when path is empty) until the test ends, and returns the issuer
// without its URL.
func start(t testing.TB, srv *httptest.Server, path, kid string) *IssuerServer {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"}}}
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if path != "" && r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	return &IssuerServer{signer: signer}
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
