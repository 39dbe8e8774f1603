package oauth

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// fakeProvider is an OAuth 2.0 provider for unit tests: it issues codes
// bound to a PKCE challenge, rotates refresh tokens (reuse → invalid_grant),
// serves userinfo, revocation and the device flow.
type fakeProvider struct {
	t   *testing.T
	srv *httptest.Server

	mu           sync.Mutex
	n            int
	codes        map[string]fakeCode
	access       map[string]string // access token → sub
	refresh      map[string]string // live refresh token → sub
	used         map[string]bool   // rotated refresh tokens
	refreshCalls int
	revoked      []string
	devicePolls  []time.Time
	deviceAuths  int // device authorization requests

	// knobs
	expiresIn       int           // seconds; 0 = no expires_in
	tokenStatus     int           // force this HTTP status on /token
	tokenBody       string        // with tokenStatus: this body instead of an RFC 6749 error
	tokenDelay      time.Duration // delay on /token
	refreshDelay    time.Duration
	refreshError    string // RFC 6749 error for refresh_token grants
	userinfoSub     string // override the sub userinfo reports
	deviceScript    []string
	deviceSubject   string
	deviceExpiresIn int    // seconds; 0 = 60
	onDevicePoll    func() // runs as a device poll arrives (e.g. moves the clock)
	// idToken, when set, gives code exchanges an id_token: it gets the
	// subject and the nonce of the authorization request.
	idToken func(sub, nonce string) string
	jwks    []byte // served at /jwks
	// Code redemptions, and the tokens each code gave: a reused code
	// revokes them, as RFC 6749 §4.1.2 says a provider SHOULD.
	codeExchanges int
	redeemed      map[string][]string
	// grantScope, when set, is the scope a code exchange answers with,
	// whatever was asked (a provider that grants less).
	grantScope string
	// noRefresh: token responses carry no refresh_token (a provider that
	// did not grant offline_access).
	noRefresh bool
}

type fakeCode struct{ challenge, sub, scope, redirect, nonce string }

func newFakeProvider(t *testing.T) *fakeProvider {
	p := &fakeProvider{t: t, codes: map[string]fakeCode{}, access: map[string]string{}, refresh: map[string]string{}, used: map[string]bool{}, expiresIn: 3600}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", p.token)
	mux.HandleFunc("GET /userinfo", p.userinfo)
	mux.HandleFunc("POST /revoke", p.revoke)
	mux.HandleFunc("POST /device", p.device)
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		defer p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(p.jwks)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *fakeProvider) URL() string { return p.srv.URL }

func (p *fakeProvider) next(prefix string) string {
	p.n++
	return fmt.Sprintf("%s-%d-%d", prefix, p.n, time.Now().UnixNano())
}

// approve plays the user: it checks the authorization URL the way a
// provider does and returns the code and state the browser would bring
// back to the callback.
func (p *fakeProvider) approve(authURL, sub string) (code, state string) {
	p.t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		p.t.Fatalf("authorization URL: %v", err)
	}
	q := u.Query()
	for _, k := range []string{"response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "code_challenge_method"} {
		if q.Get(k) == "" {
			p.t.Fatalf("authorization URL lacks %s: %s", k, authURL)
		}
	}
	if q.Get("code_challenge_method") != "S256" || q.Get("response_type") != "code" {
		p.t.Fatalf("authorization URL: want S256 and response_type=code: %s", authURL)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	code = p.next("code")
	p.codes[code] = fakeCode{challenge: q.Get("code_challenge"), sub: sub, scope: q.Get("scope"), redirect: q.Get("redirect_uri"), nonce: q.Get("nonce")}
	return code, q.Get("state")
}

func (p *fakeProvider) tokenResponse(w http.ResponseWriter, sub, scope, idToken string) (at, rt string) {
	at, rt = p.next("at"), p.next("rt")
	p.access[at] = sub
	p.refresh[rt] = sub
	resp := map[string]any{"access_token": at, "token_type": "Bearer", "refresh_token": rt, "scope": scope}
	if p.noRefresh {
		delete(resp, "refresh_token")
	}
	if idToken != "" {
		resp["id_token"] = idToken
	}
	if p.expiresIn > 0 {
		resp["expires_in"] = p.expiresIn
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
	return at, rt
}

// live reports whether an access token still works at the provider.
func (p *fakeProvider) live(at string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.access[at]
	return ok
}

func oauthError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": "fake says " + code})
}

