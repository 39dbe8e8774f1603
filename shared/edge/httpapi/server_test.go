package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/filestore"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/observe/logging"
)

const runtimeToken = "test-runtime-token"

const testBundle = `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: team}
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: global
  client:
    clientId: {value: client-1}
    clientSecret: {value: secret-1}
  endpoints:
    authorizationUrl: http://127.0.0.1:1/authorize
    tokenUrl: http://127.0.0.1:1/token
  scopes: [read, write]
  redirect: {callbackPath: /oauth/callback/team}
`

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type fixture struct {
	handler http.Handler
	server  *Server
	store   *filestore.Store
	keyring *aesseal.Keyring
	logs    *syncBuf
	app     *bundle.OAuthApp
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	home := t.TempDir()
	st, err := filestore.New(home)
	if err != nil {
		t.Fatal(err)
	}
	kr, _, err := aesseal.Ensure(home, "", false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Parse([]bundle.File{{Name: "b.yaml", Data: []byte(testBundle)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	log := logging.New(logs, slog.LevelInfo)
	mgr, err := oauth.New(oauth.Config{Bundle: b, Store: st, Sealer: kr, Queue: nopQueue{}, StateKeys: kr.DerivedKeys("state"), BaseURL: "http://127.0.0.1:8080", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(mgr, b, BearerToken{Token: domain.NewSecret(runtimeToken)}, log)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{handler: srv.Handler(), server: srv, store: st, keyring: kr, logs: logs, app: b.OAuthApps["team"]}
}

type nopQueue struct{}

func (nopQueue) Enqueue(context.Context, domain.Event) error { return nil }

func (f *fixture) seed(t testing.TB, subject, token string) {
	t.Helper()
	id := oauth.GrantID(f.app.Ref(), subject)
	at, err := f.keyring.Seal(context.Background(), []byte(token), domain.Binding{Record: "grant", RecordID: id, Field: "accessToken"})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Hour).UTC()
	if _, err := f.store.PutGrant(context.Background(), domain.Grant{ID: id, Provider: "demo", OAuthAppRef: f.app.Ref(), Subject: subject,
		Flow: domain.FlowAuthorizationCode, ScopesGranted: []string{"read", "write"},
		Token: domain.GrantToken{TokenType: "Bearer", AccessToken: at, ExpiresAt: &exp, IssuedAt: time.Now().UTC()}}, 0); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) do(method, target, body string, hdr map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+runtimeToken)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	return rec
}

func decode(t *testing.T, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
		t.Fatalf("body %q: %v", rec.Body.String(), err)
	}
	return m
}

func TestCallerAuth(t *testing.T) {
	f := newFixture(t)
	for name, hdr := range map[string]string{"none": "", "wrong": "Bearer nope", "basic": "Basic " + runtimeToken, "empty bearer": "Bearer "} {
		t.Run(name, func(t *testing.T) {
			rec := f.do("POST", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team"}`, map[string]string{"Authorization": hdr})
			if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") == "" || decode(t, rec)["error"].(map[string]any)["code"] != "unauthenticated" {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
		})
	}
	for _, p := range []string{"/v1/oauth/sessions/as-00000000000000000000000000000000", "/v1/oauth/pending?swarmRef=Swarm/s&instanceKey=a&agentName=b"} {
		if rec := f.do("GET", p, "", map[string]string{"Authorization": ""}); rec.Code != 401 {
			t.Fatalf("%s without credential: %d", p, rec.Code)
		}
	}
	if rec := f.do("GET", "/healthz", "", map[string]string{"Authorization": ""}); rec.Code != 200 {
		t.Fatalf("healthz: %d", rec.Code)
	}
}

func TestTokenMalformedRequests(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, body string
		hdr        map[string]string
		status     int
		code       string
		mentions   string
	}{
		{"not JSON", `{"oauthAppRef":`, nil, 400, "invalidRequest", "truncated JSON"},
		{"bad JSON", `{"oauthAppRef":x}`, nil, 400, "invalidRequest", "invalid JSON at byte 16"},
		{"empty", ``, nil, 400, "invalidRequest", "empty body"},
		{"unknown field", `{"oauthAppRef":"OAuthApp/team","scope":["x"]}`, nil, 400, "invalidRequest", `"scope"`},
		{"no ref", `{"scopes":["read"]}`, nil, 400, "invalidRequest", "oauthAppRef"},
		{"scopes not a list", `{"oauthAppRef":"OAuthApp/team","scopes":"read"}`, nil, 400, "invalidRequest", "field scopes"},
		{"minTtl not a number", `{"oauthAppRef":"OAuthApp/team","minTtlSeconds":"5"}`, nil, 400, "invalidRequest", "minTtlSeconds"},
		{"resume incomplete", `{"oauthAppRef":"OAuthApp/team","turn":{"resume":{"agentName":"a"}}}`, nil, 400, "invalidRequest", "swarmRef, instanceKey"},
		{"unknown field in swarmRef", `{"oauthAppRef":"OAuthApp/team","turn":{"resume":{"swarmRef":{"kind":"Swarm","name":"s","x":1},"instanceKey":"i","agentName":"a"}}}`, nil, 400, "invalidRequest", `unknown field "x"`},
		{"resume not a Swarm", `{"oauthAppRef":"OAuthApp/team","turn":{"resume":{"swarmRef":"Team/victim","instanceKey":"i","agentName":"a"}}}`, nil, 400, "invalidRequest", `must name a Swarm`},
		{"trailing data", `{"oauthAppRef":"OAuthApp/team"} {}`, nil, 400, "invalidRequest", "after the JSON"},
		{"trailing bracket", `{"oauthAppRef":"OAuthApp/team"}]`, nil, 400, "invalidRequest", "after the JSON"},
		{"wrong content type", `{}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupportedMediaType", "application/json"},
		{"form post", `{}`, map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupportedMediaType", "application/json"},
		{"too large", `{"oauthAppRef":"` + strings.Repeat("a", 70<<10) + `"}`, nil, 413, "payloadTooLarge", "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do("POST", "/v1/oauth/token", tc.body, tc.hdr)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			e := decode(t, rec)["error"].(map[string]any)
			if e["code"] != tc.code || !strings.Contains(e["message"].(string), tc.mentions) || e["requestId"] != rec.Header().Get("X-Request-Id") {
				t.Fatalf("error %v, want code %s, a message mentioning %q and the request id", e, tc.code, tc.mentions)
			}
		})
	}
}

func TestTokenErrorResults(t *testing.T) {
	f := newFixture(t)
	turn := `"turn":{"auth":{"subjects":{"global":"demo:team:T1"}}}`
	for _, tc := range []struct{ name, body, code, mentions string }{
		{"ref without kind", `{"oauthAppRef":"team",` + turn + `}`, oauth.CodeOAuthAppNotFound, ""},
		{"ref of another kind", `{"oauthAppRef":{"kind":"Tool","name":"team"},` + turn + `}`, oauth.CodeOAuthAppNotFound, ""},
		{"ref object missing name", `{"oauthAppRef":{"kind":"OAuthApp"},` + turn + `}`, oauth.CodeOAuthAppNotFound, ""},
		{"ref object with an unknown field", `{"oauthAppRef":{"kind":"OAuthApp","name":"team","scopes":["read"]},` + turn + `}`, oauth.CodeOAuthAppNotFound, `oauthAppRef: unknown field "scopes"`},
		{"ref a number", `{"oauthAppRef":7,` + turn + `}`, oauth.CodeOAuthAppNotFound, ""},
		{"unknown app", `{"oauthAppRef":"OAuthApp/other",` + turn + `}`, oauth.CodeOAuthAppNotFound, ""},
		{"scopes beyond the app", `{"oauthAppRef":"OAuthApp/team","scopes":["admin"],` + turn + `}`, oauth.CodeScopeNotAllowed, ""},
		{"no subject", `{"oauthAppRef":"OAuthApp/team"}`, oauth.CodeSubjectUnavailable, ""},
		{"negative minTtl", `{"oauthAppRef":"OAuthApp/team","minTtlSeconds":-5,` + turn + `}`, oauth.CodeConfigurationError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do("POST", "/v1/oauth/token", tc.body, nil)
			m := decode(t, rec)
			if rec.Code != 200 || m["status"] != "error" || m["error"].(map[string]any)["code"] != tc.code {
				t.Fatalf("%d %v, want error %s", rec.Code, m, tc.code)
			}
			if msg, _ := m["error"].(map[string]any)["message"].(string); !strings.Contains(msg, tc.mentions) {
				t.Fatalf("message %q, want it to mention %q", msg, tc.mentions)
			}
		})
	}
}

func TestTokenReadyAndAuthorizationRequired(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "demo:team:T1", "the-access-token")
	rec := f.do("POST", "/v1/oauth/token", `{"oauthAppRef":{"kind":"OAuthApp","name":"team"},"turn":{"auth":{"subjects":{"global":"demo:team:T1"}}}}`, nil)
	m := decode(t, rec)
	if m["status"] != "ready" || m["accessToken"] != "the-access-token" || m["tokenType"] != "Bearer" || m["expiresAt"] == nil {
		t.Fatalf("ready: %v", m)
	}
	if rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatal("token response may be cached")
	}
	if strings.Contains(f.logs.String(), "the-access-token") {
		t.Fatal("token in logs")
	}
	rec = f.do("POST", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","scopes":["read"],"turn":{"auth":{"subjects":{"global":"demo:team:T2"}},"origin":{"channel":"C1"},"resume":{"swarmRef":"Swarm/default","instanceKey":"i1","agentName":"planner"}}}`, nil)
	m = decode(t, rec)
	if m["status"] != "authorization_required" || m["authSessionId"] == "" || m["authorizationUrl"] == "" || m["expiresAt"] == nil || m["message"] == "" {
		t.Fatalf("authorization_required: %v", m)
	}
	if _, has := m["accessToken"]; has {
		t.Fatal("authorization_required carries accessToken")
	}
	id := m["authSessionId"].(string)
	rec = f.do("GET", "/v1/oauth/sessions/"+id, "", nil)
	if s := decode(t, rec); rec.Code != 200 || s["status"] != "pending" || s["expiresAt"] == nil {
		t.Fatalf("session: %d %v", rec.Code, s)
	}
	rec = f.do("GET", "/v1/oauth/pending?swarmRef=Swarm/default&instanceKey=i1&agentName=planner", "", nil)
	if p := decode(t, rec); p["type"] != "auth.pending" || len(p["items"].([]any)) != 1 {
		t.Fatalf("pending: %v", p)
	}
}

func TestSessionRoute(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/v1/oauth/sessions/as-00000000000000000000000000000000", 404},
		{"/v1/oauth/sessions/..%2f..%2fetc", 404},
		{"/v1/oauth/sessions/as-00000000000000000000000000000000?wait=abc", 400},
		{"/v1/oauth/sessions/as-00000000000000000000000000000000?wait=-1", 400},
	} {
		if rec := f.do("GET", tc.path, "", nil); rec.Code != tc.status {
			t.Errorf("%s: %d, want %d (%s)", tc.path, rec.Code, tc.status, rec.Body)
		}
	}
}

func TestRevokeRoute(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "demo:team:T1", "tok")
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"oauthAppRef":"OAuthApp/team"}`, 400, "invalidRequest"},
		{`{"oauthAppRef":{"kind":"OAuthApp","name":"team","subject":"demo:team:T1"},"subject":"demo:team:T1"}`, 400, "invalidRequest"},
		{`{"oauthAppRef":"OAuthApp/nope","subject":"x"}`, 404, oauth.CodeOAuthAppNotFound},
		{`{"oauthAppRef":"OAuthApp/team","subject":"nobody"}`, 404, "grantNotFound"},
	} {
		rec := f.do("POST", "/v1/oauth/revoke", tc.body, nil)
		if rec.Code != tc.status || decode(t, rec)["error"].(map[string]any)["code"] != tc.code {
			t.Errorf("%s: %d %s", tc.body, rec.Code, rec.Body)
		}
	}
	rec := f.do("POST", "/v1/oauth/revoke", `{"oauthAppRef":"OAuthApp/team","subject":"demo:team:T1"}`, nil)
	if m := decode(t, rec); rec.Code != 200 || m["revoked"] != true || m["providerRevocation"] != oauth.ProviderNotConfigured {
		t.Fatalf("revoke: %d %v", rec.Code, m)
	}
	rec = f.do("POST", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","turn":{"auth":{"subjects":{"global":"demo:team:T1"}}}}`, nil)
	if decode(t, rec)["status"] != "authorization_required" {
		t.Fatal("revoked grant still served")
	}
}

