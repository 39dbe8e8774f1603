package console

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/turn"
)

// fakeSignIn answers Finish with the claims of the login the test put in
// the callback's query ("login"), as a provider would after its pages.
type fakeSignIn struct{ claims map[string]map[string]any }

func (f *fakeSignIn) Begin(_ context.Context, returnTo string) (string, string, error) {
	return "https://idp.example/authorize?x=1", "pending-" + url.QueryEscape(returnTo), nil
}

func (f *fakeSignIn) Finish(_ context.Context, q url.Values, pending string) (oauth.SignedIn, error) {
	if !strings.HasPrefix(pending, "pending-") {
		return oauth.SignedIn{}, &oauth.SignInError{Reason: "pending_invalid", Detail: "The sign-in did not start in this browser."}
	}
	c, ok := f.claims[q.Get("login")]
	if !ok {
		return oauth.SignedIn{}, &oauth.SignInError{Reason: "provider_error", Detail: "The identity provider refused: access_denied."}
	}
	rt, _ := url.QueryUnescape(strings.TrimPrefix(pending, "pending-"))
	return oauth.SignedIn{Claims: c, ReturnTo: rt, Expiry: time.Now().Add(time.Hour)}, nil
}

type memGrants struct{ grants map[string]domain.Grant }

func (m *memGrants) GetGrant(_ context.Context, id string) (domain.Grant, error) {
	g, ok := m.grants[id]
	if !ok {
		return g, domain.ErrNotFound
	}
	return g, nil
}

func (m *memGrants) ListGrants(context.Context) ([]domain.Grant, []error, error) {
	var out []domain.Grant
	for _, g := range m.grants {
		out = append(out, g)
	}
	return out, nil, nil
}

// memQueries answers the operator queries by filtering in memory (the
// stores' own index semantics have their conformance suites): newest
// first, the After cursor the last id of the page before.
type memQueries struct {
	g *memGrants
	s *memSessions
}

func pageOf[T any](items []T, id func(T) string, after string, limit int) ([]T, string) {
	start := 0
	if after != "" {
		start = len(items)
		for i, it := range items {
			if id(it) == after {
				start = i + 1
			}
		}
	}
	if limit <= 0 {
		limit = 50
	}
	end := min(start+limit, len(items))
	next := ""
	if end < len(items) {
		next = id(items[end-1])
	}
	return items[start:end], next
}

func inScope(tenant string, any bool, qTenant string) bool { return any || tenant == qTenant }

func (m memQueries) QueryGrants(_ context.Context, q domain.GrantQuery) (domain.GrantPage, error) {
	var out []domain.Grant
	for _, g := range m.g.grants {
		if inScope(g.Tenant, q.AnyTenant, q.Tenant) && (q.App == "" || q.App == g.OAuthAppRef.Name) &&
			(q.Subject == "" || q.Subject == g.Subject) && (q.Revoked == nil || *q.Revoked == g.Revoked) {
			out = append(out, g)
		}
	}
	slices.SortFunc(out, func(a, b domain.Grant) int { return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID)) })
	gs, next := pageOf(out, func(g domain.Grant) string { return g.ID }, q.After, q.Limit)
	return domain.GrantPage{Grants: gs, Next: next}, nil
}

func (m memQueries) QuerySessions(_ context.Context, q domain.SessionQuery) (domain.SessionPage, error) {
	var out []domain.Session
	for _, s := range m.s.sessions {
		if inScope(s.Tenant, q.AnyTenant, q.Tenant) && (q.App == "" || q.App == s.OAuthAppRef.Name) && (q.Status == "" || q.Status == s.Status) &&
			(q.Reason == "" || q.Reason == s.StatusReason) && !s.CreatedAt.Before(q.Since) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b domain.Session) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	ss, next := pageOf(out, func(s domain.Session) string { return s.ID }, q.After, q.Limit)
	return domain.SessionPage{Sessions: ss, Next: next}, nil
}

func (m memQueries) CountGrants(_ context.Context, tenant string, any bool, limit int) (int, int, bool, error) {
	a, r := 0, 0
	for _, g := range m.g.grants {
		if inScope(g.Tenant, any, tenant) {
			if g.Revoked {
				r++
			} else {
				a++
			}
		}
	}
	return min(a, limit), min(r, limit), a > limit || r > limit, nil
}

func (m memQueries) CountFailingGrants(_ context.Context, tenant string, any bool, limit int) (int, bool, error) {
	n := 0
	for _, g := range m.g.grants {
		if inScope(g.Tenant, any, tenant) && !g.Revoked && g.RefreshFailures > 0 {
			n++
		}
	}
	return min(n, limit), n > limit, nil
}

type memSessions struct{ sessions map[string]domain.Session }

func (m *memSessions) GetSession(_ context.Context, id string) (domain.Session, error) {
	s, ok := m.sessions[id]
	if !ok {
		return s, domain.ErrNotFound
	}
	return s, nil
}

