package e2ekit_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// callbackServer is the client's redirect URI endpoint on 127.0.0.1. It
// records every query it receives.
type callbackServer struct {
	*httptest.Server
	mu      sync.Mutex
	queries []url.Values
}

func newCallbackServer(t *testing.T) *callbackServer {
	t.Helper()
	cs := &callbackServer{}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/oauth/callback/") {
			http.NotFound(w, r) // e.g. /favicon.ico
			return
		}
		cs.mu.Lock()
		cs.queries = append(cs.queries, r.URL.Query())
		cs.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!DOCTYPE html><title>callback</title><p>callback received</p>")
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *callbackServer) last(t *testing.T) url.Values {
	t.Helper()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if len(cs.queries) == 0 {
		t.Fatal("callback server received no request")
	}
	return cs.queries[len(cs.queries)-1]
}

func randomState(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

type flowEnv struct {
	provider *e2ekit.Provider
	browser  *e2ekit.Browser
	cb       *callbackServer
	basic    oauth2.Config // client_secret_basic client
	post     oauth2.Config // client_secret_post client
	device   oauth2.Config // device flow client

	lastCode, lastVerifier string // of the last authorize
}

const (
	basicClientID = "e2e-basic"
	postClientID  = "e2e-post"
	clientSecret  = "e2e-secret"
)

func setup(t *testing.T) *flowEnv {
	t.Helper()
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)

	cb := newCallbackServer(t)
	redirectURI := cb.URL + "/oauth/callback/e2e"
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{
		Clients: []e2ekit.Client{
			{
				ClientID:     basicClientID,
				ClientSecret: clientSecret,
				RedirectURIs: []string{redirectURI},
				GrantTypes:   []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken, e2ekit.GrantDeviceCode},
			},
			{
				ClientID:                postClientID,
				ClientSecret:            clientSecret,
				RedirectURIs:            []string{redirectURI},
				TokenEndpointAuthMethod: "client_secret_post",
				GrantTypes:              []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken, e2ekit.GrantDeviceCode},
			},
		},
		AccessTokenTTL: 10 * time.Minute,
		Stats:          true,
	})
	b := e2ekit.StartBrowser(t)

	endpoint := p.Endpoint() // AuthStyleInHeader
	// oidc-provider accepts client_secret_basic and client_secret_post from
	// any client registered with either. With AuthStyleAutoDetect, x/oauth2
	// sends a failing token request twice (header, then params) until one
	// succeeds for that Config, which doubles the provider's error counts:
	// the stats assertions use the explicit header style.
	autoDetect := endpoint
	autoDetect.AuthStyle = oauth2.AuthStyleAutoDetect
	scopes := []string{"openid", "profile", "email", "offline_access", "notes:read"}
	return &flowEnv{
		provider: p,
		browser:  b,
		cb:       cb,
		basic:    oauth2.Config{ClientID: basicClientID, ClientSecret: clientSecret, Endpoint: endpoint, RedirectURL: redirectURI, Scopes: scopes},
		post:     oauth2.Config{ClientID: postClientID, ClientSecret: clientSecret, Endpoint: autoDetect, RedirectURL: redirectURI, Scopes: scopes},
		device:   oauth2.Config{ClientID: postClientID, ClientSecret: clientSecret, Endpoint: autoDetect, Scopes: []string{"openid", "profile", "email"}},
	}
}

// authorize runs Authorization Code + PKCE for login and returns the tokens.
func (e *flowEnv) authorize(ctx context.Context, t *testing.T, cfg oauth2.Config, login string) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	state := randomState(t)
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))

	res, err := e.browser.Authorize(ctx, authURL, login)
	if err != nil {
		t.Fatalf("browser authorize: %v (result %+v)", err, res)
	}
	if !strings.HasPrefix(res.FinalURL, cfg.RedirectURL+"?") {
		t.Fatalf("browser ended at %q, want the redirect URI %s", res.FinalURL, cfg.RedirectURL)
	}
	if res.Status != http.StatusOK || !strings.Contains(res.BodyText, "callback received") {
		t.Fatalf("callback page: status %d body %q", res.Status, res.BodyText)
	}
	q := e.cb.last(t)
	if got := q.Get("state"); got != state {
		t.Fatalf("state = %q, want %q", got, state)
	}
	if got := q.Get("iss"); got != e.provider.Issuer {
		t.Fatalf("iss = %q, want %q", got, e.provider.Issuer)
	}
	if e := q.Get("error"); e != "" {
		t.Fatalf("authorization error %s: %s", e, q.Get("error_description"))
	}
	code := q.Get("code")
	if code == "" {
		t.Fatal("no code in callback")
	}

	// Without the verifier the code is refused (PKCE is enforced); the
	// PKCE check runs before the code is consumed, so it stays usable.
	if _, err := cfg.Exchange(ctx, code); !isOAuthError(err, "invalid_grant") {
		t.Fatalf("exchange without code_verifier: err = %v, want invalid_grant", err)
	}
	if _, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(oauth2.GenerateVerifier())); !isOAuthError(err, "invalid_grant") {
		t.Fatalf("exchange with a wrong code_verifier: err = %v, want invalid_grant", err)
	}

	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if tok.AccessToken == "" || tok.RefreshToken == "" {
		t.Fatalf("token response lacks access or refresh token: access=%t refresh=%t", tok.AccessToken != "", tok.RefreshToken != "")
	}
	if tok.Extra("id_token") == nil {
		t.Error("no id_token for scope openid")
	}
	if s, _ := tok.Extra("scope").(string); !strings.Contains(s, "notes:read") {
		t.Errorf("granted scope %q lacks notes:read", s)
	}
	e.lastCode, e.lastVerifier = code, verifier
	return tok
}