func TestCallbackPage(t *testing.T) {
	f := newFixture(t)
	rec := f.do("GET", "/oauth/callback/team?code=secret-code-123&state=forged.state", "", map[string]string{"Authorization": ""})
	if rec.Code != 400 {
		t.Fatalf("status %d", rec.Code)
	}
	body := rec.Body.String()
	if !strings.Contains(body, `data-reason="invalid_state"`) || strings.Contains(body, "secret-code-123") || strings.Contains(body, "forged.state") {
		t.Fatalf("page: %s", body)
	}
	h := rec.Header()
	if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'none'") || h.Get("Cache-Control") != "no-store" || h.Get("Referrer-Policy") != "no-referrer" || h.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("headers %v", h)
	}
	if strings.Contains(f.logs.String(), "secret-code-123") {
		t.Fatal("code in logs")
	}
	rec = f.do("GET", "/oauth/callback/team", "", nil)
	if !strings.Contains(rec.Body.String(), "missing_state") {
		t.Fatalf("no state: %s", rec.Body)
	}
}

func TestRequestAndTraceIDs(t *testing.T) {
	f := newFixture(t)
	rec := f.do("GET", "/healthz", "", map[string]string{"X-Request-Id": "req-42", "Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	if rec.Header().Get("X-Request-Id") != "req-42" {
		t.Fatal("request id not echoed")
	}
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		_ = json.Unmarshal([]byte(l), &line)
	}
	if line["requestId"] != "req-42" || line["traceId"] != "4bf92f3577b34da6a3ce929d0e0e4736" || line["route"] != "/healthz" || line["status"] != float64(200) {
		t.Fatalf("access log %v", line)
	}
	rec = f.do("GET", "/healthz", "", map[string]string{"X-Request-Id": "bad id with spaces"})
	if got := rec.Header().Get("X-Request-Id"); got == "" || strings.Contains(got, " ") {
		t.Fatalf("unsafe request id kept: %q", got)
	}
	if rec := f.do("GET", "/nope", "", nil); rec.Code != 404 {
		t.Fatalf("unknown route %d", rec.Code)
	}
}