func (m *memSessions) ListSessions(context.Context) ([]domain.Session, []error, error) {
	var out []domain.Session
	for _, s := range m.sessions {
		out = append(out, s)
	}
	return out, nil, nil
}

type fakeRevoker struct {
	mu    sync.Mutex
	calls []string
	g     *memGrants
}

func (f *fakeRevoker) RevokeGrant(_ context.Context, ref domain.ObjectRef, subject string) (oauth.RevokeResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := domain.GrantID(ref, subject)
	f.calls = append(f.calls, id)
	g := f.g.grants[id]
	now := time.Now()
	g.Revoked, g.RevokedAt, g.RevokedReason = true, &now, domain.RevokedByRequest
	f.g.grants[id] = g
	return oauth.RevokeResult{GrantID: id, Provider: "not_configured"}, nil
}

type fakeTurns struct {
	mu    sync.Mutex
	state turn.State
	acts  []string
}

func (f *fakeTurns) List(context.Context) ([]turn.Instance, []turn.Unreadable, error) {
	return []turn.Instance{f.state.Instance}, nil, nil
}
func (f *fakeTurns) QueryInstances(_ context.Context, q turn.InstanceQuery) (turn.InstancePage, error) {
	in := f.state.Instance
	if (q.Swarm != "" && q.Swarm != in.Key.Swarm) || (q.Agent != "" && q.Agent != in.Key.Agent) || (q.Status != "" && q.Status != in.Status) {
		return turn.InstancePage{}, nil
	}
	return turn.InstancePage{Instances: []turn.Instance{in}}, nil
}

func (f *fakeTurns) Inspect(_ context.Context, k turn.InstanceKey) (turn.State, error) {
	if k != f.state.Instance.Key {
		return turn.State{}, domain.ErrNotFound
	}
	return f.state, nil
}
func (f *fakeTurns) TurnEvents(_ context.Context, k turn.InstanceKey, id string, after int64) (turn.Turn, []turn.TurnEvent, error) {
	if k != f.state.Instance.Key {
		return turn.Turn{}, nil, domain.ErrNotFound
	}
	return f.state.EventsAfter(id, after)
}
func (f *fakeTurns) act(a string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, a)
	return nil
}
func (f *fakeTurns) Pause(context.Context, turn.InstanceKey) error  { return f.act("pause") }
func (f *fakeTurns) Resume(context.Context, turn.InstanceKey) error { return f.act("resume") }
func (f *fakeTurns) Terminate(_ context.Context, _ turn.InstanceKey, reason string) error {
	return f.act("terminate:" + reason)
}
func (f *fakeTurns) Delete(context.Context, turn.InstanceKey) error { return f.act("delete") }

// tokenValue is a sealed token's ciphertext as the store keeps it: no
// page may show it.
const tokenValue = "c2VhbGVkLXRva2VuLXZhbHVlLW5ldmVyLXNob3du"

type rig struct {
	c       *Console
	h       http.Handler
	grants  *memGrants
	revoker *fakeRevoker
	turns   *fakeTurns
	acme    string // acme's grant id
	globex  string
	logs    *strings.Builder
}

