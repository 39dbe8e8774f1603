package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

func TestPKCEVectorRFC7636(t *testing.T) {
	// RFC 7636 Appendix B.
	if got := oauth2.S256ChallengeFromVerifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"); got != "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" {
		t.Fatalf("challenge = %s", got)
	}
}

func TestIsSubset(t *testing.T) {
	for _, tc := range []struct {
		sub, super []string
		want       bool
	}{
		{nil, []string{"a"}, true},
		{[]string{"a"}, []string{"a", "b"}, true},
		{[]string{"b", "a"}, []string{"a", "b"}, true},
		{[]string{"a", "c"}, []string{"a", "b"}, false},
		{[]string{"a"}, nil, false},
		{[]string{"A"}, []string{"a"}, false},
	} {
		if got := IsSubset(tc.sub, tc.super); got != tc.want {
			t.Errorf("IsSubset(%v, %v) = %v", tc.sub, tc.super, got)
		}
	}
}

func TestTokenValid(t *testing.T) {
	now := time.Date(2026, 1, 31, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	for _, tc := range []struct {
		name    string
		exp     *time.Time
		revoked bool
		minTTL  int
		want    bool
	}{
		{"no expiry is forever", nil, false, 300, true},
		{"revoked never valid", nil, true, 0, false},
		{"well inside", at(time.Hour), false, 300, true},
		{"exactly minTtl left is not enough", at(300 * time.Second), false, 300, false},
		{"one second more is", at(301 * time.Second), false, 300, true},
		{"inside minTtl", at(100 * time.Second), false, 300, false},
		{"minTtl 0 and still alive", at(time.Second), false, 0, true},
		{"expired", at(-time.Second), false, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := domain.Grant{Revoked: tc.revoked, Token: domain.GrantToken{ExpiresAt: tc.exp}}
			if got := TokenValid(g, tc.minTTL, now); got != tc.want {
				t.Fatalf("TokenValid = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGetAccessTokenErrors(t *testing.T) {
	h := newHarness(t)
	neg, huge := -1, MaxMinTTLSeconds+1
	for _, tc := range []struct {
		name string
		mut  func(*TokenRequest)
		code string
	}{
		{"unknown app", func(r *TokenRequest) { r.AppRef = appRef("nope") }, CodeOAuthAppNotFound},
		{"wrong kind", func(r *TokenRequest) { r.AppRef = domain.ObjectRef{Kind: "Tool", Name: "global"} }, CodeOAuthAppNotFound},
		{"no subjects at all", func(r *TokenRequest) { r.Auth = domain.TurnAuth{} }, CodeSubjectUnavailable},
		{"global subject missing", func(r *TokenRequest) { r.Auth = auth("", "demo:user:alice") }, CodeSubjectUnavailable},
		{"scope outside the app", func(r *TokenRequest) { r.Scopes = []string{"read", "admin"} }, CodeScopeNotAllowed},
		{"negative minTtlSeconds", func(r *TokenRequest) { r.MinTTLSeconds = &neg }, CodeConfigurationError},
		{"minTtlSeconds beyond a year", func(r *TokenRequest) { r.MinTTLSeconds = &huge }, CodeConfigurationError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := h.request("global", tc.mut)
			if res.Status != StatusError || res.Error.Code != tc.code {
				t.Fatalf("got %+v, want error %s", res, tc.code)
			}
			if res.Error.Message == "" {
				t.Fatal("error without a message")
			}
		})
	}
	t.Run("an unknown app names the app it likely misspells", func(t *testing.T) {
		for ref, want := range map[domain.ObjectRef]string{
			appRef("globl"):                "OAuthApp/globl is not in the bundle (did you mean OAuthApp/global?)",
			appRef("nope"):                 "OAuthApp/nope is not in the bundle",
			{Kind: "Tool", Name: "global"}: "Tool/global is not in the bundle (an OAuthApp reference is OAuthApp/<name>)",
		} {
			res := h.request("global", func(r *TokenRequest) { r.AppRef = ref })
			if res.Status != StatusError || res.Error.Code != CodeOAuthAppNotFound || res.Error.Message != want {
				t.Fatalf("%v: got %+v, want %q", ref, res.Error, want)
			}
		}
	})
	t.Run("user app needs the user subject", func(t *testing.T) {
		res := h.request("user", func(r *TokenRequest) { r.Auth = auth("demo:team:T1", "") })
		if res.Status != StatusError || res.Error.Code != CodeSubjectUnavailable || !strings.Contains(res.Error.Message, "subjects.user") {
			t.Fatalf("got %+v", res)
		}
	})
}

func TestAuthorizationURLAndSessionRecord(t *testing.T) {
	h := newHarness(t)
	res := h.request("global", func(r *TokenRequest) { r.Scopes = []string{"write", "read"} })
	if res.Status != StatusAuthorizationRequired {
		t.Fatalf("got %+v", res)
	}
	if !strings.HasPrefix(res.AuthSessionID, "as-") || res.Message == "" {
		t.Fatalf("result %+v", res)
	}
	if got := res.SessionExpiresAt.Sub(h.clock.Now()); got != DefaultSessionTTL {
		t.Fatalf("session lifetime %s, want %s", got, DefaultSessionTTL)
	}
	u, _ := url.Parse(res.AuthorizationURL)
	q := u.Query()
	want := map[string]string{
		"response_type": "code", "client_id": "client-1",
		"redirect_uri":          "http://127.0.0.1:8080/oauth/callback/global",
		"scope":                 "write read",
		"code_challenge_method": "S256",
		"prompt":                "consent", "access_type": "offline",
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s = %q, want %q", k, q.Get(k), v)
		}
	}
	if q.Has("max_age") {
		t.Error("a non-string option became a query parameter")
	}
	if u.Host != strings.TrimPrefix(h.p.URL(), "http://") || u.Path != "/authorize" {
		t.Errorf("URL %s does not start with the app's authorizationUrl", res.AuthorizationURL)
	}

	s, err := h.store.GetSession(context.Background(), res.AuthSessionID)
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != domain.SessionPending || s.Subject != "demo:team:T1" || s.SubjectMode != "global" || s.Resume.AgentName != "planner" || s.Resume.Origin["channel"] != "C123" {
		t.Fatalf("session %+v", s)
	}
	verifier, err := h.keyring.Open(context.Background(), s.Flow.PKCE.CodeVerifier, domain.Binding{Record: "session", RecordID: s.ID, Field: "codeVerifier"})
	if err != nil {
		t.Fatal(err)
	}
	if oauth2.S256ChallengeFromVerifier(string(verifier)) != q.Get("code_challenge") || s.Flow.PKCE.CodeChallenge != q.Get("code_challenge") {
		t.Fatal("code_challenge is not S256 of the stored verifier")
	}
	state, err := h.keyring.Open(context.Background(), s.Flow.State, domain.Binding{Record: "session", RecordID: s.ID, Field: "state"})
	if err != nil || string(state) != q.Get("state") {
		t.Fatalf("stored state differs from the URL's: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(h.home, "oauth", "sessions", s.ID+".enc.json"))
	if strings.Contains(string(raw), string(verifier)) || strings.Contains(string(raw), `"state":"`+string(state)) {
		t.Fatal("verifier or state in plaintext on disk")
	}
}

func TestCodeFlowReadyAndEvent(t *testing.T) {
	h := newHarness(t)
	res := h.request("user")
	code, state := h.p.approve(res.AuthorizationURL, "alice")
	out, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["user"], url.Values{"code": {code}, "state": {state}})
	if err != nil {
		t.Fatal(err)
	}
	if out.GrantID != GrantID(appRef("user"), "demo:user:alice") || out.Subject != "demo:user:alice" {
		t.Fatalf("outcome %+v", out)
	}
	ready := h.request("user")
	if ready.Status != StatusReady || !strings.HasPrefix(ready.AccessToken.Reveal(), "at-") || ready.TokenType != "Bearer" || ready.ExpiresAt == nil {
		t.Fatalf("ready %+v", ready)
	}
	if strings.Join(ready.Scopes, " ") != "read write" {
		t.Fatalf("scopes %v", ready.Scopes)
	}
	s, _ := h.store.GetSession(context.Background(), res.AuthSessionID)
	if s.Status != domain.SessionCompleted {
		t.Fatalf("session %s", s.Status)
	}
	ev := h.queue.list()
	if len(ev) != 1 {
		t.Fatalf("%d events, want 1", len(ev))
	}
	e := ev[0]
	if e.ID != res.AuthSessionID || e.AgentName != "planner" || e.InstanceKey != testResume.InstanceKey || e.SwarmRef.Name != "default" || e.Origin["connector"] != "slack-main" || e.Auth.Subjects.User != "demo:user:alice" {
		t.Fatalf("event %+v", e)
	}
	var granted domain.AuthGrantedEvent
	if err := json.Unmarshal([]byte(e.Input), &granted); err != nil {
		t.Fatal(err)
	}
	if granted.Type != "auth.granted" || granted.GrantID != out.GrantID || granted.Provider != "demo" || granted.Subject != "demo:user:alice" || granted.OAuthAppRef != appRef("user") || len(granted.ScopesGranted) != 2 {
		t.Fatalf("auth.granted %+v", granted)
	}

	// The same callback again: refused, nothing new queued or written.
	before, _ := h.store.GetGrant(context.Background(), out.GrantID)
	_, err = h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["user"], url.Values{"code": {code}, "state": {state}})
	var ce *CallbackError
	if !errors.As(err, &ce) || ce.Reason != ReasonSessionAlreadyUsed {
		t.Fatalf("replay: %v", err)
	}
	after, _ := h.store.GetGrant(context.Background(), out.GrantID)
	if len(h.queue.list()) != 1 || after.Version != before.Version {
		t.Fatal("replayed callback changed something")
	}
	for _, secret := range []string{ready.AccessToken.Reveal(), code, state} {
		if strings.Contains(h.logs.String(), secret) {
			t.Fatalf("a secret reached the logs")
		}
	}
}

func TestCallbackFailures(t *testing.T) {
	type setup struct {
		h     *harness
		app   string
		query url.Values
		id    string
	}
	pending := func(t *testing.T, app, sub string) setup {
		h := newHarness(t)
		res := h.request(app)
		code, state := h.p.approve(res.AuthorizationURL, sub)
		return setup{h: h, app: app, query: url.Values{"code": {code}, "state": {state}}, id: res.AuthSessionID}
	}
	for _, tc := range []struct {
		name   string
		make   func(t *testing.T) setup
		reason string
		status domain.SessionStatus // "" when no session is touched
	}{
		{"missing state", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.query.Del("state")
			return s
		}, ReasonMissingState, domain.SessionPending},
		{"garbage state", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.query.Set("state", "not-a-state")
			return s
		}, ReasonInvalidState, domain.SessionPending},
		{"tampered state", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			st := s.query.Get("state")
			body, sig, _ := strings.Cut(st, ".")
			b := []byte(body)
			b[3] ^= 1
			s.query.Set("state", string(b)+"."+sig)
			return s
		}, ReasonInvalidState, domain.SessionPending},
		{"forged state (another key)", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			other, _ := NewStateCodec([][]byte{[]byte(strings.Repeat("k", 32))})
			s.query.Set("state", other.Encode(s.id, time.Now()))
			return s
		}, ReasonInvalidState, domain.SessionPending},
		{"signed state for an unknown session", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.query.Set("state", s.h.m.state.Encode("as-00000000000000000000000000000000", time.Now()))
			return s
		}, ReasonSessionNotFound, domain.SessionPending},
		{"state of this session but not the one issued", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.query.Set("state", s.h.m.state.Encode(s.id, time.Now()))
			return s
		}, ReasonInvalidState, domain.SessionPending},
		{"callback on another app's path", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.app = "user"
			return s
		}, ReasonWrongCallback, domain.SessionPending},
		{"provider error", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.query = url.Values{"state": s.query["state"], "error": {"access_denied"}, "error_description": {"<script>alert(1)</script>"}}
			return s
		}, ReasonProviderError, domain.SessionFailed},
		{"missing code", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.query.Del("code")
			return s
		}, ReasonMissingCode, domain.SessionFailed},
		{"code the provider rejects", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.query.Set("code", "stolen-code")
			return s
		}, ReasonTokenExchangeFailed, domain.SessionFailed},
		{"failing token endpoint", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.h.p.tokenStatus = 500
			return s
		}, ReasonTokenExchangeFailed, domain.SessionFailed},
		{"slow token endpoint", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.h.p.tokenDelay = 5 * time.Second
			return s
		}, ReasonTokenExchangeTimeout, domain.SessionFailed},
		{"expired session", func(t *testing.T) setup {
			s := pending(t, "global", "x")
			s.h.clock.Advance(DefaultSessionTTL + time.Second)
			return s
		}, ReasonSessionExpired, domain.SessionExpired},
		{"subject mismatch", func(t *testing.T) setup {
			return pending(t, "user", "bob")
		}, ReasonSubjectMismatch, domain.SessionFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.make(t)
			_, err := s.h.m.HandleCallback(context.Background(), s.h.bundle.OAuthApps[s.app], s.query)
			var ce *CallbackError
			if !errors.As(err, &ce) || ce.Reason != tc.reason {
				t.Fatalf("err = %v, want reason %s", err, tc.reason)
			}
			sess, gerr := s.h.store.GetSession(context.Background(), s.id)
			if gerr != nil {
				t.Fatal(gerr)
			}
			if sess.Status != tc.status {
				t.Fatalf("session status %s, want %s", sess.Status, tc.status)
			}
			grants, _, _ := s.h.store.ListGrants(context.Background())
			if len(grants) != 0 || len(s.h.queue.list()) != 0 {
				t.Fatalf("a failed callback wrote %d grants / %d events", len(grants), len(s.h.queue.list()))
			}
			if c := s.query.Get("code"); c != "" && strings.Contains(s.h.logs.String(), c) {
				t.Fatal("the code reached the logs")
			}
			if strings.Contains(s.h.logs.String(), "<script>") {
				t.Fatal("provider text reached the logs")
			}
		})
	}
	t.Run("subject mismatch gives the token back", func(t *testing.T) {
		s := pending(t, "user", "bob")
		_, _ = s.h.m.HandleCallback(context.Background(), s.h.bundle.OAuthApps["user"], s.query)
		p := s.h.p
		p.mu.Lock()
		defer p.mu.Unlock()
		hints := append([]string(nil), p.revoked...)
		sort.Strings(hints)
		if strings.Join(hints, ",") != "access_token,refresh_token" {
			t.Fatalf("provider saw revocations %v, want the access and the refresh token", p.revoked)
		}
		// Each hint named the right token: bob holds no live token.
		for tok, sub := range p.access {
			if sub == "bob" {
				t.Fatalf("access token %s of the mismatched user still live", tok)
			}
		}
		for tok, sub := range p.refresh {
			if sub == "bob" {
				t.Fatalf("refresh token %s of the mismatched user still live", tok)
			}
		}
	})
}

