package mcpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
)

// fakeVerifier accepts the tokens it knows (their claims); others are
// refused as an unknown key would be.
type fakeVerifier map[string]jwtauth.Claims

func (f fakeVerifier) Verify(_ context.Context, raw string) (jwtauth.Claims, error) {
	if c, ok := f[raw]; ok {
		return c, nil
	}
	if raw == "tok-boom" {
		return nil, errors.New("a verifier error without a reason code")
	}
	return nil, &jwtauth.Error{Reason: jwtauth.ReasonWrongAudience}
}

const resource = "https://tools.example.test/mcp"

// clockStart is the fake clock's start; the tokens expire relative to it.
var clockStart = time.Unix(1_800_000_000, 0)

// fakeClock is a clock the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// exp is a NumericDate d after the clock's start, as the verifier
// decodes one.
func exp(d time.Duration) json.Number {
	return json.Number(strconv.FormatInt(clockStart.Add(d).Unix(), 10))
}

// tokens are the test's JWTs by their claims. alice's come in three
// kinds: her full token, a bare one (no scope, another tenant, no OAuth
// subjects) and one that expires a minute after the clock's start.
var tokens = fakeVerifier{
	"tok-alice": {"sub": "alice", "scope": "profile.read", "tenant_id": "acme", "skills": []any{"refunds"},
		"agentauth_subjects": map[string]any{"user": "demo:user:alice"}, "exp": exp(time.Hour)},
	"tok-alice-bare":  {"sub": "alice", "tenant_id": "globex", "exp": exp(time.Hour)},
	"tok-alice-short": {"sub": "alice", "scope": "profile.read", "exp": exp(time.Minute)},
	"tok-bob":         {"sub": "bob", "exp": exp(time.Hour)},
	"tok-carol":       {"sub": "carol", "exp": exp(time.Hour)},
	"tok-nosub":       {"scope": "x", "exp": exp(time.Hour)},
}

// harnessConfig is what a test changes of the server it runs.
type harnessConfig struct {
	stateless                 bool
	limits                    SessionLimits
	origins                   []string
	consents                  Consents
	revision                  func(context.Context) string
	watchEvery, manifestEvery time.Duration
	// writeTimeout is the http.Server's WriteTimeout (0: none).
	writeTimeout time.Duration
	streams      *httpx.StreamGate
	log          *slog.Logger
}

// harness is the MCP server over Streamable HTTP on a loopback server.
type harness struct {
	url   string
	rt    *routes
	tools *fakeTools
	clock *fakeClock
}

func newHarness(t testing.TB, hc harnessConfig) *harness {
	t.Helper()
	h := &harness{tools: &fakeTools{}, clock: &fakeClock{t: clockStart}}
	s, err := New(Config{Tools: h.tools, Version: "rev-1", Consents: hc.consents, Revision: hc.revision,
		WatchEvery: hc.watchEvery, ManifestEvery: hc.manifestEvery, Now: h.clock.Now, Log: hc.log})
	if err != nil {
		t.Fatal(err)
	}
	h.rt, err = s.handler(HTTPConfig{Verifier: tokens, Resource: resource, AuthorizationServers: []string{"https://issuer.example.test"},
		AllowedOrigins: hc.origins, Stateless: hc.stateless, Sessions: hc.limits, Streams: hc.streams})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.rt.register(mux)
	srv := httptest.NewUnstartedServer(httpx.Observe(nil, mux))
	srv.Config.WriteTimeout = hc.writeTimeout
	srv.Start()
	h.url = srv.URL
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		h.closeSessions()
	})
	return h
}

// closeSessions closes the sessions still live, so no watch outlives its
// test.
func (h *harness) closeSessions() {
	if h.rt.reg == nil {
		return
	}
	h.rt.reg.mu.Lock()
	var live []*session
	for _, sess := range h.rt.reg.live {
		live = append(live, sess)
	}
	h.rt.reg.mu.Unlock()
	for _, sess := range live {
		sess.ss.Close()
	}
}