func newRig(t *testing.T) *rig {
	t.Helper()
	now := time.Now().UTC()
	mk := func(app, sub, tenant string) domain.Grant {
		ref := domain.ObjectRef{Kind: "OAuthApp", Name: app}
		exp := now.Add(time.Hour)
		return domain.Grant{ID: domain.GrantID(ref, sub), Provider: "demo", OAuthAppRef: ref, Subject: sub, Tenant: tenant, Flow: "authorizationCode",
			ScopesGranted: []string{"read"}, ScopesRequested: []string{"read", "write"}, CreatedAt: now, UpdatedAt: now,
			Token: domain.GrantToken{TokenType: "Bearer", AccessToken: domain.EncryptedValue{Ciphertext: tokenValue}, ExpiresAt: &exp}}
	}
	a, g := mk("github", "acme:user:ann", "acme"), mk("slack", "globex:user:gus", "globex")
	failedAt := now.Add(-time.Minute)
	a.RefreshFailures, a.LastRefreshError, a.LastRefreshFailedAt = 2, "temporarily_unavailable", &failedAt
	grants := &memGrants{grants: map[string]domain.Grant{a.ID: a, g.ID: g}}
	failed := domain.Session{ID: domain.NewSessionID(), Provider: "demo", OAuthAppRef: a.OAuthAppRef, SubjectMode: "user", Subject: "acme:user:ann",
		Tenant: "acme", Status: domain.SessionFailed, StatusReason: oauth.ReasonSubjectMismatch, CreatedAt: now, ExpiresAt: now.Add(10 * time.Minute),
		Resume: domain.ResumeInfo{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: "thread-1", AgentName: "planner"}}
	key := turn.InstanceKey{Swarm: "default", Key: "thread-1", Agent: "planner"}
	ended := now.Add(3 * time.Second)
	tr := turn.Turn{ID: "turn-1", Instance: key, Status: turn.TurnCompleted, Steps: 2, StartedAt: now, EndedAt: &ended, TraceID: "trace-1"}
	ev := func(seq int64, typ, data string) turn.TurnEvent {
		return turn.TurnEvent{TurnID: "turn-1", Seq: seq, Type: typ, At: now.Add(time.Duration(seq) * time.Second), Data: []byte(data)}
	}
	tt := &fakeTurns{state: turn.State{Instance: turn.Instance{Key: key, Status: turn.Active, CreatedAt: now, UpdatedAt: now},
		Turns: map[string]turn.Turn{"turn-1": tr}, TurnEvents: map[string][]turn.TurnEvent{"turn-1": {
			ev(0, turn.EvTurnStarted, `{"inputType":"user.message"}`),
			ev(2, turn.EvStepStarted, `{"step":1,"model":"planner-model","modelId":"anthropic.claude","finishReason":"tool_use","modelLatencyMs":812.5,"usage":{"promptTokens":12,"completionTokens":5,"totalTokens":17}}`),
			ev(3, turn.EvToolCalled, `{"callId":"c1","tool":"github.issues","step":1,"argsHash":"sha256:abc123"}`),
			ev(4, turn.EvTurnParked, `{"callId":"c1","tool":"github.issues","authSessionId":"as-1","authorizationUrl":"https://idp/x"}`),
			ev(9, turn.EvTurnResumed, `{"authSessionId":"as-1","event":"auth.granted"}`),
			ev(10, turn.EvToolFailed, `{"callId":"c1","tool":"github.issues","code":"E_UPSTREAM","message":"502 from upstream","latencyMs":6021.25}`),
			ev(11, turn.EvTurnCompleted, `{}`),
		}}}}
	rv := &fakeRevoker{g: grants}
	sessions := &memSessions{sessions: map[string]domain.Session{failed.ID: failed}}
	logs := &strings.Builder{}
	c, err := New(Config{
		SignIn: &fakeSignIn{claims: map[string]map[string]any{
			"admin":      {"sub": "admin", "name": "Ada Admin", "agentauth_roles": []any{"agentauth:platform-admin"}},
			"acme-admin": {"sub": "acme-admin", "agentauth_roles": []any{"agentauth:admin"}, "tenant_id": "acme"},
			"notenant":   {"sub": "nt", "agentauth_roles": []any{"agentauth:admin"}},
			"bob":        {"sub": "bob"},
		}},
		Keys:   [][]byte{[]byte(strings.Repeat("k", 32))},
		Grants: grants, Sessions: sessions, Queries: memQueries{grants, sessions}, Revoker: rv, Turns: tt, Instances: tt,
		Revision: func(context.Context) string { return "git:0123456789abcdef0123" },
		Log:      slog.New(slog.NewJSONHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	c.Register(mux)
	return &rig{c: c, h: mux, grants: grants, revoker: rv, turns: tt, acme: a.ID, globex: g.ID, logs: logs}
}

// browser is a cookie jar over the handler.
type browser struct {
	t       *testing.T
	h       http.Handler
	cookies map[string]*http.Cookie
}

func (r *rig) browser(t *testing.T) *browser {
	return &browser{t: t, h: r.h, cookies: map[string]*http.Cookie{}}
}

func (b *browser) do(method, target string, form url.Values) *httptest.ResponseRecorder {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, target, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	rec := httptest.NewRecorder()
	b.h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c
		}
	}
	return rec
}

// signIn runs the sign-in round trip as login and returns where it
// landed.
func (b *browser) signIn(login, next string) *httptest.ResponseRecorder {
	b.t.Helper()
	rec := b.do("GET", "/console/signin?next="+url.QueryEscape(next), nil)
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "https://idp.example/") {
		b.t.Fatalf("signin: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	return b.do("GET", "/console/auth/callback?code=c&state=s&login="+login, nil)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, html string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(html)
	if m == nil {
		t.Fatal("no CSRF token on the page")
	}
	return m[1]
}

func TestSignInAndRoles(t *testing.T) {
	r := newRig(t)
	t.Run("no session: to the sign-in, then back where it was going", func(t *testing.T) {
		b := r.browser(t)
		rec := b.do("GET", "/console/grants?status=active", nil)
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/signin?next=%2Fconsole%2Fgrants%3Fstatus%3Dactive" {
			t.Fatalf("%d %s", rec.Code, rec.Header().Get("Location"))
		}
		pending := b.do("GET", "/console/signin?next=%2Fconsole%2Fgrants", nil).Result().Cookies()[0]
		if pending.Name != pendingCookie || !pending.HttpOnly || pending.SameSite != http.SameSiteLaxMode || pending.Path != "/console/auth/" || pending.MaxAge != 600 {
			t.Fatalf("pending cookie %+v", pending)
		}
		rec = b.do("GET", "/console/auth/callback?login=admin", nil)
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/grants" {
			t.Fatalf("callback: %d %s", rec.Code, rec.Header().Get("Location"))
		}
		s := b.cookies[sessionCookie]
		if s == nil || !s.HttpOnly || s.SameSite != http.SameSiteLaxMode || s.Path != "/console" || s.Secure {
			t.Fatalf("session cookie %+v (Secure only when the config says so)", s)
		}
		if _, ok := b.cookies[pendingCookie]; ok {
			t.Fatal("the pending cookie outlived the callback")
		}
		rec = b.do("GET", "/console/grants", nil)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), "Ada Admin") || !strings.Contains(rec.Body.String(), "platform admin") {
			t.Fatalf("grants as admin: %d", rec.Code)
		}
		// /console is the overview too (a gateway may hand /console/ over
		// so): no redirect to loop on.
		if rec := b.do("GET", "/console", nil); rec.Code != 200 || !strings.Contains(rec.Body.String(), "<h1>Overview</h1>") {
			t.Fatalf("GET /console: %d %s", rec.Code, rec.Header().Get("Location"))
		}
	})
	t.Run("an open redirect is refused", func(t *testing.T) {
		b := r.browser(t)
		for _, next := range []string{"https://evil.example/", "//evil.example/console/", "/elsewhere"} {
			if rec := b.signIn("admin", next); rec.Header().Get("Location") != "/console/" {
				t.Errorf("next %q: landed on %q", next, rec.Header().Get("Location"))
			}
		}
	})
	for _, tc := range []struct{ login, want string }{
		{"bob", "not an agentauth operator"},
		{"notenant", "names no tenant"},
		{"nobody", "access_denied"},
	} {
		t.Run("refused: "+tc.login, func(t *testing.T) {
			b := r.browser(t)
			rec := b.signIn(tc.login, "/console/")
			if rec.Code < 400 || !strings.Contains(rec.Body.String(), tc.want) {
				t.Fatalf("%d %.400s", rec.Code, rec.Body.String())
			}
			if _, ok := b.cookies[sessionCookie]; ok {
				t.Fatal("a refused sign-in got a session")
			}
		})
	}
	t.Run("a callback without the pending cookie", func(t *testing.T) {
		b := r.browser(t)
		rec := b.do("GET", "/console/auth/callback?login=admin", nil)
		if rec.Code != 400 || !strings.Contains(rec.Body.String(), "has expired") {
			t.Fatalf("%d", rec.Code)
		}
	})
	t.Run("a tampered or expired session is no session", func(t *testing.T) {
		b := r.browser(t)
		b.signIn("admin", "/console/")
		v := b.cookies[sessionCookie].Value
		b.cookies[sessionCookie].Value = v[:len(v)-2] + "AA"
		if rec := b.do("GET", "/console/", nil); rec.Code != http.StatusSeeOther {
			t.Fatalf("tampered: %d", rec.Code)
		}
		b.cookies[sessionCookie].Value = v
		r.c.cfg.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		defer func() { r.c.cfg.Now = time.Now }()
		if rec := b.do("GET", "/console/", nil); rec.Code != http.StatusSeeOther {
			t.Fatalf("expired: %d", rec.Code)
		}
	})
	t.Run("a session is capped at maxSession whatever the ID token says", func(t *testing.T) {
		c := r.c
		old := c.cfg.SignIn
		c.cfg.SignIn = longSignIn{old}
		defer func() { c.cfg.SignIn = old }()
		b := r.browser(t)
		b.signIn("admin", "/console/")
		var s session
		if err := c.seal.open(sessionCookie, b.cookies[sessionCookie].Value, &s); err != nil {
			t.Fatal(err)
		}
		if d := time.Until(time.Unix(s.Expires, 0)); d > maxSession || d < maxSession-time.Minute {
			t.Fatalf("session lasts %s", d)
		}
	})
}