func isOAuthError(err error, code string) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.ErrorCode == code
}

func refresh(ctx context.Context, cfg oauth2.Config, refreshToken string) (*oauth2.Token, error) {
	// An expired access token makes the TokenSource refresh right away.
	return cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)}).Token()
}

func checkUserInfo(ctx context.Context, t *testing.T, p *e2ekit.Provider, accessToken, wantSub string) {
	t.Helper()
	claims, status, err := p.UserInfo(ctx, accessToken)
	if err != nil || status != http.StatusOK {
		t.Fatalf("userinfo: status %d err %v body %v", status, err, claims)
	}
	if claims["sub"] != wantSub {
		t.Fatalf("userinfo sub = %v, want %s", claims["sub"], wantSub)
	}
	if claims["email"] != wantSub+"@example.test" || claims["name"] == nil {
		t.Fatalf("userinfo claims = %v, want name and email", claims)
	}
}

func TestAuthorizationCodePKCERefreshRevoke(t *testing.T) {
	env := setup(t)
	p := env.provider
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	tok := env.authorize(ctx, t, env.basic, "alice")
	checkUserInfo(ctx, t, p, tok.AccessToken, "alice")

	if _, status, err := p.UserInfo(ctx, "not-a-token"); err != nil || status != http.StatusUnauthorized {
		t.Fatalf("userinfo with a bogus token: status %d err %v, want 401", status, err)
	}

	// Refresh once: new access and refresh tokens.
	tok2, err := refresh(ctx, env.basic, tok.RefreshToken)
	if err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if tok2.AccessToken == "" || tok2.AccessToken == tok.AccessToken {
		t.Fatal("refresh did not return a new access token")
	}
	if tok2.RefreshToken == "" || tok2.RefreshToken == tok.RefreshToken {
		t.Fatal("refresh token was not rotated")
	}
	checkUserInfo(ctx, t, p, tok2.AccessToken, "alice")
	if active, err := p.Introspect(ctx, basicClientID, clientSecret, tok2.RefreshToken); err != nil || !active {
		t.Fatalf("introspect rotated refresh token: active=%t err=%v", active, err)
	}
	if active, err := p.Introspect(ctx, basicClientID, clientSecret, tok.RefreshToken); err != nil || active {
		t.Fatalf("introspect consumed refresh token: active=%t err=%v, want inactive", active, err)
	}

	// Reusing the rotated-away refresh token fails and revokes the grant.
	if _, err := refresh(ctx, env.basic, tok.RefreshToken); !isOAuthError(err, "invalid_grant") {
		t.Fatalf("reuse of a rotated refresh token: err = %v, want invalid_grant", err)
	}
	for name, tk := range map[string]string{"access token": tok2.AccessToken, "refresh token": tok2.RefreshToken, "first access token": tok.AccessToken} {
		if active, err := p.Introspect(ctx, basicClientID, clientSecret, tk); err != nil || active {
			t.Fatalf("after refresh token reuse, %s: active=%t err=%v, want inactive (grant revoked)", name, active, err)
		}
	}
	if _, status, _ := p.UserInfo(ctx, tok2.AccessToken); status != http.StatusUnauthorized {
		t.Fatalf("userinfo after grant revocation: status %d, want 401", status)
	}
	if _, err := refresh(ctx, env.basic, tok2.RefreshToken); !isOAuthError(err, "invalid_grant") {
		t.Fatalf("refresh with the newest refresh token after reuse: err = %v, want invalid_grant", err)
	}

	st, err := p.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Grants["authorization_code"] != 1 || st.Grants["refresh_token"] != 1 {
		t.Errorf("stats grants = %v, want authorization_code=1 refresh_token=1", st.Grants)
	}
	if st.RefreshReuse != 1 || st.RefreshFailures != 2 || st.GrantsRevoked != 1 || st.RefreshRotations != 1 {
		t.Errorf("stats = %+v, want refresh_reuse=1 refresh_failures=2 grants_revoked=1 refresh_rotations=1", st)
	}

	// A second user through the client_secret_post client (x/oauth2 auto
	// detects the auth style), then revocation of its refresh token.
	tokB := env.authorize(ctx, t, env.post, "bob")
	checkUserInfo(ctx, t, p, tokB.AccessToken, "bob")
	if active, err := p.Introspect(ctx, postClientID, clientSecret, tokB.AccessToken); err != nil || !active {
		t.Fatalf("introspect bob's access token: active=%t err=%v", active, err)
	}
	if err := p.Revoke(ctx, postClientID, clientSecret, tokB.RefreshToken, "refresh_token"); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	for name, tk := range map[string]string{"access token": tokB.AccessToken, "refresh token": tokB.RefreshToken} {
		if active, err := p.Introspect(ctx, postClientID, clientSecret, tk); err != nil || active {
			t.Fatalf("after revocation, %s: active=%t err=%v, want inactive", name, active, err)
		}
	}
	if _, err := refresh(ctx, env.post, tokB.RefreshToken); !isOAuthError(err, "invalid_grant") {
		t.Fatalf("refresh after revocation: err = %v, want invalid_grant", err)
	}
	st, err = p.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Revocations != 1 || st.GrantsRevoked != 2 || st.Grants["authorization_code"] != 2 {
		t.Errorf("stats after revocation = %+v, want revocations=1 grants_revoked=2 authorization_code=2", st)
	}
}

