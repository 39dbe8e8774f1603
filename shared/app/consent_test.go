package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/embedded"
	"github.com/agentauth/agentauth/shared/local/queueworker"
	"github.com/agentauth/agentauth/shared/observe/logging"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// tokenCanary is in every access token the rig's provider issues: no log
// line may hold it.
const tokenCanary = "ya29.consent-canary-7f3e9a"

// consentBundle: the demo's turn plane — the whoami http tool behind a
// consent (OAuthApp demo, global subject), shown to every caller with a
// sub claim, the assistant that calls it, the scripted model.
const consentBundle = `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: demo}
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: global
  client: {clientId: {value: demo-client}, clientSecret: {value: demo-secret}}
  endpoints: {authorizationUrl: "IDP/authorize", tokenUrl: "IDP/token"}
  scopes: [profile]
  redirect: {callbackPath: /oauth/callback/demo}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: whoami}
spec: {id: "demo:whoami", name: whoami, description: who the user is, inputSchema: {type: object}, sourceId: demo, sourcePath: /me,
  method: GET, transport: http, url: "UPSTREAM", auth: {oauthAppRef: demo}}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: demo-tools}
spec: {explicitToolIds: ["demo:whoami"]}
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: everyone}
spec: {claimMatchers: [{claim: sub, operator: exists}], allowedGroupIds: [demo-tools]}
---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: scripted}
spec: {provider: openai, model: scripted, endpoint: "MODEL/v1"}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec: {modelRef: Model/scripted, tools: {explicitToolIds: ["demo:whoami"]}}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: default}
spec: {agents: [Agent/assistant], entrypoint: Agent/assistant}
`

// lockedBuffer collects log lines from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// from returns what was written since mark, and the new mark.
func (l *lockedBuffer) from(mark int) (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()[mark:], l.b.Len()
}

// idp is a compact OAuth provider: approve plays the user's consent to an
// authorization URL, and /token exchanges the code (its PKCE verifier
// checked) for an access token holding tokenCanary. It refuses every
// refresh (invalid_grant). forget drops the tokens it issued, as a
// restarted provider or a user who removed the app would.
type idp struct {
	srv   *httptest.Server
	mu    sync.Mutex
	codes map[string]string // code → PKCE challenge
	live  map[string]bool   // access tokens it honours
	n     int
}

func newIdP(tb testing.TB) *idp {
	p := &idp{codes: map[string]string{}, live: map[string]bool{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.token))
	tb.Cleanup(p.srv.Close)
	return p
}

func (p *idp) approve(tb testing.TB, authURL string) (code, state string) {
	tb.Helper()
	u, err := url.Parse(authURL)
	if err != nil || u.Query().Get("code_challenge_method") != "S256" || u.Query().Get("state") == "" {
		tb.Fatalf("authorization URL %q: %v", authURL, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	code = fmt.Sprintf("code-%d", p.n)
	p.codes[code] = u.Query().Get("code_challenge")
	return code, u.Query().Get("state")
}

func (p *idp) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	p.mu.Lock()
	challenge, ok := p.codes[r.PostForm.Get("code")]
	delete(p.codes, r.PostForm.Get("code"))
	p.n++
	n := p.n
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/token" || r.PostForm.Get("grant_type") != "authorization_code" || !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != challenge {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	}
	at := fmt.Sprintf("%s-%d", tokenCanary, n)
	p.mu.Lock()
	p.live[at] = true
	p.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": at, "token_type": "Bearer",
		"expires_in": 3600, "refresh_token": fmt.Sprintf("rt-%s-%d", tokenCanary, n), "scope": "profile"})
}

// honours reports whether the provider still knows the access token of
// an Authorization header.
func (p *idp) honours(authorization string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live[strings.TrimPrefix(authorization, "Bearer ")]
}

// forget drops every token the provider issued.
func (p *idp) forget() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.live)
}

// consentRig is `agentauth serve`'s turn plane in one process: Build on
// the embedded backends of a temporary home (file store, file queue, turn
// file store), the scripted model (the demo script: call whoami, then
// answer from its result; not a language model), the compact provider,
// and a whoami upstream that reports when it is called and refuses (401)
// a token the provider no longer honours. Its logger writes every line
// to logs.
type consentRig struct {
	app    *App
	home   *embedded.Backends
	idp    *idp
	logs   *lockedBuffer
	log    *slog.Logger
	hits   chan time.Time // the upstream's calls, as they arrive
	parked chan string    // turn.parked's authorization URLs
	ended  chan turn.Turn // turns as they end
}