// longSignIn says the ID token lives a week.
type longSignIn struct{ SignIn }

func (l longSignIn) Finish(ctx context.Context, q url.Values, p string) (oauth.SignedIn, error) {
	s, err := l.SignIn.Finish(ctx, q, p)
	s.Expiry = time.Now().Add(7 * 24 * time.Hour)
	return s, err
}

func TestTenantAdminSeesOnlyTheirTenant(t *testing.T) {
	r := newRig(t)
	b := r.browser(t)
	b.signIn("acme-admin", "/console/")
	list := b.do("GET", "/console/grants", nil).Body.String()
	if !strings.Contains(list, "acme:user:ann") || strings.Contains(list, "globex") {
		t.Fatalf("acme's admin sees: %s", list)
	}
	if rec := b.do("GET", "/console/grants/"+r.acme, nil); rec.Code != 200 {
		t.Fatalf("own grant: %d", rec.Code)
	}
	for _, p := range []string{"/console/grants?tenant=globex", "/console/consents?tenant=globex", "/console/grants?tenant=%28none%29"} {
		if page := b.do("GET", p, nil).Body.String(); strings.Contains(page, "globex") && !strings.Contains(page, `value="globex"`) || strings.Contains(page, "gus") {
			t.Errorf("%s: a tenant admin's tenant filter reached another tenant", p)
		}
	}
	rec := b.do("GET", "/console/grants/"+r.globex, nil)
	if rec.Code != 404 || strings.Contains(rec.Body.String(), "globex:user:gus") {
		t.Fatalf("another tenant's grant by URL: %d", rec.Code)
	}
	csrf := csrfOf(t, list)
	if rec := b.do("POST", "/console/grants/"+r.globex+"/revoke", url.Values{"csrf": {csrf}}); rec.Code != 404 || len(r.revoker.calls) != 0 {
		t.Fatalf("revoke another tenant's grant: %d, revoker calls %v", rec.Code, r.revoker.calls)
	}
	for _, p := range []string{"/console/instances", "/console/instances/default/thread-1/planner", "/console/instances/default/thread-1/planner/turns/turn-1"} {
		if rec := b.do("GET", p, nil); rec.Code != 404 {
			t.Errorf("%s as a tenant admin: %d", p, rec.Code)
		}
	}
	if rec := b.do("POST", "/console/instances/default/thread-1/planner/pause", url.Values{"csrf": {csrf}}); rec.Code != 404 || len(r.turns.acts) != 0 {
		t.Fatalf("pause as a tenant admin: %d %v", rec.Code, r.turns.acts)
	}
}