func (p *fakeProvider) clientOK(r *http.Request) bool {
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	return id == "client-1" && secret == "secret-1"
}

func (p *fakeProvider) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	p.mu.Lock()
	delay, status, body := p.tokenDelay, p.tokenStatus, p.tokenBody
	if r.PostForm.Get("grant_type") == "refresh_token" {
		delay += p.refreshDelay
	}
	p.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if status != 0 && body != "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
		return
	}
	if status != 0 {
		oauthError(w, status, "server_error")
		return
	}
	if !p.clientOK(r) {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		p.codeExchanges++
		code := r.PostForm.Get("code")
		if issued, reused := p.redeemed[code]; reused {
			for _, tok := range issued {
				delete(p.access, tok)
				delete(p.refresh, tok)
			}
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		c, ok := p.codes[code]
		delete(p.codes, code)
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || r.PostForm.Get("redirect_uri") != c.redirect {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		idt := ""
		if p.idToken != nil {
			idt = p.idToken(c.sub, c.nonce)
		}
		scope := c.scope
		if p.grantScope != "" {
			scope = p.grantScope
		}
		at, rt := p.tokenResponse(w, c.sub, scope, idt)
		if p.redeemed == nil {
			p.redeemed = map[string][]string{}
		}
		p.redeemed[code] = []string{at, rt}
	case "refresh_token":
		p.refreshCalls++
		rt := r.PostForm.Get("refresh_token")
		sub, ok := p.refresh[rt]
		if p.refreshError != "" {
			oauthError(w, http.StatusBadRequest, p.refreshError)
			return
		}
		if !ok || p.used[rt] {
			oauthError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		p.used[rt] = true
		delete(p.refresh, rt)
		p.tokenResponse(w, sub, "read write", "")
	case "urn:ietf:params:oauth:grant-type:device_code":
		p.devicePolls = append(p.devicePolls, time.Now())
		if p.onDevicePoll != nil {
			p.onDevicePoll()
		}
		if len(p.deviceScript) > 0 {
			step := p.deviceScript[0]
			p.deviceScript = p.deviceScript[1:]
			if step != "ok" {
				oauthError(w, http.StatusBadRequest, step)
				return
			}
		}
		p.tokenResponse(w, p.deviceSubject, "read write", "")
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type")
	}
}

func (p *fakeProvider) userinfo(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	sub, ok := p.access[tok]
	if p.userinfoSub != "" {
		sub = p.userinfoSub
	}
	p.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"sub": sub, "id": 12345678901})
}

func (p *fakeProvider) revoke(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if !p.clientOK(r) {
		oauthError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	tok := r.PostForm.Get("token")
	p.revoked = append(p.revoked, r.PostForm.Get("token_type_hint"))
	delete(p.access, tok)
	delete(p.refresh, tok)
}

func (p *fakeProvider) device(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.deviceAuths++
	expiresIn := cmp.Or(p.deviceExpiresIn, 60)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"device_code": "dev-code-secret", "user_code": "WDJB-MJHT",
		"verification_uri": p.srv.URL + "/activate", "verification_uri_complete": p.srv.URL + "/activate?user_code=WDJB-MJHT",
		"expires_in": expiresIn, "interval": 1,
	})
}

func (p *fakeProvider) refreshes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refreshCalls
}

// memQueue is a deduplicating in-memory queue.
type memQueue struct {
	mu     sync.Mutex
	events []domain.Event
	seen   map[string]bool
	fail   bool
}

func (q *memQueue) Enqueue(_ context.Context, e domain.Event) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail {
		return fmt.Errorf("queue down")
	}
	if q.seen == nil {
		q.seen = map[string]bool{}
	}
	if q.seen[e.ID] {
		return nil
	}
	q.seen[e.ID] = true
	q.events = append(q.events, e)
	return nil
}

func (q *memQueue) list() []domain.Event {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]domain.Event(nil), q.events...)
}
