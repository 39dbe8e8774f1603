package oauth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

const (
	signInClientID     = "console"
	signInClientSecret = "console-secret-value"
	signInRedirect     = "https://console.example/console/auth/callback"
)

var (
	signInKeyOnce      sync.Once
	signInKey, rogueIK *rsa.PrivateKey
)

// signInKeys returns the fake provider's signing key and a key it does not
// publish.
func signInKeys(t *testing.T) (*rsa.PrivateKey, *rsa.PrivateKey) {
	t.Helper()
	signInKeyOnce.Do(func() {
		var err error
		if signInKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
		if rogueIK, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
	})
	return signInKey, rogueIK
}

// signInProvider is an OpenID provider in a test server: discovery, JWKS
// and a token endpoint that checks the client, the redirect URI and the
// PKCE verifier against the challenge of the code, and answers with an
// RS256 ID token. approve plays the browser and the authorization endpoint.
type signInProvider struct {
	t   *testing.T
	srv *httptest.Server
	now func() time.Time

	mu     sync.Mutex
	codes  map[string]signInCode
	issued []string // every code, access token and ID token handed out
	// idToken edits the claims of the next ID tokens; rogue signs them
	// with a key the JWKS does not hold.
	idToken func(map[string]any)
	rogue   bool
}

type signInCode struct{ challenge, nonce, redirect string }