func TestRefresh(t *testing.T) {
	h := newHarness(t)
	first := h.consent("global", "team")
	h.clock.Advance(3600*time.Second - 200*time.Second) // inside the default minTtl of 300 s
	res := h.request("global")
	if res.Status != StatusReady || res.AccessToken.Reveal() == first.AccessToken.Reveal() {
		t.Fatalf("want a refreshed token, got %+v", res)
	}
	if h.p.refreshes() != 1 {
		t.Fatalf("%d refreshes", h.p.refreshes())
	}
	// The rotated refresh token was stored: a second refresh works.
	h.clock.Advance(3600 * time.Second)
	if res := h.request("global"); res.Status != StatusReady || h.p.refreshes() != 2 {
		t.Fatalf("second refresh: %+v (%d calls)", res, h.p.refreshes())
	}
	// minTtlSeconds 0 means the still-alive token is fine.
	zero := 0
	h.clock.Advance(3599 * time.Second)
	if res := h.request("global", func(r *TokenRequest) { r.MinTTLSeconds = &zero }); res.Status != StatusReady || h.p.refreshes() != 2 {
		t.Fatalf("minTtl 0: %+v (%d calls)", res, h.p.refreshes())
	}
}

func TestConcurrentRefreshIsSingle(t *testing.T) {
	h := newHarness(t)
	h.consent("global", "team")
	other := h.newManager(h.store) // a second "process" on the same store
	h.p.refreshDelay = 200 * time.Millisecond
	h.clock.Advance(3500 * time.Second)
	var wg sync.WaitGroup
	tokens := make([]string, 50)
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := h.m
			if i%2 == 1 {
				m = other
			}
			res := m.GetAccessToken(context.Background(), TokenRequest{AppRef: appRef("global"), Auth: auth("demo:team:T1", "")})
			if res.Status == StatusReady {
				tokens[i] = res.AccessToken.Reveal()
			}
		}()
	}
	wg.Wait()
	if n := h.p.refreshes(); n != 1 {
		t.Fatalf("%d refreshes at the provider, want 1", n)
	}
	for i, tok := range tokens {
		if tok == "" || tok != tokens[0] {
			t.Fatalf("request %d got %q, want the one refreshed token", i, tok)
		}
	}
}