func TestActionsNeedTheCSRFToken(t *testing.T) {
	r := newRig(t)
	b := r.browser(t)
	b.signIn("admin", "/console/")
	page := b.do("GET", "/console/grants/"+r.acme, nil).Body.String()
	csrf := csrfOf(t, page)
	for _, form := range []url.Values{nil, {"csrf": {""}}, {"csrf": {csrf + "x"}}} {
		rec := b.do("POST", "/console/grants/"+r.acme+"/revoke", form)
		if rec.Code != http.StatusForbidden || len(r.revoker.calls) != 0 {
			t.Fatalf("form %v: %d, revoker calls %v", form, rec.Code, r.revoker.calls)
		}
	}
	// Another browser's token does not do either.
	other := r.browser(t)
	other.signIn("admin", "/console/")
	if rec := b.do("POST", "/console/grants/"+r.acme+"/revoke", url.Values{"csrf": {csrfOf(t, other.do("GET", "/console/", nil).Body.String())}}); rec.Code != http.StatusForbidden {
		t.Fatalf("another session's token: %d", rec.Code)
	}
	rec := b.do("POST", "/console/grants/"+r.acme+"/revoke", url.Values{"csrf": {csrf}})
	if rec.Code != http.StatusSeeOther || len(r.revoker.calls) != 1 || r.revoker.calls[0] != r.acme {
		t.Fatalf("revoke: %d %v", rec.Code, r.revoker.calls)
	}
	after := b.do("GET", rec.Header().Get("Location"), nil).Body.String()
	if !strings.Contains(after, `id="grant-status">revoked`) || !strings.Contains(after, "Done: revoked") {
		t.Fatalf("after revoke: %s", after)
	}
	if !strings.Contains(r.logs.String(), `"action":"revoke","operator":"admin"`) {
		t.Fatalf("the revoke is not audited with the operator: %s", r.logs.String())
	}
	for _, a := range []string{"pause", "resume", "terminate", "delete"} {
		if rec := b.do("POST", "/console/instances/default/thread-1/planner/"+a, url.Values{"csrf": {csrf}, "reason": {"maintenance"}}); rec.Code != http.StatusSeeOther {
			t.Fatalf("%s: %d %s", a, rec.Code, rec.Body.String())
		}
	}
	if got := strings.Join(r.turns.acts, ","); got != "pause,resume,terminate:maintenance,delete" {
		t.Fatalf("lifecycle calls: %s", got)
	}
}