// waitFor waits for cond, failing the test after a bounded wait.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// bearerTransport adds a bearer token to every request; the test may
// change it between requests.
type bearerTransport struct{ token *atomic.Value }

func fixedToken(token string) bearerTransport {
	v := &atomic.Value{}
	v.Store(token)
	return bearerTransport{v}
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token.Load().(string))
	return http.DefaultTransport.RoundTrip(r)
}

func client(t *testing.T, h *harness, token string) (*mcp.ClientSession, error) {
	t.Helper()
	return connectHTTP(t, h.url, fixedToken(token), nil, true)
}

// connectHTTP connects the SDK's client over Streamable HTTP.
func connectHTTP(t *testing.T, url string, bt bearerTransport, opts *mcp.ClientOptions, noStandalone bool) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url + Path, HTTPClient: &http.Client{Transport: bt}, MaxRetries: -1, DisableStandaloneSSE: noStandalone}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, opts).Connect(ctx, tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// rawClient speaks MCP over Streamable HTTP with net/http, to see the
// wire: statuses, headers, bodies.
type rawClient struct {
	t              testing.TB
	url            string
	token, session string
	version        string
	id             int
}

func (h *harness) raw(t testing.TB, token string) *rawClient {
	return &rawClient{t: t, url: h.url + Path, token: token, version: "2025-11-25"}
}

// post sends body (a JSON-RPC message) with the client's token, session
// and protocol version, and extra headers; it returns the answer read
// whole.
func (c *rawClient) post(body string, header ...string) (*http.Response, string) {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	return resp, string(b)
}

// call sends a request and returns its answer.
func (c *rawClient) call(method, params string) (*http.Response, string) {
	c.t.Helper()
	c.id++
	return c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, c.id, method, params))
}

// open initializes a session (without the initialize header: the
// revision is the message's).
func (c *rawClient) open() {
	c.t.Helper()
	version := c.version
	c.version = ""
	resp, body := c.call("initialize", `{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}`)
	c.version = version
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		c.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	c.session = resp.Header.Get("Mcp-Session-Id")
	if resp, body := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != 202 {
		c.t.Fatalf("initialized: %d %s", resp.StatusCode, body)
	}
}