func TestInvalidGrantRevokes(t *testing.T) {
	h := newHarness(t)
	h.consent("global", "team")
	h.p.refreshError = "invalid_grant"
	h.clock.Advance(time.Hour)
	res := h.request("global")
	if res.Status != StatusAuthorizationRequired {
		t.Fatalf("got %+v", res)
	}
	g, _ := h.store.GetGrant(context.Background(), GrantID(appRef("global"), "demo:team:T1"))
	if !g.Revoked || g.RevokedAt == nil || g.Token.RefreshToken != nil || !g.Token.AccessToken.IsZero() {
		t.Fatalf("grant not revoked and wiped: %+v", g)
	}
}

func TestRefreshTransientFailure(t *testing.T) {
	h := newHarness(t)
	h.consent("global", "team")
	h.p.tokenStatus = 503
	h.clock.Advance(time.Hour)
	res := h.request("global")
	if res.Status != StatusError || res.Error.Code != CodeRefreshFailed || strings.Contains(res.Error.Message, "fake says") {
		t.Fatalf("got %+v", res)
	}
	g, _ := h.store.GetGrant(context.Background(), GrantID(appRef("global"), "demo:team:T1"))
	if g.Revoked {
		t.Fatal("a provider outage revoked the grant")
	}
}

func TestScopesBeyondGrantAskAgain(t *testing.T) {
	h := newHarness(t)
	res := h.request("global", func(r *TokenRequest) { r.Scopes = []string{"read"} })
	code, state := h.p.approve(res.AuthorizationURL, "t")
	h.p.mu.Lock()
	c := h.p.codes[code]
	c.scope = "read"
	h.p.codes[code] = c
	h.p.mu.Unlock()
	if _, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], url.Values{"code": {code}, "state": {state}}); err != nil {
		t.Fatal(err)
	}
	if r := h.request("global", func(r *TokenRequest) { r.Scopes = []string{"read"} }); r.Status != StatusReady {
		t.Fatalf("read: %+v", r)
	}
	r := h.request("global", func(r *TokenRequest) { r.Scopes = []string{"write"} })
	if r.Status != StatusAuthorizationRequired {
		t.Fatalf("write on a read grant: %+v", r)
	}
	// The new consent asks for the grant's scopes too: "write read".
	u, _ := url.Parse(r.AuthorizationURL)
	if got := u.Query().Get("scope"); got != "write read" {
		t.Fatalf("scope %q, want the union", got)
	}
}