// Every page: the CSP, no inline script, no token value, the operator's
// name; unknown pages and records are 404 pages, not errors.
func TestPages(t *testing.T) {
	r := newRig(t)
	b := r.browser(t)
	b.signIn("admin", "/console/")
	var sid string
	for id := range r.c.cfg.Sessions.(*memSessions).sessions {
		sid = id
	}
	inline := regexp.MustCompile(`<script(?:\s[^>]*)?>[^<]|<script>|\son[a-z]+=|style=`)
	for _, tc := range []struct {
		path string
		code int
		has  []string
	}{
		{"/console/", 200, []string{"Overview", `id="grants-total">2<`, "subject_mismatch", `id="instances-total">1<`, `id="grants-failing">1<`}},
		{"/console/grants?after=nonsense", 200, []string{"No grants match"}},
		{"/console/grants", 200, []string{"acme:user:ann", "globex:user:gus", "−1", "refresh failing"}},
		{"/console/grants?tenant=globex", 200, []string{"globex:user:gus"}},
		{"/console/grants?status=revoked", 200, []string{"No grants match"}},
		{"/console/grants?tenant=%28none%29", 200, []string{"No grants match"}},
		{"/console/consents?reason=subject_mismatch", 200, []string{"an agent&#39;s turn"}},
		{"/console/consents?reason=provider_error", 200, []string{"No consents match"}},
		{"/console/instances?status=paused", 200, []string{"No instances match"}},
		{"/console/grants/" + r.acme, 200, []string{"not granted: write", "Revoke grant", "2 in a row", "temporarily_unavailable"}},
		{"/console/consents", 200, []string{"subject_mismatch", "an agent&#39;s turn"}},
		{"/console/consents/" + sid, 200, []string{"What the user saw", oauth.ReasonText(oauth.ReasonSubjectMismatch)[:30]}},
		{"/console/instances", 200, []string{"thread-1", "planner"}},
		{"/console/instances/default/thread-1/planner", 200, []string{"turn-1", "Pause", "Terminate"}},
		{"/console/instances/default/thread-1/planner/turns/turn-1", 200, []string{"Parked on consent: github.issues", "waited 5s", "E_UPSTREAM", "prompt tokens", "planner-model", "tool_use", "813 ms", "sha256:abc123", "6021 ms", "Turn started"}},
		{"/console/grants/gr-nope", 404, []string{"Nothing here"}},
		{"/console/consents/as-00000000000000000000000000000000", 404, []string{"Nothing here"}},
		{"/console/instances/default/other/planner", 404, nil},
		{"/console/nowhere", 404, nil},
	} {
		rec := b.do("GET", tc.path, nil)
		body := rec.Body.String()
		if rec.Code != tc.code {
			t.Errorf("%s: %d, want %d", tc.path, rec.Code, tc.code)
		}
		for _, s := range tc.has {
			if !strings.Contains(body, s) {
				t.Errorf("%s: no %q", tc.path, s)
			}
		}
		if !strings.Contains(rec.Header().Get("Content-Security-Policy"), "script-src 'self'") || inline.MatchString(body) {
			t.Errorf("%s: CSP %q or inline script/style/handler in the page", tc.path, rec.Header().Get("Content-Security-Policy"))
		}
		if strings.Contains(body, tokenValue) || strings.Contains(body, "Ciphertext") {
			t.Errorf("%s shows a sealed token", tc.path)
		}
	}
	rec := b.do("GET", "/console/static/console.js", nil)
	if rec.Code != 200 || !strings.Contains(rec.Header().Get("Content-Type"), "javascript") {
		t.Fatalf("console.js: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
}

func TestTimelineStreamsNewEntries(t *testing.T) {
	r := newRig(t)
	tr := r.turns.state.Turns["turn-1"]
	tr.EndedAt, tr.Status = nil, turn.TurnRunning
	r.turns.state.Turns["turn-1"] = tr
	b := r.browser(t)
	b.signIn("admin", "/console/")
	page := b.do("GET", "/console/instances/default/thread-1/planner/turns/turn-1", nil).Body.String()
	if !strings.Contains(page, `data-live="/console/instances/default/thread-1/planner/turns/turn-1/events"`) {
		t.Fatal("a running turn's page does not follow its events")
	}
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/console/instances/default/thread-1/planner/turns/turn-1/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "9")
	req.AddCookie(b.cookies[sessionCookie])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4096)
	n, _ := io.ReadAtLeast(resp.Body, buf, 200)
	got := string(buf[:n])
	if !strings.Contains(got, "id: 10\nevent: entry") || strings.Contains(got, "id: 4\n") || !strings.Contains(got, "Tool failed: github.issues") {
		t.Fatalf("stream after 9: %s", got)
	}
	// Without a session there is no stream.
	req2, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/console/instances/default/thread-1/planner/turns/turn-1/events", nil)
	if resp2, err := http.DefaultClient.Do(req2); err != nil || resp2.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no session: %v %d", err, resp2.StatusCode)
	}
}

