package jwttest_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
)

// verify checks tok with a fresh verifier that knows the issuer only by its
// JWKS URL, as the tools routes do.
func verify(t *testing.T, jwksURL, tok string) (jwtauth.Claims, error) {
	t.Helper()
	v, err := jwtauth.New(jwtauth.Config{JWKSURL: jwksURL, Issuer: jwttest.Issuer, Audience: jwttest.Audience})
	if err != nil {
		t.Fatal(err)
	}
	return v.Verify(context.Background(), tok)
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func TestStartAndStartAt(t *testing.T) {
	addr := freeAddr(t)
	for _, tc := range []struct {
		name    string
		start   func(t *testing.T) *jwttest.IssuerServer
		wantURL string
	}{
		{name: "Start", start: func(t *testing.T) *jwttest.IssuerServer { return jwttest.Start(t) }},
		{name: "StartAt", start: func(t *testing.T) *jwttest.IssuerServer { return jwttest.StartAt(t, addr, "/jwks") },
			wantURL: "http://" + addr + "/jwks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iss := tc.start(t)
			if tc.wantURL != "" && iss.URL != tc.wantURL {
				t.Fatalf("URL = %q, want %q", iss.URL, tc.wantURL)
			}
			c, err := verify(t, iss.URL, iss.Mint(t, map[string]any{"sub": "alice", "scope": "a b"}))
			if err != nil || c.Subject() != "alice" || !c.HasScope("b") {
				t.Fatalf("verify a minted token: %v (claims %v)", err, c)
			}
			if _, err := verify(t, iss.URL, iss.Mint(t, map[string]any{"sub": "alice", "aud": "someone-else"})); jwtauth.Reason(err) != jwtauth.ReasonWrongAudience {
				t.Fatalf("a token for another audience: %v", err)
			}
		})
	}
}

func TestStartAtServesOnlyItsPath(t *testing.T) {
	addr := freeAddr(t)
	iss := jwttest.StartAt(t, addr, "/keys/jwks.json")
	if code := get(t, iss.URL); code != 200 {
		t.Fatalf("GET %s: %d", iss.URL, code)
	}
	if code := get(t, "http://"+addr+"/jwks"); code != 404 {
		t.Fatalf("GET another path: %d, want 404", code)
	}
}

// A verifier that cached an earlier StartAt issuer's key set must take the
// next one's tokens: each StartAt names its key anew, so the verifier
// fetches the new set instead of checking against the old key (once its
// refetch interval has passed, here at once).
func TestStartAtAgainOnTheSameAddress(t *testing.T) {
	addr := freeAddr(t)
	v, err := jwtauth.New(jwtauth.Config{JWKSURL: "http://" + addr + "/jwks", Issuer: jwttest.Issuer, Audience: jwttest.Audience,
		RefetchInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		t.Run("issuer", func(t *testing.T) {
			iss := jwttest.StartAt(t, addr, "/jwks")
			if _, err := v.Verify(context.Background(), iss.Mint(t, map[string]any{"sub": "alice"})); err != nil {
				t.Fatalf("issuer %d: %v", i+1, err)
			}
		})
	}
}