func TestRevokeGrant(t *testing.T) {
	h := newHarness(t)
	h.consent("global", "team")
	res, err := h.m.RevokeGrant(context.Background(), appRef("global"), "demo:team:T1")
	if err != nil || res.Provider != ProviderRevoked {
		t.Fatalf("revoke: %+v %v", res, err)
	}
	if strings.Join(h.p.revoked, ",") != "refresh_token,access_token" {
		t.Fatalf("provider saw revocations %v", h.p.revoked)
	}
	if r := h.request("global"); r.Status != StatusAuthorizationRequired {
		t.Fatalf("after revoke: %+v", r)
	}
	if _, err := h.m.RevokeGrant(context.Background(), appRef("global"), "nobody"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown grant: %v", err)
	}
	if _, err := h.m.RevokeGrant(context.Background(), appRef("zzz"), "x"); !errors.Is(err, ErrUnknownApp) {
		t.Fatalf("unknown app: %v", err)
	}
}

func TestCorruptGrantIsolated(t *testing.T) {
	h := newHarness(t)
	h.consent("global", "team")
	h.consent("user", "alice")
	path := filepath.Join(h.home, "oauth", "grants", GrantID(appRef("global"), "demo:team:T1")+".enc.json")
	junk := []byte(`{"apiVersion": "agents.example.io/v1alpha1", "kind": "OAuthGrantRecord", "spec": {"token": 17`)
	if err := os.WriteFile(path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
	res := h.request("global")
	if res.Status != StatusError || res.Error.Code != CodeGrantUnreadable {
		t.Fatalf("corrupt grant: %+v", res)
	}
	if got, _ := os.ReadFile(path); string(got) != string(junk) {
		t.Fatal("corrupt file was changed")
	}
	if r := h.request("user"); r.Status != StatusReady {
		t.Fatalf("other grant affected: %+v", r)
	}
}

func TestTamperedCiphertextIsolated(t *testing.T) {
	h := newHarness(t)
	h.consent("global", "team")
	id := GrantID(appRef("global"), "demo:team:T1")
	// Move the user grant's access token into the global grant: bound to
	// another record, it must not open.
	h.consent("user", "alice")
	g, _ := h.store.GetGrant(context.Background(), id)
	u, _ := h.store.GetGrant(context.Background(), GrantID(appRef("user"), "demo:user:alice"))
	g.Token.AccessToken = u.Token.AccessToken
	if _, err := h.store.PutGrant(context.Background(), g, g.Version); err != nil {
		t.Fatal(err)
	}
	if r := h.request("global"); r.Status != StatusError || r.Error.Code != CodeGrantUnreadable {
		t.Fatalf("moved ciphertext opened: %+v", r)
	}
}

func TestEventRetriedWhenQueueDown(t *testing.T) {
	h := newHarness(t)
	h.queue.fail = true
	res := h.request("global")
	code, state := h.p.approve(res.AuthorizationURL, "t")
	if _, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], url.Values{"code": {code}, "state": {state}}); err != nil {
		t.Fatal(err)
	}
	if r := h.request("global"); r.Status != StatusReady {
		t.Fatal("grant not usable while the queue is down")
	}
	h.queue.fail = false
	rep, err := h.m.CleanupExpiredSessions(context.Background())
	if err != nil || rep.EventsDelivered != 1 {
		t.Fatalf("cleanup %+v %v", rep, err)
	}
	rep, _ = h.m.CleanupExpiredSessions(context.Background())
	if rep.EventsDelivered != 0 || len(h.queue.list()) != 1 {
		t.Fatalf("event delivered %d times", len(h.queue.list()))
	}
}