func FuzzCallbackQuery(f *testing.F) {
	fx := newFixture(f)
	f.Add("code=abc&state=def")
	f.Add("state=eyJzaWQiOiJhcy0xIn0.AAAA&error=access_denied")
	f.Add("state=%ZZ&code=%00")
	f.Add("error=" + strings.Repeat("x", 5000))
	f.Fuzz(func(t *testing.T, rawQuery string) {
		req := httptest.NewRequest("GET", "/oauth/callback/team", nil)
		req.URL.RawQuery = rawQuery
		rec := httptest.NewRecorder()
		fx.handler.ServeHTTP(rec, req)
		if rec.Code != 400 {
			t.Fatalf("status %d for %q", rec.Code, rawQuery)
		}
		if code := req.URL.Query().Get("code"); len(code) > 8 && strings.Contains(rec.Body.String(), code) {
			t.Fatalf("page echoes the code")
		}
	})
}

func TestTokenReadyShorterThanRequested(t *testing.T) {
	f := newFixture(t)
	f.seed(t, "demo:team:T1", "the-access-token") // lives one hour
	for _, tc := range []struct {
		minTTL string
		want   any
	}{{"300", nil}, {"7200", true}} {
		rec := f.do("POST", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","minTtlSeconds":`+tc.minTTL+`,"turn":{"auth":{"subjects":{"global":"demo:team:T1"}}}}`, nil)
		m := decode(t, rec)
		if m["status"] != "ready" || m["ttlShorterThanRequested"] != tc.want {
			t.Fatalf("minTtlSeconds %s: %v, want ttlShorterThanRequested %v", tc.minTTL, m, tc.want)
		}
	}
}

// A hostile provider error value never reaches the page or the log: the
// page shows the code only when it is a plain RFC 6749-style code.
func TestCallbackPageProviderError(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ value, want string }{
		{"access_denied", "access_denied"},
		{`<img src=x onerror=alert(1)>ZQXJ"` + "\n\x00\xff", "unknown_error"},
	} {
		rec := f.do("POST", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","turn":{"auth":{"subjects":{"global":"demo:team:T3"}}}}`, nil)
		u, err := url.Parse(decode(t, rec)["authorizationUrl"].(string))
		if err != nil {
			t.Fatal(err)
		}
		q := url.Values{"state": {u.Query().Get("state")}, "error": {tc.value}, "error_description": {"<b>ZQXJ</b>"}}
		rec = f.do("GET", "/oauth/callback/team?"+q.Encode(), "", map[string]string{"Authorization": ""})
		body := rec.Body.String()
		if rec.Code != 400 || !strings.Contains(body, `data-reason="provider_error"`) || !strings.Contains(body, "<code>"+tc.want+"</code>") {
			t.Fatalf("%q: page %d %s", tc.value, rec.Code, body)
		}
		if strings.Contains(body, "ZQXJ") || strings.Contains(f.logs.String(), "ZQXJ") || strings.Contains(body, "<img") {
			t.Fatalf("%q: provider text on the page or in the log", tc.value)
		}
	}
}

// TestCallbackPageNamesScopesNotGranted: the person who consented learns
// what the provider declined (the page is HTML-escaped by html/template).
func TestCallbackPageNamesScopesNotGranted(t *testing.T) {
	var b strings.Builder
	if err := callbackPage.Execute(&b, pageData{OK: true, Provider: "demo", NotGranted: []string{"offline_access", "<x>"}, RequestID: "r1"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `id="not-granted"`) || !strings.Contains(b.String(), "<code>offline_access</code>") || !strings.Contains(b.String(), "<code>&lt;x&gt;</code>") {
		t.Fatalf("page: %s", b.String())
	}
	b.Reset()
	_ = callbackPage.Execute(&b, pageData{OK: true, Provider: "demo"})
	if strings.Contains(b.String(), "not-granted") {
		t.Fatal("a full grant mentions scopes not granted")
	}
}

// GET /v1/oauth/pending answers one whole resume target: swarm, instance
// key and agent (issue 17). Another swarm with the same instance key and
// agent sees nothing of the first's consent, and a caller that leaves
// the swarm out is refused, not answered across swarms.
func TestPendingRouteIsPerSwarm(t *testing.T) {
	f := newFixture(t)
	resume := func(swarm string) string {
		return `{"oauthAppRef":"OAuthApp/team","turn":{"auth":{"subjects":{"global":"demo:team:` + swarm + `"}},` +
			`"resume":{"swarmRef":"Swarm/` + swarm + `","instanceKey":"C1","agentName":"assistant"}}}`
	}
	victim := decode(t, f.do("POST", "/v1/oauth/token", resume("victim"), nil))
	if victim["status"] != "authorization_required" {
		t.Fatalf("victim's token request: %v", victim)
	}
	for _, tc := range []struct {
		name, query string
		status      int
		// items are the authSessionIds listed (status 200), or what
		// the error message names (400).
		items []string
		names string
	}{
		{"the victim's swarm", "swarmRef=Swarm/victim&instanceKey=C1&agentName=assistant", 200, []string{victim["authSessionId"].(string)}, ""},
		{"the same, encoded", "swarmRef=Swarm%2Fvictim&instanceKey=C1&agentName=assistant", 200, []string{victim["authSessionId"].(string)}, ""},
		{"another swarm", "swarmRef=Swarm/other&instanceKey=C1&agentName=assistant", 200, nil, ""},
		{"another kind", "swarmRef=Team/victim&instanceKey=C1&agentName=assistant", 200, nil, ""},
		{"no swarm", "instanceKey=C1&agentName=assistant", 400, nil, "missing swarmRef;"},
		{"empty swarm", "swarmRef=&instanceKey=C1&agentName=assistant", 400, nil, "missing swarmRef;"},
		{"a bare swarm name", "swarmRef=victim&instanceKey=C1&agentName=assistant", 400, nil, "swarmRef: object reference \"victim\": want Kind/name"},
		{"a swarm without a name", "swarmRef=Swarm/&instanceKey=C1&agentName=assistant", 400, nil, "want Kind/name"},
		{"no instance", "swarmRef=Swarm/victim&agentName=assistant", 400, nil, "missing instanceKey;"},
		{"only the instance", "instanceKey=C1", 400, nil, "missing swarmRef, agentName;"},
		{"nothing", "", 400, nil, "missing swarmRef, instanceKey, agentName;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do("GET", "/v1/oauth/pending?"+tc.query, "", nil)
			m := decode(t, rec)
			if rec.Code != tc.status {
				t.Fatalf("%d %v, want %d", rec.Code, m, tc.status)
			}
			if tc.status != 200 {
				e, _ := m["error"].(map[string]any)
				if msg, _ := e["message"].(string); e["code"] != httpx.CodeInvalidRequest || !strings.Contains(msg, tc.names) {
					t.Fatalf("error %v, want %s saying %s", m, httpx.CodeInvalidRequest, tc.names)
				}
				return
			}
			var got []string
			for _, it := range m["items"].([]any) {
				got = append(got, it.(map[string]any)["authSessionId"].(string))
			}
			if strings.Join(got, ",") != strings.Join(tc.items, ",") || m["type"] != "auth.pending" {
				t.Fatalf("items %v, want %v (%v)", got, tc.items, m)
			}
			if tc.items == nil && strings.Contains(rec.Body.String(), victim["authorizationUrl"].(string)) {
				t.Fatal("another target's answer holds the victim's consent link")
			}
		})
	}
}
