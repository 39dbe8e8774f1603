package mcpapi

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
)

// toolNames lists the names of a tools/list answer.
func toolNames(l *mcp.ListToolsResult) []string {
	var names []string
	for _, t := range l.Tools {
		names = append(names, t.Name)
	}
	return names
}

// lastCaller is the principal of the plane's last call or search.
func (f *fakeTools) lastCaller() domain.Principal {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.callers[len(f.callers)-1]
}

// TestHTTPEachRequestIsServedAsItsOwnCaller (issue 17, point 3): a session
// is bound to its opener's subject, but every request is served as the
// principal its own token names. A later token of the same subject with
// no scope, another tenant and no OAuth subjects gets that token's tools,
// tenant and grants — not the opener's; the opener's token again gets
// the opener's.
func TestHTTPEachRequestIsServedAsItsOwnCaller(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	bt := fixedToken("tok-alice")
	cs, err := connectHTTP(t, h.url, bt, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	call := func(name string) (*mcp.CallToolResult, error) {
		return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"q": "hi"}})
	}
	for _, tc := range []struct {
		token      string
		seesScoped bool
		tenant     string
		scopes     []string
		oauthUser  string
	}{
		{"tok-alice", true, "acme", []string{"profile.read"}, "demo:user:alice"},
		{"tok-alice-bare", false, "globex", nil, ""},
		{"tok-alice", true, "acme", []string{"profile.read"}, "demo:user:alice"},
	} {
		bt.token.Store(tc.token)
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(toolNames(list), scopedTool); got != tc.seesScoped {
			t.Fatalf("%s: tools/list shows %s: %v, want %v (%v)", tc.token, scopedTool, got, tc.seesScoped, toolNames(list))
		}
		r, err := call(scopedTool)
		var rpcErr *jsonrpc.Error
		switch {
		case tc.seesScoped && (err != nil || r.IsError):
			t.Fatalf("%s: %s: %v %+v", tc.token, scopedTool, err, r)
		case !tc.seesScoped && (!errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams):
			t.Fatalf("%s: %s, which the caller's list lacks: %v, want the unknown-tool error", tc.token, scopedTool, err)
		}
		if r, err := call("echo"); err != nil || r.IsError {
			t.Fatalf("%s: echo: %v %+v", tc.token, err, r)
		}
		p := h.tools.lastCaller()
		user := ""
		if p.TurnAuth.Subjects != nil {
			user = p.TurnAuth.Subjects.User
		}
		if p.Subject != "alice" || p.Tenant != tc.tenant || !slices.Equal(p.Scopes, tc.scopes) || user != tc.oauthUser {
			t.Fatalf("%s: the call ran as %+v", tc.token, p)
		}
		if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: SkillsTool, Arguments: map[string]any{"q": "refund"}}); err != nil || r.IsError {
			t.Fatalf("%s: search_skills: %v", tc.token, err)
		}
		if p := h.tools.lastCaller(); p.Tenant != tc.tenant {
			t.Fatalf("%s: the skills search ran for tenant %q", tc.token, p.Tenant)
		}
	}
}