func TestCleanupAndStatus(t *testing.T) {
	h := newHarness(t)
	a := h.request("global")
	st, err := h.m.SessionStatus(context.Background(), a.AuthSessionID, 0)
	if err != nil || st.Status != domain.SessionPending {
		t.Fatalf("status %+v %v", st, err)
	}
	h.clock.Advance(DefaultSessionTTL + time.Second)
	st, _ = h.m.SessionStatus(context.Background(), a.AuthSessionID, 0)
	if st.Status != domain.SessionExpired {
		t.Fatalf("expired session reported %s", st.Status)
	}
	rep, err := h.m.CleanupExpiredSessions(context.Background())
	if err != nil || rep.Expired != 1 {
		t.Fatalf("cleanup %+v %v", rep, err)
	}
	h.clock.Advance(SessionRetention + time.Minute)
	rep, _ = h.m.CleanupExpiredSessions(context.Background())
	if rep.Deleted != 1 {
		t.Fatalf("cleanup %+v", rep)
	}
	if _, err := h.m.SessionStatus(context.Background(), a.AuthSessionID, 0); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("deleted session: %v", err)
	}
}

func TestSessionStatusLongPoll(t *testing.T) {
	h := newHarness(t)
	res := h.request("global")
	code, state := h.p.approve(res.AuthorizationURL, "t")
	go func() {
		time.Sleep(300 * time.Millisecond)
		_, _ = h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], url.Values{"code": {code}, "state": {state}})
	}()
	st, err := h.m.SessionStatus(context.Background(), res.AuthSessionID, 5*time.Second)
	if err != nil || st.Status != domain.SessionCompleted {
		t.Fatalf("long poll: %+v %v", st, err)
	}
}

