package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/filestore"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

const (
	clientID     = "agentauth-e2e"
	clientSecret = "e2e-client-secret-value"
)

// appYAML is an OAuthApp of the e2e client at p, in subject mode mode,
// with extra spec lines.
func appYAML(p *e2ekit.Provider, name, mode, extra string) string {
	return fmt.Sprintf(`apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: %s}
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: %s
  client:
    clientId: {value: %s}
    clientSecret: {valueFrom: {env: E2E_CLIENT_SECRET}}
  endpoints:
    authorizationUrl: %s
    tokenUrl: %s
    revokeUrl: %s
    userInfoUrl: %s
  scopes: [openid, profile, email]
  redirect: {callbackPath: /oauth/callback/%s}
  options: {prompt: consent}
%s`, name, mode, clientID, p.AuthorizationURL, p.TokenURL, p.RevocationURL, p.UserInfoURL, name, extra)
}

func bundleFor(p *e2ekit.Provider) string {
	app := func(name, mode, extra string) string { return appYAML(p, name, mode, extra) }
	device := fmt.Sprintf(`apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: e2e-device}
spec:
  provider: demo
  flow: deviceCode
  subjectMode: user
  client:
    clientId: {value: %s}
    clientSecret: {valueFrom: {env: E2E_CLIENT_SECRET}}
  endpoints:
    deviceAuthorizationUrl: %s
    tokenUrl: %s
    userInfoUrl: %s
  scopes: [openid, profile]
  subjectVerification: {template: "demo:user:{sub}"}
`, clientID, p.DeviceAuthorizationURL, p.TokenURL, p.UserInfoURL)
	oidc := app("e2e-oidc", "user", fmt.Sprintf("  subjectVerification: {source: idToken, issuer: %q, template: \"demo:user:{sub}\"}\n", p.Issuer))
	return app("e2e-global", "global", "") + "---\n" + app("e2e-user", "user", "  subjectVerification: {template: \"demo:user:{sub}\"}\n") + "---\n" + oidc + "---\n" + device
}