// Without a cursor the stream starts at the turn's first event (seq 0); a
// cursor that is not a number is refused.
func TestTimelineStreamCursor(t *testing.T) {
	r := newRig(t)
	tr := r.turns.state.Turns["turn-1"]
	tr.EndedAt, tr.Status = nil, turn.TurnRunning
	r.turns.state.Turns["turn-1"] = tr
	b := r.browser(t)
	b.signIn("admin", "/console/")
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	get := func(cursor string) (*http.Response, string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/console/instances/default/thread-1/planner/turns/turn-1/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		if cursor != "" {
			req.Header.Set("Last-Event-ID", cursor)
		}
		req.AddCookie(b.cookies[sessionCookie])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		buf := make([]byte, 512)
		n, _ := io.ReadAtLeast(resp.Body, buf, 100)
		return resp, string(buf[:n])
	}
	if _, got := get(""); !strings.HasPrefix(got, "id: 0\nevent: entry") || !strings.Contains(got, "Turn started") {
		t.Fatalf("no cursor: %s", got)
	}
	if resp, _ := get("x1"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a cursor that is no number: %d", resp.StatusCode)
	}
}

// failingGrants is a grant store that does not answer.
type failingGrants struct{ *memGrants }

func (f failingGrants) GetGrant(context.Context, string) (domain.Grant, error) {
	return domain.Grant{}, errors.New("dynamostore: get grant: RequestError: connection refused")
}

func TestOverviewBackendHealth(t *testing.T) {
	r := newRig(t)
	b := r.browser(t)
	b.signIn("admin", "/console/")
	page := b.do("GET", "/console/", nil).Body.String()
	if !strings.Contains(page, `id="health"`) || !strings.Contains(page, "grant and session store") || strings.Contains(page, `st-fail">failing<`) {
		t.Fatalf("health: %s", page)
	}
	r.c.cfg.Grants = failingGrants{r.grants}
	page = b.do("GET", "/console/", nil).Body.String()
	if !strings.Contains(page, `<span class="badge st-fail">failing</span>`) || strings.Contains(page, "connection refused") {
		t.Fatalf("a failing store: %s", page)
	}
	if !strings.Contains(r.logs.String(), "connection refused") {
		t.Fatal("the failure is not logged")
	}
	ta := r.browser(t)
	ta.signIn("acme-admin", "/console/")
	if page := ta.do("GET", "/console/", nil).Body.String(); strings.Contains(page, `id="health"`) {
		t.Fatal("a tenant admin sees the backends")
	}
}

func TestConsentStartedBy(t *testing.T) {
	target := domain.ResumeInfo{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: "k", AgentName: "a"}
	for _, tc := range []struct {
		via    string
		resume domain.ResumeInfo
		want   string
	}{
		{domain.StartedByREST, domain.ResumeInfo{}, "the token route"},
		{domain.StartedByTool, domain.ResumeInfo{}, "a tool call (tool routes)"},
		{domain.StartedByMCP, domain.ResumeInfo{}, "a tool call over MCP"},
		{domain.StartedByTurn, target, "an agent's turn"},
		{"", target, "an agent's turn"}, // stored before StartedBy: its resume target says
		{"", domain.ResumeInfo{}, "a runtime request"},
		{domain.StartedByREST, target, "the token route"}, // a runtime's request that names a resume target
	} {
		row := consentRowOf(domain.Session{StartedBy: tc.via, Resume: tc.resume})
		if row.StartedBy != tc.want {
			t.Errorf("%q with resume %v: %q, want %q", tc.via, tc.resume.Target(), row.StartedBy, tc.want)
		}
		if tc.resume.InstanceKey != "" && row.InstanceURL != "/console/instances/default/k/a" {
			t.Errorf("%q: instance link %q", tc.via, row.InstanceURL)
		}
	}
}

type fakeStats struct {
	hours []turn.HourStats
	err   error
}

func (f fakeStats) RecordTurnEnd(context.Context, turn.Turn, float64) error { return nil }
func (f fakeStats) Hours(_ context.Context, from, to time.Time) ([]turn.HourStats, error) {
	if to.Sub(from) != 24*time.Hour || !to.Equal(to.Truncate(time.Hour)) {
		return nil, errors.New("not the last 24 whole hours")
	}
	return f.hours, f.err
}

func TestOverviewTurnsPerHour(t *testing.T) {
	r := newRig(t)
	now := time.Now().UTC().Truncate(time.Hour)
	var hours []turn.HourStats
	for i := range 24 {
		hours = append(hours, turn.HourStats{Hour: now.Add(time.Duration(i-23) * time.Hour)})
	}
	hours[22] = turn.HourStats{Hour: hours[22].Hour, Completed: 30, Failed: 10, Parked: 4, ParkedSeconds: 95}
	hours[23] = turn.HourStats{Hour: hours[23].Hour, Completed: 1}
	r.c.cfg.TurnStats = fakeStats{hours: hours}
	b := r.browser(t)
	b.signIn("admin", "/console/")
	page := b.do("GET", "/console/", nil).Body.String()
	for _, want := range []string{"31 completed", "10 failed", "4 parked on consent, 1m35s waiting", `class="bar-ok h75"`, `class="bar-fail h25"`, `class="bar-ok h5"`,
		hours[22].Hour.Format("15:04") + " UTC: 30 completed, 10 failed, 4 parked, 1m35s waiting"} {
		if !strings.Contains(page, want) {
			t.Errorf("no %q", want)
		}
	}
	if strings.Count(page, "<li title=") != 24 {
		t.Errorf("%d bars, want 24", strings.Count(page, "<li title="))
	}
	r.c.cfg.TurnStats = fakeStats{err: errors.New("boom")}
	if page := b.do("GET", "/console/", nil).Body.String(); !strings.Contains(page, "the turns per hour could not be read") {
		t.Error("a failing read is not said")
	}
}