func TestPendingBlockHasNoSecrets(t *testing.T) {
	h := newHarness(t)
	res := h.request("global")
	h.request("user")
	block, err := h.m.PendingBlock(context.Background(), testResume.Target())
	if err != nil || block.Type != "auth.pending" || len(block.Items) != 2 {
		t.Fatalf("block %+v %v", block, err)
	}
	raw, _ := json.Marshal(block)
	s, _ := h.store.GetSession(context.Background(), res.AuthSessionID)
	verifier, _ := h.keyring.Open(context.Background(), s.Flow.PKCE.CodeVerifier, domain.Binding{Record: "session", RecordID: s.ID, Field: "codeVerifier"})
	for _, bad := range []string{string(verifier), "codeVerifier", "refreshToken", "accessToken", `"state"`} {
		if strings.Contains(string(raw), bad) {
			t.Fatalf("auth.pending holds %q", bad)
		}
	}
	h.clock.Advance(time.Second)
	again := h.request("global")
	block, _ = h.m.PendingBlock(context.Background(), testResume.Target())
	if len(block.Items) != 2 {
		t.Fatalf("a second request for the same grant added an item: %d", len(block.Items))
	}
	found := false
	for _, it := range block.Items {
		found = found || it.AuthSessionID == again.AuthSessionID
	}
	if !found {
		t.Fatal("auth.pending does not show the newest session")
	}
	otherInstance := testResume.Target()
	otherInstance.InstanceKey = "other"
	other, _ := h.m.PendingBlock(context.Background(), otherInstance)
	if len(other.Items) != 0 {
		t.Fatal("another instance sees these sessions")
	}
}