// rpcAnswer is the JSON-RPC message of an answer (JSON, or the last
// data of an event stream).
func rpcAnswer(t testing.TB, body string) (result map[string]any, code int, message string) {
	t.Helper()
	payload := body
	if !strings.HasPrefix(strings.TrimSpace(body), "{") {
		payload = ""
		for line := range strings.Lines(body) {
			if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:"); ok && strings.TrimSpace(d) != "" {
				payload = d
			}
		}
	}
	var m struct {
		Result map[string]any `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		t.Fatalf("not a JSON-RPC answer: %q", body)
	}
	if m.Error != nil {
		return nil, m.Error.Code, m.Error.Message
	}
	return m.Result, 0, ""
}

func TestHTTPRefusesWithoutAValidToken(t *testing.T) {
	srv := newHarness(t, harnessConfig{stateless: true})
	for _, tc := range []struct{ name, auth, challenge string }{
		{"no token", "", `Bearer resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp"`},
		{"a token for another resource", "Bearer tok-other", `Bearer resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp", error="invalid_token"`},
		{"no subject", "Bearer tok-nosub", `Bearer resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp", error="invalid_token"`},
		{"a verifier error without a reason", "Bearer tok-boom", `Bearer resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp", error="invalid_token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.url+Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != tc.challenge || !strings.Contains(string(body), `"code":"unauthenticated"`) {
				t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
			}
		})
	}
	if _, err := client(t, srv, "tok-other"); err == nil {
		t.Fatal("an SDK client with a token for another resource connected")
	}
}

func TestHTTPProtectedResourceMetadata(t *testing.T) {
	srv := newHarness(t, harnessConfig{stateless: true})
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(srv.url + path)
		if err != nil {
			t.Fatal(err)
		}
		var prm struct {
			Resource             string   `json:"resource"`
			AuthorizationServers []string `json:"authorization_servers"`
			BearerMethods        []string `json:"bearer_methods_supported"`
		}
		err = json.NewDecoder(resp.Body).Decode(&prm)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || prm.Resource != resource || len(prm.AuthorizationServers) != 1 || prm.BearerMethods[0] != "header" {
			t.Fatalf("%s: %d %+v %v", path, resp.StatusCode, prm, err)
		}
	}
}

func TestHTTPListAndCall(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		name := map[bool]string{true: "stateless (Lambda)", false: "with sessions (serve)"}[stateless]
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{stateless: stateless})
			tools := h.tools
			cs, err := client(t, h, "tok-alice")
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			ctx := context.Background()
			list, err := cs.ListTools(ctx, nil)
			if err != nil || len(list.Tools) != 7 { // five tools, the one profile.read shows, search_skills
				t.Fatalf("tools/list: %v %d", err, len(list.Tools))
			}
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"q": "hi"}})
			if err != nil || r.IsError || text(r) != `{"said":{"q":"hi"}}` {
				t.Fatalf("tools/call: %v %+v", err, r)
			}
			tools.mu.Lock()
			defer tools.mu.Unlock()
			if len(tools.calls) != 1 || tools.calls[0] != `echo mcp {"q":"hi"} alice` {
				t.Fatalf("calls %q", tools.calls)
			}
		})
	}
}

// TestHTTPStatelessAnswersJSON: the Lambda mode answers a request with
// one JSON body and names no session.
func TestHTTPStatelessAnswersJSON(t *testing.T) {
	srv := newHarness(t, harnessConfig{stateless: true})
	req, _ := http.NewRequest("POST", srv.url+Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer tok-alice")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get("Mcp-Session-Id") != "" ||
		!strings.Contains(string(body), `"name":"echo"`) {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
}

// TestHTTPSessionIsBoundToItsCaller: with sessions, another caller's token
// cannot use a session it did not open.
func TestHTTPSessionIsBoundToItsCaller(t *testing.T) {
	srv := newHarness(t, harnessConfig{})
	cs, err := client(t, srv, "tok-alice")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	req, _ := http.NewRequest("POST", srv.url+Path, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer tok-bob")
	req.Header.Set("Mcp-Session-Id", cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 400 || strings.Contains(string(body), `"name":"echo"`) {
		t.Fatalf("bob used alice's session: %d %s", resp.StatusCode, body)
	}
}

// fakeConsents reports consents done once done is set.
type fakeConsents struct {
	mu   sync.Mutex
	done bool
}

func (f *fakeConsents) Done(context.Context, string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done, nil
}

// TestHTTPSessionsHearOfChanges: a session-keeping server tells a
// session that listed its tools when its caller's tool list changed, and
// when a consent it elicited is over.
func TestHTTPSessionsHearOfChanges(t *testing.T) {
	consents := &fakeConsents{}
	h := newHarness(t, harnessConfig{consents: consents, watchEvery: 10 * time.Millisecond, manifestEvery: 20 * time.Millisecond})
	listChanged, completed := make(chan struct{}, 4), make(chan string, 4)
	opts := &mcp.ClientOptions{
		Capabilities:           &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			completed <- r.Params.ElicitationID
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := connectHTTP(t, h.url, fixedToken("tok-alice"), opts, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}

	h.tools.mu.Lock()
	h.tools.extra = true // a tenant uploads a tool
	h.tools.mu.Unlock()
	select {
	case <-listChanged:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed after the caller's tools changed")
	}
	list, err := cs.ListTools(ctx, nil)
	found := false
	for _, tl := range list.Tools {
		found = found || tl.Name == "uploaded"
	}
	if err != nil || !found {
		t.Fatalf("after the change: %v, uploaded listed %v", err, found)
	}

	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}}); err == nil {
		t.Fatal("whoami before the consent: no URL elicitation error")
	}
	consents.mu.Lock()
	consents.done = true // the user consented
	consents.mu.Unlock()
	select {
	case id := <-completed:
		if id != "as-123" {
			t.Fatalf("elicitation complete for %q, want as-123", id)
		}
	case <-ctx.Done():
		t.Fatal("no notifications/elicitation/complete after the consent")
	}
}