type memAudit struct{ recs []domain.ToolAudit }

func (m *memAudit) AppendToolAudit(_ context.Context, r domain.ToolAudit) error {
	m.recs = append(m.recs, r)
	return nil
}

func (m *memAudit) QueryToolAudit(_ context.Context, q domain.ToolAuditQuery) (domain.ToolAuditPage, error) {
	var out []domain.ToolAudit
	for i := len(m.recs) - 1; i >= 0; i-- {
		r := m.recs[i]
		if inScope(r.Tenant, q.AnyTenant, q.Tenant) && (q.Tool == "" || q.Tool == r.Tool) && (q.Status == "" || q.Status == r.Status) {
			out = append(out, r)
		}
	}
	return domain.ToolAuditPage{Records: out}, nil
}

func TestToolCallsPage(t *testing.T) {
	r := newRig(t)
	ms := int64(42)
	r.c.cfg.ToolAudit = &memAudit{recs: []domain.ToolAudit{
		{At: time.Now(), CallID: "c1", Tool: "github.issues", Principal: "ann", Tenant: "acme", Transport: "http", Status: "ok", DurationMs: &ms, ArgsHash: "sha256:aaaa"},
		{At: time.Now(), CallID: "c2", Tool: "slack.post", Principal: "gus", Tenant: "globex", Transport: "mcp", Status: "error", ErrorCode: "E_UPSTREAM", ArgsHash: "sha256:bbbb"},
	}}
	b := r.browser(t)
	b.signIn("admin", "/console/")
	page := b.do("GET", "/console/calls", nil).Body.String()
	for _, want := range []string{"github.issues", "slack.post", "42 ms", "E_UPSTREAM", "sha256:aaaa", `href="/console/calls"`} {
		if !strings.Contains(page, want) {
			t.Errorf("calls: no %q", want)
		}
	}
	if page := b.do("GET", "/console/calls?status=error", nil).Body.String(); strings.Contains(page, "github.issues") {
		t.Error("the status filter let an ok call through")
	}
	ta := r.browser(t)
	ta.signIn("acme-admin", "/console/")
	page = ta.do("GET", "/console/calls?tenant=globex", nil).Body.String()
	if !strings.Contains(page, "github.issues") || strings.Contains(page, "slack.post") || strings.Contains(page, "gus") {
		t.Fatalf("a tenant admin's calls: %s", page)
	}
}

// endlessInstances answers every page with 100 instances and a Next.
type endlessInstances struct{ calls int }

func (e *endlessInstances) QueryInstances(_ context.Context, q turn.InstanceQuery) (turn.InstancePage, error) {
	e.calls++
	return turn.InstancePage{Instances: make([]turn.Instance, q.Limit), Next: "more"}, nil
}

// The overview reads at most instancePages pages of instances per status,
// however many there are, and says the figure is a floor.
func TestOverviewInstanceCountIsBounded(t *testing.T) {
	r := newRig(t)
	e := &endlessInstances{}
	r.c.cfg.Instances = e
	b := r.browser(t)
	b.signIn("admin", "/console/")
	page := b.do("GET", "/console/", nil).Body.String()
	// Three statuses, instancePages each, plus the health probe's one.
	if e.calls != 3*instancePages+1 || !strings.Contains(page, `id="instances-total">600+<`) {
		t.Fatalf("%d pages read; %s", e.calls, page)
	}
}

// A stream opened in a session ends when the session does: it never
// serves past the session's expiry.
func TestTimelineStreamEndsWithTheSession(t *testing.T) {
	r := newRig(t)
	tr := r.turns.state.Turns["turn-1"]
	tr.EndedAt, tr.Status = nil, turn.TurnRunning
	r.turns.state.Turns["turn-1"] = tr
	b := r.browser(t)
	b.signIn("admin", "/console/")
	var s session
	if err := r.c.seal.open(sessionCookie, b.cookies[sessionCookie].Value, &s); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	r.c.cfg.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv := httptest.NewServer(r.h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/console/instances/default/thread-1/planner/turns/turn-1/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(b.cookies[sessionCookie])
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("open: %v", err)
	}
	defer resp.Body.Close()
	mu.Lock()
	now = time.Unix(s.Expires, 0)
	mu.Unlock()
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatalf("the stream did not end with the session: %v", err)
	}
}
