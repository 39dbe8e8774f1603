package toolsapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/agentauth/agentauth/shared/jwtauth"
)

// TestRoutesWithRealJWTs signs ES256 JWTs with a key published by a local
// JWKS server and calls the routes through the real verifier.
func TestRoutesWithRealJWTs(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "ES256", Use: "sig"}}})
	}))
	defer jwks.Close()
	v, err := jwtauth.New(jwtauth.Config{JWKSURL: jwks.URL, Issuer: "https://issuer.test", Audience: "agentauth"})
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	mint := func(claims map[string]any) string {
		base := map[string]any{"iss": "https://issuer.test", "aud": "agentauth", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix()}
		for k, v := range claims {
			base[k] = v
		}
		raw, err := jwt.Signed(signer).Claims(base).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	h := newHarness(t, v, true).h

	alice := mint(map[string]any{"sub": "alice", "scope": "tools:echo", "tenant_id": "a"})
	if rec, m := call(t, h, "GET", "/v1/agents/tools", alice, ""); rec.Code != 200 || names(m) != "echo,get_menu" {
		t.Fatalf("tools: %d %v", rec.Code, m)
	}
	if rec, _ := call(t, h, "GET", "/v1/agents/skills?q=deploy", alice, ""); rec.Code != 200 {
		t.Fatalf("skills: %d", rec.Code)
	}
	if rec, m := call(t, h, "POST", "/v1/tools/invoke", alice, `{"toolName":"echo","args":{}}`); rec.Code != 200 || m["toolReturned"].(map[string]any)["status"] != "ok" {
		t.Fatalf("invoke: %d %v", rec.Code, m)
	}
	if rec, _ := call(t, h, "POST", "/v1/host/sample/toolhooks/invoke", alice, `{"principal":"p","toolName":"x"}`); rec.Code != 200 {
		t.Fatalf("seam: %d", rec.Code)
	}
	expired := mint(map[string]any{"sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()})
	wrongAud := mint(map[string]any{"sub": "alice", "aud": "someone-else"})
	for name, tok := range map[string]string{"expired": expired, "wrong audience": wrongAud, "tampered": alice[:len(alice)-4] + "AAAA"} {
		rec, m := call(t, h, "GET", "/v1/agents/tools", tok, "")
		if rec.Code != 401 || strings.Contains(rec.Body.String(), tok) {
			t.Fatalf("%s: %d %v", name, rec.Code, m)
		}
	}
}