func TestDeviceFlow(t *testing.T) {
	if testing.Short() {
		t.Skip("device polling takes ~8 s")
	}
	h := newHarness(t)
	h.p.deviceSubject = "team"
	h.p.deviceScript = []string{"authorization_pending", "slow_down", "ok"}
	res := h.request("device")
	if res.Status != StatusAuthorizationRequired || res.DeviceCode == nil || res.DeviceCode.UserCode != "WDJB-MJHT" || res.DeviceCode.Interval != 1 {
		t.Fatalf("device result %+v", res)
	}
	if !strings.Contains(res.AuthorizationURL, "/activate") {
		t.Fatalf("authorizationUrl %s", res.AuthorizationURL)
	}
	st, err := h.m.SessionStatus(context.Background(), res.AuthSessionID, 20*time.Second)
	if err != nil || st.Status != domain.SessionCompleted {
		t.Fatalf("device session %+v %v", st, err)
	}
	h.p.mu.Lock()
	polls := h.p.devicePolls
	h.p.mu.Unlock()
	if len(polls) != 3 {
		t.Fatalf("%d polls", len(polls))
	}
	if gap := polls[1].Sub(polls[0]); gap < 900*time.Millisecond {
		t.Fatalf("polled again after %s, interval is 1 s", gap)
	}
	if gap := polls[2].Sub(polls[1]); gap < 5900*time.Millisecond {
		t.Fatalf("slow_down not honoured: next poll after %s", gap)
	}
	if r := h.request("device"); r.Status != StatusReady {
		t.Fatalf("after device approval: %+v", r)
	}
	if len(h.queue.list()) != 1 {
		t.Fatal("device approval queued no auth.granted")
	}
	if strings.Contains(h.logs.String(), "dev-code-secret") {
		t.Fatal("device code in logs")
	}
}