// TestHTTPCallsCarryTheirOwnRequestID (issue 17, point 3): a call runs in
// a context with its own request's values — request id, trace id, log
// attributes — not those of the request that opened the session.
func TestHTTPCallsCarryTheirOwnRequestID(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := h.raw(t, "tok-alice")
	c.open()
	for _, id := range []string{"call-a", "call-b"} {
		c.id++
		if resp, body := c.post(`{"jsonrpc":"2.0","id":`+strconv.Itoa(c.id)+`,"method":"tools/call","params":{"name":"echo","arguments":{}}}`,
			"X-Request-Id", id); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	h.tools.mu.Lock()
	defer h.tools.mu.Unlock()
	if !slices.Equal(h.tools.requestIDs, []string{"call-a", "call-b"}) {
		t.Fatalf("the calls ran with request ids %q", h.tools.requestIDs)
	}
}

// TestHTTPSessionEnds (issue 17, point 3): a session closes when it idles
// out, and when the token that opened it expires — whatever tokens its
// later requests carry.
func TestHTTPSessionEnds(t *testing.T) {
	for _, tc := range []struct {
		name     string
		limits   SessionLimits
		token    string
		advance  time.Duration // the fake clock, once the session is open
		laterTok string
	}{
		{"it idles out", SessionLimits{IdleTimeout: 50 * time.Millisecond}, "tok-alice", 0, "tok-alice"},
		{"its opening token expires", SessionLimits{}, "tok-alice-short", 2 * time.Minute, "tok-alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessConfig{limits: tc.limits, watchEvery: 5 * time.Millisecond})
			c := h.raw(t, tc.token)
			c.open()
			c.token = tc.laterTok
			if resp, body := c.call("tools/list", `{}`); resp.StatusCode != 200 {
				t.Fatalf("tools/list: %d %s", resp.StatusCode, body)
			}
			h.clock.Advance(tc.advance)
			waitFor(t, "the session to close", func() bool { return h.rt.reg.count() == 0 })
			if resp, body := c.call("tools/list", `{}`); resp.StatusCode != http.StatusNotFound {
				t.Fatalf("a request on the closed session: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestHTTPRequestsOnASessionLeaveNothingRunning (issue 17, point 4): the
// server factory the SDK calls on every request has no side effect — it
// resolves no manifest and starts no goroutine — so requests on a session
// cost nothing once answered.
func TestHTTPRequestsOnASessionLeaveNothingRunning(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := h.raw(t, "tok-alice")
	c.open()
	for range 5 { // warm: the connection, the watch loop
		c.call("ping", `{}`)
	}
	h.tools.mu.Lock()
	manifests := h.tools.manifests
	h.tools.mu.Unlock()
	before := runtime.NumGoroutine()
	for range 200 {
		if resp, body := c.call("ping", `{}`); resp.StatusCode != 200 {
			t.Fatalf("ping: %d %s", resp.StatusCode, body)
		}
	}
	waitFor(t, "the goroutines of 200 requests to end", func() bool { return runtime.NumGoroutine() <= before+2 })
	h.tools.mu.Lock()
	defer h.tools.mu.Unlock()
	if h.tools.manifests != manifests {
		t.Fatalf("200 pings resolved %d manifests, want none", h.tools.manifests-manifests)
	}
}

// TestHTTPSessionCaps (issue 17, point 4): sessions are capped per caller
// (429) and in all (503), each refusal a JSON-RPC error that says what to
// do; a closed session frees its place.
func TestHTTPSessionCaps(t *testing.T) {
	h := newHarness(t, harnessConfig{limits: SessionLimits{MaxPerPrincipal: 2, MaxSessions: 3}})
	var alice []*rawClient
	for range 2 {
		c := h.raw(t, "tok-alice")
		c.open()
		alice = append(alice, c)
	}
	refused := func(token string, status int, want string) {
		t.Helper()
		c := h.raw(t, token)
		resp, body := c.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}`)
		_, code, msg := rpcAnswer(t, body)
		if resp.StatusCode != status || code != codeLimit || !strings.Contains(msg, want) || resp.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("%s: %d %s, want %d naming %q", token, resp.StatusCode, body, status, want)
		}
	}
	refused("tok-alice", http.StatusTooManyRequests, "this caller has 2 open MCP sessions")
	bob := h.raw(t, "tok-bob")
	bob.open()
	refused("tok-carol", http.StatusServiceUnavailable, "the server holds 3 MCP sessions")

	req, _ := http.NewRequest("DELETE", h.url+Path, nil)
	req.Header.Set("Authorization", "Bearer tok-alice")
	req.Header.Set("Mcp-Session-Id", alice[0].session)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %v %v", err, resp)
	}
	waitFor(t, "the deleted session to be forgotten", func() bool { return h.rt.reg.count() == 2 })
	h.raw(t, "tok-alice").open()
}

// TestHTTPInitializeIsRateLimited (issue 17, point 4): initialize is rate
// limited per caller; another caller is not affected, and the budget
// refills.
func TestHTTPInitializeIsRateLimited(t *testing.T) {
	h := newHarness(t, harnessConfig{limits: SessionLimits{InitializeRate: ratelimit.Limit{Rate: 1.0 / 3600, Burst: 2}}})
	for range 2 {
		h.raw(t, "tok-alice").open()
	}
	resp, body := h.raw(t, "tok-alice").call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}`)
	if _, code, msg := rpcAnswer(t, body); resp.StatusCode != http.StatusTooManyRequests || code != codeLimit ||
		!strings.Contains(msg, "too many MCP sessions opened by this caller") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a third initialize within the hour: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	h.raw(t, "tok-bob").open()
	h.clock.Advance(time.Hour)
	h.raw(t, "tok-alice").open()
}

// TestHTTPIdleSessionsResolveNothing (issue 17, point 4): the watch reads
// the plane's revision, not every session's manifest: while it does not
// move, a session that listed its tools costs no resolution (and no
// metrics line); when it moves, each session's list is resolved once
// and a change is notified.
func TestHTTPIdleSessionsResolveNothing(t *testing.T) {
	var rev atomic.Value
	rev.Store("r1")
	h := newHarness(t, harnessConfig{watchEvery: 2 * time.Millisecond, manifestEvery: 4 * time.Millisecond,
		revision: func(context.Context) string { return rev.Load().(string) }})
	listChanged := make(chan struct{}, 4)
	cs, err := connectHTTP(t, h.url, fixedToken("tok-alice"), &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} }}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	manifests := func() int {
		h.tools.mu.Lock()
		defer h.tools.mu.Unlock()
		return h.tools.manifests
	}
	listed := manifests()
	rounds := h.rt.reg.rounds.Load()
	waitFor(t, "50 watch rounds", func() bool { return h.rt.reg.rounds.Load() >= rounds+50 })
	if n := manifests() - listed; n != 0 {
		t.Fatalf("an idle session: %d manifests resolved in 50 watch rounds, want none", n)
	}
	h.tools.mu.Lock()
	h.tools.extra = true
	h.tools.mu.Unlock()
	rev.Store("r2")
	select {
	case <-listChanged:
	case <-time.After(10 * time.Second):
		t.Fatal("no list_changed after the revision moved")
	}
	if n := manifests() - listed; n != 1 {
		t.Fatalf("the revision moved: %d manifests resolved, want 1", n)
	}
}

// syncBuffer is a log sink the server and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHTTPSessionIDsAreNeverLogged (issue 17, point 3): no log line, at any
// level, carries a session id — the SDK's own lines included.
func TestHTTPSessionIDsAreNeverLogged(t *testing.T) {
	var logs syncBuffer
	h := newHarness(t, harnessConfig{watchEvery: 5 * time.Millisecond,
		log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	c := h.raw(t, "tok-alice")
	c.open()
	c.call("tools/list", `{}`)
	c.call("tools/call", `{"name":"fail","arguments":{}}`)
	req, _ := http.NewRequest("DELETE", h.url+Path, nil)
	req.Header.Set("Authorization", "Bearer tok-alice")
	req.Header.Set("Mcp-Session-Id", c.session)
	if _, err := http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the session to close", func() bool { return h.rt.reg.count() == 0 })
	if out := logs.String(); out == "" || strings.Contains(out, c.session) {
		t.Fatalf("the session id %s is in the log (or nothing was logged):\n%s", c.session, out)
	}
}

// openStream opens a session's standalone GET stream; the stream is read
// line by line on lines until the test ends.
func openStream(t *testing.T, h *harness, c *rawClient) (status int, lines <-chan string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", h.url+Path, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("Mcp-Protocol-Version", c.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	out := make(chan string, 64)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	t.Cleanup(cancel)
	return resp.StatusCode, out, cancel
}

// TestHTTPStreamsPerPrincipal (issue 17, point 11): the GET streams are
// event streams under the process's caps (the gate the tools and turn
// streams share): over a caller's cap, 429 tooManyStreams with
// Retry-After; another caller's are not affected; a stream that ends
// frees its place.
func TestHTTPStreamsPerPrincipal(t *testing.T) {
	gate := httpx.NewStreamGate(1, 0)
	h := newHarness(t, harnessConfig{streams: gate})
	a1, a2, b := h.raw(t, "tok-alice"), h.raw(t, "tok-alice"), h.raw(t, "tok-bob")
	for _, c := range []*rawClient{a1, a2, b} {
		c.open()
	}
	status, _, stop := openStream(t, h, a1)
	if status != 200 {
		t.Fatalf("alice's first stream: %d", status)
	}
	if status, lines, _ := openStream(t, h, a2); status != http.StatusTooManyRequests {
		t.Fatalf("alice's second stream: %d, want 429", status)
	} else if body := strings.Join(collect(lines), "\n"); !strings.Contains(body, httpx.CodeTooManyStreams) {
		t.Fatalf("the refusal: %s", body)
	}
	if status, _, _ := openStream(t, h, b); status != 200 {
		t.Fatalf("bob's stream: %d", status)
	}
	stop()
	waitFor(t, "alice's stream to end", func() bool { total, _ := gate.Open(""); return total == 1 })
	if status, _, _ := openStream(t, h, a2); status != 200 {
		t.Fatalf("alice's stream once the first ended: %d", status)
	}
}

func collect(lines <-chan string) []string {
	var out []string
	for l := range lines {
		out = append(out, l)
	}
	return out
}

// TestHTTPStandaloneStreamOutlivesTheWriteTimeout (issue 17, point 11): the
// server's WriteTimeout does not cut the GET stream: its write deadline
// moves with every event and keep-alive comment, and a notification sent
// long after the timeout arrives.
func TestHTTPStandaloneStreamOutlivesTheWriteTimeout(t *testing.T) {
	const writeTimeout = 200 * time.Millisecond
	var rev atomic.Value
	rev.Store("r1")
	h := newHarness(t, harnessConfig{writeTimeout: writeTimeout, limits: SessionLimits{KeepAlive: 20 * time.Millisecond},
		watchEvery: 5 * time.Millisecond, manifestEvery: 10 * time.Millisecond,
		revision: func(context.Context) string { return rev.Load().(string) }})
	c := h.raw(t, "tok-alice")
	c.open()
	c.call("tools/list", `{}`)
	opened := time.Now()
	status, lines, _ := openStream(t, h, c)
	if status != 200 {
		t.Fatalf("GET: %d", status)
	}
	var seen []string
	next := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case l, open := <-lines:
				if !open {
					t.Fatalf("the stream ended %s after it opened, waiting for %s; it carried %q", time.Since(opened).Round(time.Millisecond), what, seen)
				}
				seen = append(seen, l)
				if ok(l) {
					return
				}
			case <-deadline:
				t.Fatalf("no %s; the stream carried %q", what, seen)
			}
		}
	}
	next("retry field", func(l string) bool { return l == "retry: 3000" })
	next("keep-alive comment three write timeouts on", func(l string) bool {
		return l == ": keep-alive" && time.Since(opened) > 3*writeTimeout
	})
	h.tools.mu.Lock()
	h.tools.extra = true
	h.tools.mu.Unlock()
	rev.Store("r2")
	next("list_changed", func(l string) bool { return strings.Contains(l, "notifications/tools/list_changed") })
}

// TestHTTPStreamsCarryEventIDs (issue 17, point 6): answers on event
// streams carry event ids, a priming event and a retry field, and a
// client that lost one resumes it with Last-Event-ID.
func TestHTTPStreamsCarryEventIDs(t *testing.T) {
	h := newHarness(t, harnessConfig{})
	c := h.raw(t, "tok-alice")
	c.open()
	resp, body := c.call("tools/list", `{}`)
	var ids []string
	for line := range strings.Lines(body) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "id: "); ok {
			ids = append(ids, id)
		}
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "retry: 3000\n\n") || !strings.Contains(body, "event: prime") || len(ids) != 2 {
		t.Fatalf("tools/list on a stream: %d %q", resp.StatusCode, body)
	}
	// Lost after the priming event: the answer is replayed.
	req, _ := http.NewRequest("GET", h.url+Path, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer tok-alice")
	req.Header.Set("Mcp-Session-Id", c.session)
	req.Header.Set("Mcp-Protocol-Version", c.version)
	req.Header.Set("Last-Event-ID", ids[0])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	replay, _ := bufio.NewReader(resp.Body).ReadString('}')
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(replay, `"tools"`) {
		t.Fatalf("the resumed stream: %d %q", resp.StatusCode, replay)
	}
	// The store keeps a bounded number of a session's streams.
	for range maxStreamsPerSession + 10 {
		c.call("ping", `{}`)
	}
	if _, streams := h.rt.events.bytes(c.session); streams > maxStreamsPerSession+1 {
		t.Fatalf("the session's streams kept: %d, want at most %d", streams, maxStreamsPerSession+1)
	}
}