func TestCodeReplayRevokesGrant(t *testing.T) {
	env := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	tok := env.authorize(ctx, t, env.basic, "alice")
	checkUserInfo(ctx, t, env.provider, tok.AccessToken, "alice")
	if _, err := env.basic.Exchange(ctx, env.lastCode, oauth2.VerifierOption(env.lastVerifier)); !isOAuthError(err, "invalid_grant") {
		t.Fatalf("second exchange of the same code: err = %v, want invalid_grant", err)
	}
	// oidc-provider revokes the grant when a code is replayed.
	for name, tk := range map[string]string{"access token": tok.AccessToken, "refresh token": tok.RefreshToken} {
		if active, err := env.provider.Introspect(ctx, basicClientID, clientSecret, tk); err != nil || active {
			t.Fatalf("after code replay, %s: active=%t err=%v, want inactive", name, active, err)
		}
	}
}

func TestDeviceAuthorization(t *testing.T) {
	env := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// x/oauth2's DeviceAuth sends only client_id: a confidential client
	// must use client_secret_post and pass its secret as a parameter.
	da, err := env.device.DeviceAuth(ctx, oauth2.SetAuthURLParam("client_secret", clientSecret))
	if err != nil {
		t.Fatalf("device authorization: %v", err)
	}
	if da.VerificationURIComplete == "" {
		t.Fatal("no verification_uri_complete")
	}
	if _, err := env.browser.ApproveDevice(ctx, da.VerificationURIComplete, "carol"); err != nil {
		t.Fatalf("approve device: %v", err)
	}
	da.Interval = 1 // approved already; don't wait the provider's 5s
	tok, err := env.device.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatalf("device access token: %v", err)
	}
	checkUserInfo(ctx, t, env.provider, tok.AccessToken, "carol")
}

func TestBrowserOpenReplaysCallback(t *testing.T) {
	e2ekit.RequireBrowser(t)
	cb := newCallbackServer(t)
	b := e2ekit.StartBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := b.Open(ctx, cb.URL+"/oauth/callback/x?code=abc&state=xyz")
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusOK || res.Title != "callback" || !strings.Contains(res.BodyText, "callback received") {
		t.Fatalf("result = %+v", res)
	}
	if q := cb.last(t); q.Get("code") != "abc" || q.Get("state") != "xyz" {
		t.Fatalf("callback query = %v", q)
	}

	// A closed port: no error, but LoadError and FinalURL tell what happened.
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL + "/gone"
	closed.Close()
	res, err = b.Open(ctx, closedURL)
	if err != nil {
		t.Fatal(err)
	}
	if res.LoadError == "" || res.FinalURL != closedURL {
		t.Fatalf("open closed port: result = %+v", res)
	}
}

func TestStartProviderDefaults(t *testing.T) {
	e2ekit.RequireProvider(t)
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !strings.HasPrefix(p.Issuer, "http://127.0.0.1:") {
		t.Fatalf("issuer %q", p.Issuer)
	}
	for name, u := range map[string]string{
		"authorization": p.AuthorizationURL, "token": p.TokenURL, "userinfo": p.UserInfoURL,
		"revocation": p.RevocationURL, "introspection": p.IntrospectionURL,
		"device_authorization": p.DeviceAuthorizationURL, "jwks": p.JWKSURL,
	} {
		if !strings.HasPrefix(u, p.Issuer+"/") {
			t.Errorf("%s endpoint %q not under the issuer", name, u)
		}
	}
	if got := p.Discovery["code_challenge_methods_supported"]; fmt.Sprint(got) != "[S256]" {
		t.Errorf("code_challenge_methods_supported = %v", got)
	}
	// Stats are off unless asked for.
	if _, err := p.Stats(ctx); err == nil {
		t.Error("/__stats answered without PROVIDER_TEST_STATS=1")
	}
	// The default demo client authenticates (client_secret_basic).
	if _, err := p.Introspect(ctx, "agentauth-demo", "demo-secret", "x"); err != nil {
		t.Errorf("introspect as agentauth-demo: %v", err)
	}
	if _, err := p.Introspect(ctx, "agentauth-demo", "wrong", "x"); err == nil {
		t.Error("introspect with a wrong secret succeeded")
	}
}