// TestOAuthBrokerEndToEnd drives the whole broker: the real agentauth
// binary, oidc-provider's own login and consent pages in headless Chromium,
// token use at the provider, refresh, revocation, replay and subject
// mismatch — and then scans everything for leaked secrets.
func TestOAuthBrokerEndToEnd(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{
		Stats: true,
		Clients: []e2ekit.Client{{
			ClientID: clientID, ClientSecret: clientSecret,
			RedirectURIs: []string{base + "/oauth/callback/e2e-global", base + "/oauth/callback/e2e-user", base + "/oauth/callback/e2e-oidc"},
			GrantTypes:   []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken, e2ekit.GrantDeviceCode},
		}},
	})
	home := t.TempDir()
	srv := startServer(t, port, home, map[string]string{"apps.yaml": bundleFor(p)}, "E2E_CLIENT_SECRET="+clientSecret)
	browser := e2ekit.StartBrowser(t)

	var secretsMu sync.Mutex
	var secrets []string // every token value seen, for the leak scan
	keep := func(s string) {
		if s != "" {
			secretsMu.Lock()
			secrets = append(secrets, s)
			secretsMu.Unlock()
		}
	}
	// collectSealed opens the home's records with its own key and keeps the
	// plaintexts (refresh tokens, PKCE verifiers, states) for the scan.
	collectSealed := func() {
		kr, err := aesseal.Load(home, "")
		if err != nil {
			t.Fatal(err)
		}
		st, err := filestore.New(home)
		if err != nil {
			t.Fatal(err)
		}
		grants, _, _ := st.ListGrants(ctx)
		for _, g := range grants {
			if g.Token.RefreshToken != nil {
				v, err := kr.Open(ctx, *g.Token.RefreshToken, domain.Binding{Record: "grant", RecordID: g.ID, Field: "refreshToken"})
				if err != nil {
					t.Fatalf("open refresh token: %v", err)
				}
				keep(string(v))
			}
		}
		sessions, _, _ := st.ListSessions(ctx)
		for _, s := range sessions {
			if s.Flow.PKCE != nil {
				v, err := kr.Open(ctx, s.Flow.PKCE.CodeVerifier, domain.Binding{Record: "session", RecordID: s.ID, Field: "codeVerifier"})
				if err != nil {
					t.Fatalf("open verifier: %v", err)
				}
				keep(string(v))
			}
			if s.Flow.DeviceCode != nil {
				v, err := kr.Open(ctx, s.Flow.DeviceCode.DeviceCode, domain.Binding{Record: "session", RecordID: s.ID, Field: "deviceCode"})
				if err != nil {
					t.Fatalf("open device code: %v", err)
				}
				keep(string(v))
			}
		}
	}
	ready := func(t *testing.T, out map[string]any) string {
		t.Helper()
		if out["status"] != "ready" {
			t.Fatalf("want ready, got %v", out)
		}
		tok := out["accessToken"].(string)
		keep(tok)
		return tok
	}
	worksAtProvider := func(t *testing.T, tok, wantSub string) {
		t.Helper()
		claims, status, err := p.UserInfo(ctx, tok)
		if err != nil || status != 200 || claims["sub"] != wantSub {
			t.Fatalf("userinfo with the token: %d %v %v", status, claims, err)
		}
	}
	consent := func(t *testing.T, out map[string]any, login string) e2ekit.Result {
		t.Helper()
		if out["status"] != "authorization_required" {
			t.Fatalf("want authorization_required, got %v", out)
		}
		res, err := browser.Authorize(ctx, out["authorizationUrl"].(string), login)
		if err != nil {
			t.Fatalf("browser: %v", err)
		}
		return res
	}
	events := func(t *testing.T) []domain.Event {
		t.Helper()
		var evs []domain.Event
		for _, line := range strings.Split(strings.TrimSpace(srv.admin(t, "events", "list")), "\n") {
			if line == "" {
				continue
			}
			var e domain.Event
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("events list line %q: %v", line, err)
			}
			evs = append(evs, e)
		}
		return evs
	}

	global := tokenReq{App: "e2e-global", Global: "demo:team:T1", User: "demo:user:alice", Instance: "inst-global"}
	var globalToken string
	var callbackURL string

	t.Run("global mode: consent in the browser, then ready", func(t *testing.T) {
		out := srv.token(t, global)
		sessionID := out["authSessionId"].(string)
		// A runtime long-polls the session while the user consents.
		waited := make(chan map[string]any, 1)
		go func() {
			_, st := srv.call(t, "GET", "/v1/oauth/sessions/"+sessionID+"?wait=50", nil)
			waited <- st
		}()
		res := consent(t, out, "alice")
		callbackURL = res.FinalURL
		if !strings.HasPrefix(res.FinalURL, base+"/oauth/callback/e2e-global") || res.Status != 200 || !strings.Contains(res.BodyText, "Connected") {
			t.Fatalf("callback page: %+v", res)
		}
		if st := <-waited; st["status"] != "completed" {
			t.Fatalf("long poll saw %v", st)
		}
		globalToken = ready(t, srv.token(t, global))
		worksAtProvider(t, globalToken, "alice")
	})

	t.Run("auth.granted queued once with the resume target", func(t *testing.T) {
		evs := events(t)
		if len(evs) != 1 {
			t.Fatalf("%d events", len(evs))
		}
		e := evs[0]
		var in domain.AuthGrantedEvent
		_ = json.Unmarshal([]byte(e.Input), &in)
		if e.InstanceKey != "inst-global" || e.AgentName != "planner" || e.SwarmRef.Name != "default" || e.Origin["channel"] != "C-e2e-global" ||
			e.Auth.Subjects.Global != "demo:team:T1" || in.Type != "auth.granted" || in.Subject != "demo:team:T1" || in.Provider != "demo" || !strings.HasPrefix(in.GrantID, "grant-") {
			t.Fatalf("event %+v input %+v", e, in)
		}
	})

	t.Run("a replayed callback URL is refused", func(t *testing.T) {
		res, err := browser.Open(ctx, callbackURL)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != 400 || !strings.Contains(res.BodyText, "session_already_used") {
			t.Fatalf("replay page: %+v", res)
		}
		if n := len(events(t)); n != 1 {
			t.Fatalf("replay queued another event: %d", n)
		}
		if tok := ready(t, srv.token(t, global)); tok != globalToken {
			t.Fatal("replay changed the grant")
		}
	})

	t.Run("user mode: the right user", func(t *testing.T) {
		r := tokenReq{App: "e2e-user", Global: "demo:team:T1", User: "demo:user:alice", Instance: "inst-user"}
		res := consent(t, srv.token(t, r), "alice")
		if !strings.Contains(res.BodyText, "Connected") {
			t.Fatalf("callback page: %+v", res)
		}
		worksAtProvider(t, ready(t, srv.token(t, r)), "alice")
	})

	t.Run("user mode: another user logs in, nothing is stored", func(t *testing.T) {
		r := tokenReq{App: "e2e-user", Global: "demo:team:T1", User: "demo:user:carol", Instance: "inst-carol"}
		out := srv.token(t, r)
		res := consent(t, out, "bob")
		if res.Status != 400 || !strings.Contains(res.BodyText, "subject_mismatch") {
			t.Fatalf("mismatch page: %+v", res)
		}
		_, st := srv.call(t, "GET", "/v1/oauth/sessions/"+out["authSessionId"].(string), nil)
		if st["status"] != "failed" || st["statusReason"] != "subject_mismatch" {
			t.Fatalf("session %v", st)
		}
		if strings.Contains(srv.admin(t, "grants", "list"), "demo:user:carol") {
			t.Fatal("a grant was stored for carol")
		}
		if again := srv.token(t, r); again["status"] != "authorization_required" {
			t.Fatalf("carol: %v", again)
		}
	})

	t.Run("user mode verified by a signed id_token", func(t *testing.T) {
		r := tokenReq{App: "e2e-oidc", Global: "demo:team:T1", User: "demo:user:erin", Instance: "inst-oidc"}
		out := srv.token(t, r)
		u, _ := url.Parse(out["authorizationUrl"].(string))
		if u.Query().Get("nonce") == "" {
			t.Fatalf("no nonce in %s", u)
		}
		if res := consent(t, out, "erin"); !strings.Contains(res.BodyText, "Connected") {
			t.Fatalf("callback page: %+v", res)
		}
		worksAtProvider(t, ready(t, srv.token(t, r)), "erin")
		mismatch := tokenReq{App: "e2e-oidc", Global: "demo:team:T1", User: "demo:user:frank", Instance: "inst-oidc"}
		if res := consent(t, srv.token(t, mismatch), "mallory"); !strings.Contains(res.BodyText, "subject_mismatch") {
			t.Fatalf("id_token of another user accepted: %+v", res)
		}
	})

	t.Run("device code: approve on the provider's device page", func(t *testing.T) {
		r := tokenReq{App: "e2e-device", Global: "demo:team:T1", User: "demo:user:dave", Instance: "inst-device"}
		out := srv.token(t, r)
		dc, _ := out["deviceCode"].(map[string]any)
		if out["status"] != "authorization_required" || dc == nil || dc["userCode"] == "" || dc["verificationUri"] == "" {
			t.Fatalf("device answer: %v", out)
		}
		res, err := browser.ApproveDevice(ctx, out["authorizationUrl"].(string), "dave")
		if err != nil {
			t.Fatalf("device approval: %v (%+v)", err, res)
		}
		_, st := srv.call(t, "GET", "/v1/oauth/sessions/"+out["authSessionId"].(string)+"?wait=50", nil)
		if st["status"] != "completed" {
			t.Fatalf("device session: %v", st)
		}
		worksAtProvider(t, ready(t, srv.token(t, r)), "dave")
	})

	minTTL := 3599 // the provider issues 3600 s tokens: a token older than 1 s needs a refresh, a fresh one does not
	global.MinTTL = &minTTL

	t.Run("forced refresh gives a new token that works", func(t *testing.T) {
		before, _ := p.Stats(ctx)
		time.Sleep(2 * time.Second)
		tok := ready(t, srv.token(t, global))
		if tok == globalToken {
			t.Fatal("no new token")
		}
		after, _ := p.Stats(ctx)
		if after.Grants["refresh_token"] != before.Grants["refresh_token"]+1 {
			t.Fatalf("refreshes %d → %d", before.Grants["refresh_token"], after.Grants["refresh_token"])
		}
		worksAtProvider(t, tok, "alice")
		globalToken = tok
	})

	t.Run("50 concurrent requests on an expiring grant refresh once", func(t *testing.T) {
		before, _ := p.Stats(ctx)
		time.Sleep(2 * time.Second)
		var wg sync.WaitGroup
		toks := make([]string, 50)
		errs := make([]string, 50)
		for i := range toks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out := srv.token(t, global)
				if out["status"] != "ready" {
					errs[i] = fmt.Sprint(out)
					return
				}
				toks[i] = out["accessToken"].(string)
			}()
		}
		wg.Wait()
		for i := range toks {
			if errs[i] != "" || toks[i] != toks[0] {
				t.Fatalf("request %d: %q / %s", i, toks[i], errs[i])
			}
		}
		keep(toks[0])
		after, _ := p.Stats(ctx)
		if got := after.Grants["refresh_token"] - before.Grants["refresh_token"]; got != 1 || after.RefreshReuse != before.RefreshReuse {
			t.Fatalf("%d refreshes (reuse %d → %d), want exactly 1", got, before.RefreshReuse, after.RefreshReuse)
		}
		worksAtProvider(t, toks[0], "alice")
		globalToken = toks[0]
	})

	collectSealed()

	t.Run("revoke: provider says inactive, next request asks again", func(t *testing.T) {
		code, out := srv.call(t, "POST", "/v1/oauth/revoke", map[string]any{"oauthAppRef": "OAuthApp/e2e-global", "subject": "demo:team:T1"})
		if code != 200 || out["providerRevocation"] != "revoked" {
			t.Fatalf("revoke: %d %v", code, out)
		}
		active, err := p.Introspect(ctx, clientID, clientSecret, globalToken)
		if err != nil || active {
			t.Fatalf("introspection after revoke: active=%v err=%v", active, err)
		}
		zero := 0
		global.MinTTL = &zero
		if out := srv.token(t, global); out["status"] != "authorization_required" {
			t.Fatalf("after revoke: %v", out)
		}
	})

	t.Run("no secret anywhere but the ready responses", func(t *testing.T) {
		collectSealed()
		srv.stop() // flush
		secretsMu.Lock()
		defer secretsMu.Unlock()
		if len(secrets) < 6 {
			t.Fatalf("only %d secrets collected; the scan would prove little", len(secrets))
		}
		leak := func(where string, data []byte) {
			for _, s := range secrets {
				if len(s) >= 16 && strings.Contains(string(data), s) {
					t.Errorf("a secret (%.6s…) appears in %s", s, where)
				}
			}
		}
		filepath.Walk(home, func(path string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				b, _ := os.ReadFile(path)
				leak(path, b)
			}
			return nil
		})
		leak("server stdout (JSON logs)", []byte(srv.Stdout.String()))
		leak("server stderr", []byte(srv.Stderr.String()))
		leak("provider output", []byte(strings.Join(p.Logs(), "\n")))
		for _, r := range srv.responses {
			if r.what != "ready" {
				leak("response of "+r.what, r.body)
			}
		}
		if !strings.Contains(srv.Stdout.String(), `"requestId"`) || !strings.Contains(srv.Stdout.String(), `"traceId"`) {
			t.Error("server logs carry no request/trace ids")
		}
	})
}