// Documents in extra are added to consentBundle.
func newConsentRig(tb testing.TB, extra ...string) *consentRig {
	tb.Helper()
	r := &consentRig{idp: newIdP(tb), logs: &lockedBuffer{}, hits: make(chan time.Time, 16), parked: make(chan string, 16), ended: make(chan turn.Turn, 16)}
	r.log = logging.New(r.logs, slog.LevelDebug)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		at := time.Now()
		select {
		case r.hits <- at:
		default:
		}
		if !r.idp.honours(req.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"name":"alice"}`))
	}))
	tb.Cleanup(up.Close)
	sm, err := scripted.New(scripted.DemoScript(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	modelURL, err := sm.Start("127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { sm.Close() })
	cfg := setup(tb, strings.NewReplacer("IDP", r.idp.srv.URL, "UPSTREAM", up.URL, "MODEL", modelURL).Replace(strings.Join(append([]string{consentBundle}, extra...), "---\n")))
	if r.home, err = embedded.Open(context.Background(), cfg.Home, "", true); err != nil {
		tb.Fatal(err)
	}
	if r.app, err = Build(context.Background(), cfg, FromEmbedded(r.home, cfg.LocalSecrets()), r.log, Options{}); err != nil {
		tb.Fatal(err)
	}
	e := r.app.Turns.Engine
	e.Notify = chainNotify(e.Notify, func(_ context.Context, t turn.Turn, evs []turn.TurnEvent) {
		for _, ev := range evs {
			switch ev.Type {
			case turn.EvTurnParked:
				var d struct{ AuthorizationURL string }
				_ = json.Unmarshal(ev.Data, &d)
				r.parked <- d.AuthorizationURL
			case turn.EvTurnCompleted, turn.EvTurnFailed:
				r.ended <- t
			}
		}
	})
	return r
}

// worker is serve's turn worker on the rig's home.
func (r *consentRig) worker() *queueworker.Worker {
	return &queueworker.Worker{Queue: r.home.Queue, Handle: r.app.Turns.Engine.Handle, KeyOf: engine.KeyOf,
		Dir: filepath.Join(r.home.Home, "worker"), Log: r.log}
}

// post queues a user's "who am I?" for instance key; n names the user
// (and the subject whose token whoami needs, so each n asks for consent).
func (r *consentRig) post(tb testing.TB, key string, n int) {
	tb.Helper()
	auth := domain.TurnAuth{Claims: map[string]any{"sub": fmt.Sprintf("user-%d", n)}, Subjects: &domain.Subjects{Global: fmt.Sprintf("demo:team:T%d", n)}}
	if _, err := r.app.Turns.Post(context.Background(), "default", key, Incoming{Text: "who am I?", Auth: auth}); err != nil {
		tb.Fatal(err)
	}
}

// consent plays the user's browser on the authorization URL: the
// provider's approval, then the callback route; it returns when the
// callback has answered (auth.granted is queued by then).
func (r *consentRig) consent(tb testing.TB, authURL string) {
	tb.Helper()
	code, state := r.idp.approve(tb, authURL)
	rec := httptest.NewRecorder()
	r.app.CallbackHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/oauth/callback/demo?"+url.Values{"code": {code}, "state": {state}}.Encode(), nil))
	if rec.Code != http.StatusOK {
		tb.Fatalf("callback: %d %s", rec.Code, rec.Body)
	}
}

func receive[T any](tb testing.TB, c <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatalf("no %s in 10 s", what)
		panic("unreachable")
	}
}

// TestTurnLogLinesCarryTheTraceID: every log line written while a whole
// turn runs — it parks on the consent, the callback queues auth.granted,
// the call resumes and the model answers — carries the turn's trace id:
// the engine's, the tools adapter's, the hooks' audit lines, the OAuth
// core's, the metrics'. No line of the run, the callback's included,
// holds the token.
func TestTurnLogLinesCarryTheTraceID(t *testing.T) {
	r := newConsentRig(t)
	w := r.worker()
	ctx := context.Background()
	r.post(t, "thread-1", 1)
	_, mark := r.logs.from(0)
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	parkedLines, mark := r.logs.from(mark)
	authURL := receive(t, r.parked, "turn.parked")
	r.consent(t, authURL)
	_, mark = r.logs.from(mark)
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	resumedLines, _ := r.logs.from(mark)
	tr := receive(t, r.ended, "turn end")
	if tr.Status != turn.TurnCompleted || !strings.Contains(tr.Final, "alice") || tr.TraceID == "" {
		t.Fatalf("turn %s %q (trace %q): want completed with the upstream's name", tr.Status, tr.Final, tr.TraceID)
	}
	seen := map[string]bool{}
	for _, part := range []struct{ name, lines string }{{"until parked", parkedLines}, {"resumed", resumedLines}} {
		for _, line := range strings.Split(strings.TrimSpace(part.lines), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s: not a JSON line %q: %v", part.name, line, err)
			}
			msg, _ := rec["msg"].(string)
			seen[msg] = true
			if rec["traceId"] != tr.TraceID {
				t.Errorf("%s: line %q has traceId %v, want %s", part.name, msg, rec["traceId"], tr.TraceID)
			}
			if n := strings.Count(line, `"traceId":`); n != 1 {
				t.Errorf("%s: line %q names traceId %d times", part.name, msg, n)
			}
		}
	}
	for _, msg := range []string{"turn started", "agent.toolCalled", "agent.toolReturned", "tool call parked for consent", "model answered",
		"step metrics", "turn metrics", "turn ended"} {
		if !seen[msg] {
			t.Errorf("no %q line during the turn (lines: %v)", msg, seen)
		}
	}
	all, _ := r.logs.from(0)
	if strings.Contains(all, tokenCanary) {
		t.Fatalf("a log line holds the token:\n%s", all)
	}
}
