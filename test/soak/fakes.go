package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// loopback serves h on a free 127.0.0.1 port until stop is called.
func loopback(h http.Handler) (base string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// fakeProvider is the OAuth provider of the soak's apps: its authorize
// endpoint sends the browser straight back with a code, as after a
// consent, and its token endpoint answers any code with an access token
// that does not expire — the same non-expiring grant `agentauth bench`
// seeds, reached through the real callback instead of written into the
// store.
func fakeProvider() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		back, err := url.Parse(q.Get("redirect_uri"))
		if err != nil || q.Get("state") == "" || !isLoopback(back) {
			http.Error(w, "want a loopback redirect_uri and a state", http.StatusBadRequest)
			return
		}
		bq := back.Query()
		bq.Set("code", "soak-code-"+randomHex(8))
		bq.Set("state", q.Get("state"))
		back.RawQuery = bq.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("grant_type") != "authorization_code" || r.PostForm.Get("code") == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"invalid_grant"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "soak-at-" + randomHex(16), "token_type": "bearer", "scope": "read"})
	})
	return mux
}

func isLoopback(u *url.URL) bool {
	ip := net.ParseIP(u.Hostname())
	return u.Scheme == "http" && ip != nil && ip.IsLoopback()
}

// upstream is the http tools' service: a small JSON answer for any path.
func upstream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"orders":[{"id":1,"item":"soak"}],"path":%q}`, r.URL.Path)
	})
}

// issuer signs the tool routes' JWTs with an ES256 key whose JWKS it
// serves. (shared/testkit/jwttest does the same for tests, bound to a
// testing.TB; the soak is a program.)
type issuer struct {
	signer jose.Signer
	jwks   []byte
}

// The JWT issuer and REST audience the server is configured with.
const (
	jwtIssuer   = "https://issuer.soak.agentauth.test"
	jwtAudience = "agentauth-tools"
)

func newIssuer() (*issuer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	kid := "soak-" + randomHex(4)
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: kid, Algorithm: "ES256", Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		return nil, err
	}
	return &issuer{signer: signer, jwks: jwks}, nil
}

func (i *issuer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(i.jwks)
}

// mint signs a token for sub and audience aud valid for ttl.
func (i *issuer) mint(sub, aud string, ttl time.Duration) (string, error) {
	now := time.Now()
	return jwt.Signed(i.signer).Claims(map[string]any{
		"iss": jwtIssuer, "aud": aud, "sub": sub, "scope": "soak",
		"iat": now.Unix(), "exp": now.Add(ttl).Unix(),
	}).Serialize()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