func newSignInProvider(t *testing.T, now func() time.Time) *signInProvider {
	t.Helper()
	p := &signInProvider{t: t, now: now, codes: map[string]signInCode{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                p.srv.URL,
			"authorization_endpoint":                p.srv.URL + "/auth",
			"token_endpoint":                        p.srv.URL + "/token",
			"jwks_uri":                              p.srv.URL + "/jwks",
			"response_types_supported":              []string{"code"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		key, _ := signInKeys(t)
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *signInProvider) fail(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

func (p *signInProvider) token(w http.ResponseWriter, r *http.Request) {
	if id, secret, ok := r.BasicAuth(); !ok || id != signInClientID || secret != signInClientSecret {
		p.fail(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	if r.PostFormValue("grant_type") != "authorization_code" {
		p.fail(w, http.StatusBadRequest, "unsupported_grant_type")
		return
	}
	p.mu.Lock()
	c, ok := p.codes[r.PostFormValue("code")]
	delete(p.codes, r.PostFormValue("code")) // single use, as a real provider
	mutate, rogue := p.idToken, p.rogue
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostFormValue("code_verifier")))
	switch {
	case !ok, r.PostFormValue("redirect_uri") != c.redirect,
		base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge:
		p.fail(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	now := p.now()
	claims := map[string]any{
		"iss": p.srv.URL, "aud": signInClientID, "sub": "admin", "nonce": c.nonce,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		"agentauth_roles": []string{"agentauth:platform-admin"}, "big": json.Number("12345678901234567890"),
	}
	if mutate != nil {
		mutate(claims)
	}
	good, bad := signInKeys(p.t)
	key := good
	if rogue {
		key = bad
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: "k1"}}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		p.t.Error(err)
		return
	}
	payload, _ := json.Marshal(claims)
	jws, err := signer.Sign(payload)
	if err != nil {
		p.t.Error(err)
		return
	}
	idToken, _ := jws.CompactSerialize()
	at := randomToken()
	p.mu.Lock()
	p.issued = append(p.issued, at, idToken)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": 3600, "id_token": idToken})
}

// approve checks the authorization request as the provider's endpoint
// would, issues a code for it and returns the callback's query.
func (p *signInProvider) approve(authURL string) url.Values {
	p.t.Helper()
	u, err := url.Parse(authURL)
	if err != nil || !strings.HasPrefix(authURL, p.srv.URL+"/auth?") {
		p.t.Fatalf("authorization URL %q is not the provider's", authURL)
	}
	q := u.Query()
	for k, want := range map[string]string{
		"response_type": "code", "client_id": signInClientID, "redirect_uri": signInRedirect,
		"code_challenge_method": "S256", "scope": "openid profile email",
	} {
		if got := q.Get(k); got != want {
			p.t.Fatalf("authorization request %s = %q, want %q", k, got, want)
		}
	}
	for _, k := range []string{"state", "nonce", "code_challenge"} {
		if len(q.Get(k)) < 43 {
			p.t.Fatalf("authorization request %s = %q, want 32 random bytes", k, q.Get(k))
		}
	}
	code := randomToken()
	p.mu.Lock()
	p.codes[code] = signInCode{challenge: q.Get("code_challenge"), nonce: q.Get("nonce"), redirect: q.Get("redirect_uri")}
	p.issued = append(p.issued, code)
	p.mu.Unlock()
	return url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {p.srv.URL}}
}

func (p *signInProvider) secrets() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string{signInClientSecret}, p.issued...)
}

type signInClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *signInClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *signInClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func signInKey32(b byte) []byte { return []byte(strings.Repeat(string(rune('a'+b)), 32)) }

func newTestSignIn(t *testing.T, p *signInProvider, clock *signInClock, keys ...[]byte) *SignIn {
	t.Helper()
	if len(keys) == 0 {
		keys = [][]byte{signInKey32(0)}
	}
	s, err := NewSignIn(SignInConfig{
		Issuer: p.srv.URL, ClientID: signInClientID, ClientSecret: domain.NewSecret(signInClientSecret),
		RedirectURL: signInRedirect, HTTPClient: p.srv.Client(), Keys: keys, Now: clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSignIn(t *testing.T) {
	oldKey, newKey := signInKey32(1), signInKey32(2)
	cases := []struct {
		name string
		// beginKeys and finishKeys are the keys of the SignIn that begins
		// and the one that finishes (default: one shared key).
		beginKeys, finishKeys [][]byte
		returnTo              string
		idToken               func(map[string]any)
		rogue                 bool
		callback              func(q url.Values)
		pending               func(t *testing.T, s *SignIn, v string) string
		advance               time.Duration
		wantReason            string
		wantDetail            string
		wantReturnTo          string
	}{
		{name: "happy path", returnTo: "/console/grants?app=a", wantReturnTo: "/console/grants?app=a"},
		{name: "returnTo protocol-relative", returnTo: "//evil.example/x", wantReturnTo: "/"},
		{name: "returnTo backslash", returnTo: `/\evil.example`, wantReturnTo: "/"},
		{name: "returnTo absolute URL", returnTo: "https://evil.example/", wantReturnTo: "/"},
		{name: "returnTo empty", returnTo: "", wantReturnTo: "/"},
		{name: "returnTo relative", returnTo: "console", wantReturnTo: "/"},
		{
			name: "state mismatch", callback: func(q url.Values) { q.Set("state", randomToken()) },
			wantReason: SignInStateMismatch,
		},
		{
			name: "state missing", callback: func(q url.Values) { q.Del("state") },
			wantReason: SignInStateMismatch,
		},
		{name: "pending expired", advance: pendingTTL, wantReason: SignInPendingExpired},
		{name: "pending just in time", advance: pendingTTL - time.Second},
		{
			name: "pending sealed under a rotated-out key", beginKeys: [][]byte{oldKey}, finishKeys: [][]byte{newKey},
			wantReason: SignInPendingInvalid,
		},
		{name: "pending sealed under Keys[1] opens", beginKeys: [][]byte{oldKey}, finishKeys: [][]byte{newKey, oldKey}},
		{
			name: "keys are not used directly", beginKeys: [][]byte{oldKey},
			pending: func(t *testing.T, s *SignIn, v string) string {
				// The same content sealed with the configured key itself,
				// not the key derived from it.
				p, err := s.open(v)
				if err != nil {
					t.Fatal(err)
				}
				raw := &SignIn{clientID: signInClientID, keys: []pendingKey{rawKey(t, oldKey, s.keys[0].id)}}
				return raw.seal(p)
			},
			wantReason: SignInPendingInvalid,
		},
		{
			name: "tampered pending",
			pending: func(_ *testing.T, _ *SignIn, v string) string {
				raw, _ := base64.RawURLEncoding.DecodeString(v)
				raw[len(raw)/2] ^= 1
				return base64.RawURLEncoding.EncodeToString(raw)
			},
			wantReason: SignInPendingInvalid,
		},
		{name: "garbage pending", pending: func(*testing.T, *SignIn, string) string { return "not-a-pending" }, wantReason: SignInPendingInvalid},
		{name: "no pending", pending: func(*testing.T, *SignIn, string) string { return "" }, wantReason: SignInPendingInvalid},
		{
			name: "pending of another client",
			pending: func(t *testing.T, s *SignIn, v string) string {
				p, err := s.open(v)
				if err != nil {
					t.Fatal(err)
				}
				other := &SignIn{clientID: "another-console", keys: s.keys}
				return other.seal(p)
			},
			wantReason: SignInPendingInvalid,
		},
		{
			name: "wrong PKCE verifier",
			pending: func(t *testing.T, s *SignIn, v string) string {
				p, err := s.open(v)
				if err != nil {
					t.Fatal(err)
				}
				p.Verifier = pendingFor("/", time.Now()).Verifier
				return s.seal(p)
			},
			wantReason: SignInExchangeFailed, wantDetail: "invalid_grant",
		},
		{
			name: "provider error access_denied",
			callback: func(q url.Values) {
				q.Del("code")
				q.Set("error", "access_denied")
				q.Set("error_description", "End-User aborted interaction\n")
			},
			wantReason: SignInProviderError, wantDetail: "access_denied (End-User aborted interaction)",
		},
		{
			name:       "provider error code that is not a code",
			callback:   func(q url.Values) { q.Del("code"); q.Set("error", "<script>") },
			wantReason: SignInProviderError, wantDetail: "unknown_error",
		},
		{
			name: "answer of another issuer", callback: func(q url.Values) { q.Set("iss", "https://idp.evil.example") },
			wantReason: SignInProviderError,
		},
		{name: "no code", callback: func(q url.Values) { q.Del("code") }, wantReason: SignInExchangeFailed},
		{
			name: "code refused", callback: func(q url.Values) { q.Set("code", "not-issued") },
			wantReason: SignInExchangeFailed, wantDetail: "invalid_grant",
		},
		{
			name: "wrong nonce", idToken: func(c map[string]any) { c["nonce"] = randomToken() },
			wantReason: SignInIDTokenInvalid, wantDetail: "nonce",
		},
		{
			name: "no nonce", idToken: func(c map[string]any) { delete(c, "nonce") },
			wantReason: SignInIDTokenInvalid, wantDetail: "nonce",
		},
		{
			name: "wrong audience", idToken: func(c map[string]any) { c["aud"] = "another-client" },
			wantReason: SignInIDTokenInvalid, wantDetail: "is not for client console",
		},
		{
			name: "several audiences without azp", idToken: func(c map[string]any) { c["aud"] = []string{signInClientID, "another-client"} },
			wantReason: SignInIDTokenInvalid, wantDetail: "azp",
		},
		{
			name: "several audiences with azp",
			idToken: func(c map[string]any) {
				c["aud"], c["azp"] = []string{signInClientID, "another-client"}, signInClientID
			},
		},
		{
			name: "wrong issuer", idToken: func(c map[string]any) { c["iss"] = "https://idp.evil.example" },
			wantReason: SignInIDTokenInvalid, wantDetail: "was not issued by",
		},
		{
			name: "expired ID token",
			idToken: func(c map[string]any) {
				c["exp"] = c["iat"].(int64) - 1
			},
			wantReason: SignInIDTokenInvalid, wantDetail: "expired",
		},
		{name: "bad signature", rogue: true, wantReason: SignInIDTokenInvalid, wantDetail: "failed verification"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := &signInClock{t: time.Now()}
			p := newSignInProvider(t, clock.Now)
			p.idToken, p.rogue = tc.idToken, tc.rogue
			begin := newTestSignIn(t, p, clock, tc.beginKeys...)
			finish := begin
			if tc.finishKeys != nil {
				finish = newTestSignIn(t, p, clock, tc.finishKeys...)
			}
			ctx := context.Background()

			authURL, pending, err := begin.Begin(ctx, tc.returnTo)
			if err != nil {
				t.Fatal(err)
			}
			opened, err := begin.open(pending)
			if err != nil {
				t.Fatalf("own pending does not open: %v", err)
			}
			for _, secret := range []string{opened.State, opened.Nonce, opened.Verifier} {
				if strings.Contains(pending, secret) {
					t.Fatal("pending holds a secret in the clear")
				}
			}
			if got := time.Unix(opened.Expires, 0); !got.Equal(clock.Now().Add(pendingTTL).Truncate(time.Second)) {
				t.Fatalf("pending expires %v, want 10 minutes out", got)
			}
			query := p.approve(authURL)
			if tc.callback != nil {
				tc.callback(query)
			}
			if tc.pending != nil {
				pending = tc.pending(t, begin, pending)
			}
			clock.Advance(tc.advance)

			got, err := finish.Finish(ctx, query, pending)

			secrets := append(p.secrets(), opened.State, opened.Nonce, opened.Verifier, pending)
			if err != nil {
				for _, s := range secrets {
					if s != "" && strings.Contains(err.Error(), s) {
						t.Fatalf("error %q holds a secret", err)
					}
				}
			}
			if tc.wantReason != "" {
				var se *SignInError
				if !errors.As(err, &se) || se.Reason != tc.wantReason {
					t.Fatalf("Finish = %+v, %v; want reason %s", got, err, tc.wantReason)
				}
				if !strings.Contains(se.Detail, tc.wantDetail) {
					t.Fatalf("detail %q, want it to contain %q", se.Detail, tc.wantDetail)
				}
				return
			}
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if tc.wantReturnTo != "" && got.ReturnTo != tc.wantReturnTo {
				t.Fatalf("ReturnTo = %q, want %q", got.ReturnTo, tc.wantReturnTo)
			}
			if got.Claims["sub"] != "admin" || got.Claims["big"] != json.Number("12345678901234567890") {
				t.Fatalf("claims = %v", got.Claims)
			}
			roles, _ := got.Claims["agentauth_roles"].([]any)
			if len(roles) != 1 || roles[0] != "agentauth:platform-admin" {
				t.Fatalf("agentauth_roles = %v", got.Claims["agentauth_roles"])
			}
			if want := time.Unix(clock.Now().Add(time.Hour).Unix(), 0); !got.Expiry.Equal(want) {
				t.Fatalf("Expiry = %v, want %v", got.Expiry, want)
			}
			// The code is single use: the same callback again is refused.
			var se *SignInError
			if _, err := finish.Finish(ctx, query, pending); !errors.As(err, &se) || se.Reason != SignInExchangeFailed {
				t.Fatalf("replayed callback: %v", err)
			}
		})
	}
}

// rawKey is a pendingKey whose AEAD key is secret itself, not derived.
func rawKey(t *testing.T, secret []byte, id [kidLen]byte) pendingKey {
	t.Helper()
	block, err := aes.NewCipher(secret)
	if err != nil {
		t.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return pendingKey{id: id, aead: aead}
}

func TestSafeReturnTo(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "/",
		"/":                   "/",
		"/console/grants?x=1": "/console/grants?x=1",
		"//evil":              "/",
		"///evil":             "/",
		`/\evil`:              "/",
		"https://evil":        "/",
		"javascript:alert(1)": "/",
		"console":             "/",
		"/a\r\nSet-Cookie: x": "/",
		"/" + strings.Repeat("a", maxReturnToLen): "/",
	} {
		if got := SafeReturnTo(in); got != want {
			t.Errorf("SafeReturnTo(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewSignInValidates(t *testing.T) {
	good := SignInConfig{Issuer: "https://idp.example", ClientID: "c", RedirectURL: signInRedirect, Keys: [][]byte{signInKey32(0)}}
	if _, err := NewSignIn(good); err != nil {
		t.Fatalf("good config: %v", err)
	}
	for name, edit := range map[string]func(*SignInConfig){
		"no issuer":        func(c *SignInConfig) { c.Issuer = "" },
		"relative issuer":  func(c *SignInConfig) { c.Issuer = "idp.example" },
		"no client id":     func(c *SignInConfig) { c.ClientID = "" },
		"no redirect":      func(c *SignInConfig) { c.RedirectURL = "/console/auth/callback" },
		"no keys":          func(c *SignInConfig) { c.Keys = nil },
		"short key":        func(c *SignInConfig) { c.Keys = [][]byte{signInKey32(0), []byte("short")} },
		"scopes no openid": func(c *SignInConfig) { c.Scopes = []string{"profile"} },
	} {
		cfg := good
		edit(&cfg)
		if _, err := NewSignIn(cfg); err == nil {
			t.Errorf("%s: NewSignIn accepted %+v", name, cfg)
		}
	}
}

func TestSignInDiscoveryFailed(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	issuer := srv.URL
	srv.Close() // nothing listens there any more
	s, err := NewSignIn(SignInConfig{Issuer: issuer, ClientID: "c", RedirectURL: signInRedirect, Keys: [][]byte{signInKey32(0)}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Begin(context.Background(), "/")
	var se *SignInError
	if !errors.As(err, &se) || se.Reason != SignInDiscoveryFailed || !strings.Contains(se.Detail, "provider unreachable") {
		t.Fatalf("Begin = %v, want discovery_failed, provider unreachable", err)
	}
}

func TestSignInPublicClientSendsNoSecret(t *testing.T) {
	if got := authStyle(domain.Secret{}, []string{"client_secret_basic"}); got != oauth2.AuthStyleInParams {
		t.Fatalf("public client auth style %v", got)
	}
	if got := authStyle(domain.NewSecret("s"), []string{"client_secret_post"}); got != oauth2.AuthStyleInParams {
		t.Fatalf("post-only provider auth style %v", got)
	}
	if got := authStyle(domain.NewSecret("s"), nil); got != oauth2.AuthStyleInHeader {
		t.Fatalf("default auth style %v", got)
	}
}

func TestSignInErrorText(t *testing.T) {
	e := &SignInError{Reason: SignInStateMismatch, Detail: "start again"}
	if got := e.Error(); got != "sign-in refused (state_mismatch): start again" {
		t.Fatalf("Error() = %q", got)
	}
	long := providerRefusal("access_denied", strings.Repeat("x", 500))
	if n := len([]rune(long.Detail)); n > 300 {
		t.Fatalf("provider description kept at %d runes", n)
	}
}

// FuzzSignInOpenPending: an untrusted cookie never panics and opens only
// as what was sealed.
func FuzzSignInOpenPending(f *testing.F) {
	s, err := NewSignIn(SignInConfig{Issuer: "https://idp.example", ClientID: "c", RedirectURL: signInRedirect, Keys: [][]byte{signInKey32(0), signInKey32(1)}})
	if err != nil {
		f.Fatal(err)
	}
	// Fixed content: the fuzzing workers run this setup again.
	want := pending{Verifier: strings.Repeat("v", 43), State: strings.Repeat("s", 43), Nonce: strings.Repeat("n", 43), ReturnTo: "/x", Expires: 1_800_000_600}
	f.Add(s.seal(want))
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, v string) {
		p, err := s.open(v)
		if err == nil && p != want {
			t.Fatalf("%q opened as %+v", v, p)
		}
	})
}

// Claims keep every claim of the token.
func TestSignInClaimsAreAll(t *testing.T) {
	clock := &signInClock{t: time.Now()}
	p := newSignInProvider(t, clock.Now)
	p.idToken = func(c map[string]any) { c["tenant_id"] = "acme"; c["agentauth_roles"] = []string{"agentauth:admin"} }
	s := newTestSignIn(t, p, clock)
	authURL, pending, err := s.Begin(context.Background(), "/console/")
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Finish(context.Background(), p.approve(authURL), pending)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"iss", "aud", "sub", "exp", "iat", "nonce", "tenant_id", "agentauth_roles"} {
		if _, ok := got.Claims[k]; !ok {
			t.Fatalf("claim %s missing from %v", k, got.Claims)
		}
	}
}