// A device token's lifetime counts from the token response, not from when
// polling started: the user's time to approve is not taken off it.
func TestDeviceTokenExpiryCountsFromTheResponse(t *testing.T) {
	h := newHarness(t)
	h.p.deviceSubject = "team"
	h.p.deviceScript = []string{"ok"}
	h.p.onDevicePoll = func() { h.clock.Advance(45 * time.Second) } // the user takes 45 s to approve
	start := h.clock.Now()
	res := h.request("device")
	st, err := h.m.SessionStatus(context.Background(), res.AuthSessionID, 10*time.Second)
	if err != nil || st.Status != domain.SessionCompleted {
		t.Fatalf("device session %+v %v", st, err)
	}
	g, err := h.store.GetGrant(context.Background(), GrantID(appRef("device"), "demo:team:T1"))
	if err != nil {
		t.Fatal(err)
	}
	answered := start.Add(45 * time.Second)
	if g.Token.ExpiresAt == nil || !g.Token.ExpiresAt.Equal(answered.Add(time.Hour)) || !g.Token.IssuedAt.Equal(answered) {
		t.Fatalf("issued %s, expires %v; want issued %s (the response), expiring an hour later", g.Token.IssuedAt, g.Token.ExpiresAt, answered)
	}
}

// recordingSealer notes which records it sealed.
type recordingSealer struct {
	domain.Sealer
	mu      sync.Mutex
	records map[string]int
}

func (r *recordingSealer) Seal(ctx context.Context, p []byte, b domain.Binding) (domain.EncryptedValue, error) {
	r.mu.Lock()
	r.records[b.Record]++
	r.mu.Unlock()
	return r.Sealer.Seal(ctx, p, b)
}

func TestSessionSealerSealsSessionsOnly(t *testing.T) {
	h := newHarness(t)
	grants := &recordingSealer{Sealer: h.keyring, records: map[string]int{}}
	sessions := &recordingSealer{Sealer: h.keyring, records: map[string]int{}}
	m, err := New(Config{Bundle: h.bundle, Store: h.store, Sealer: grants, SessionSealer: sessions, Queue: h.queue,
		StateKeys: h.keyring.DerivedKeys("state"), BaseURL: "http://127.0.0.1:8080", Now: h.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	h.m = m
	h.consent("global", "team")
	if grants.records["session"] != 0 || grants.records["grant"] != 2 || sessions.records["grant"] != 0 || sessions.records["session"] != 2 {
		t.Fatalf("grant sealer %v, session sealer %v", grants.records, sessions.records)
	}
}

// A provider whose tokens live shorter than minTtlSeconds can never satisfy
// the request; refreshing on every call only hammers it (issue 9.4). The
// token is refreshed once half its lifetime is gone, and the answer says
// it is shorter than asked.
func TestMinTTLLongerThanTheProviderIssues(t *testing.T) {
	h := newHarness(t)
	h.p.expiresIn = 600
	first := h.consent("global", "team")
	if first.TTLShorterThanRequested {
		t.Fatal("a 600 s token flagged for the default minTtlSeconds of 300")
	}
	asked := 3600
	long := func(r *TokenRequest) { r.MinTTLSeconds = &asked }
	calls := func(n int, step time.Duration) []Result {
		t.Helper()
		var out []Result
		for i := range n {
			res := h.request("global", long)
			if res.Status != StatusReady || !res.TTLShorterThanRequested {
				t.Fatalf("call %d: want ready, flagged shorter than requested: %+v", i, res)
			}
			if left := res.ExpiresAt.Sub(h.clock.Now()); left < 300*time.Second {
				t.Fatalf("call %d: token with %s left, want at least half its 600 s lifetime", i, left)
			}
			out = append(out, res)
			h.clock.Advance(step)
		}
		return out
	}
	// A fresh token: 20 calls over 200 s refresh nothing.
	calls(20, 10*time.Second)
	if n := h.p.refreshes(); n != 0 {
		t.Fatalf("%d refreshes in 20 calls on a fresh token, want 0", n)
	}
	// Past half its lifetime: one refresh, then the new token is used.
	h.clock.Advance(150 * time.Second)
	got := calls(20, time.Second)
	if n := h.p.refreshes(); n != 1 {
		t.Fatalf("%d refreshes in 20 calls on an aging token, want 1", n)
	}
	if got[0].AccessToken.Reveal() == first.AccessToken.Reveal() || got[19].AccessToken.Reveal() != got[0].AccessToken.Reveal() {
		t.Fatal("want one new token for all 20 calls")
	}
	// Half a lifetime later, the next one.
	h.clock.Advance(300 * time.Second)
	calls(1, 0)
	if n := h.p.refreshes(); n != 2 {
		t.Fatalf("%d refreshes after another half lifetime, want 2", n)
	}
}
