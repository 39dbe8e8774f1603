package httptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

const token = "ya29.canary-token-0123456789"

type tokens struct {
	res  oauth.Result
	reqs []oauth.TokenRequest
}

func (f *tokens) GetAccessToken(_ context.Context, req oauth.TokenRequest) oauth.Result {
	f.reqs = append(f.reqs, req)
	return f.res
}

// TokenRefused answers as GetAccessToken: the broker has no newer token.
func (f *tokens) TokenRefused(ctx context.Context, req oauth.TokenRequest, _ domain.Secret) oauth.Result {
	return f.GetAccessToken(ctx, req)
}

func ready() oauth.Result {
	return oauth.Result{Status: oauth.StatusReady, AccessToken: domain.NewSecret(token), TokenType: "bearer"}
}

// upstream records the last request and answers with h.
func upstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, *http.Request, *string) {
	t.Helper()
	var last http.Request
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		last, body = *r.Clone(context.Background()), string(b)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &last, &body
}

func tool(url, method, path string, auth bool) *bundle.Tool {
	t := &bundle.Tool{ID: "menu:get", ToolName: "get_menu", Transport: bundle.TransportHTTP, URL: url, Method: method, SourcePath: path}
	if auth {
		t.Auth = &bundle.ToolAuth{OAuthAppRef: domain.ObjectRef{Kind: "OAuthApp", Name: "demo"}, Scopes: []string{"menu.read"}}
	}
	return t
}

func TestGetWithPathAndQuery(t *testing.T) {
	srv, last, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"dishes":["soup"]}`)
	})
	tk := &tokens{res: ready()}
	r := New(Options{Tokens: tk})
	auth := domain.TurnAuth{Subjects: &domain.Subjects{User: "demo:user:alice"}}
	out, err := r.Invoker(tool(srv.URL, "GET", "/menu/{day}", true), auth, false)(context.Background(),
		json.RawMessage(`{"day":"mon day","lang":"en","tags":["a","b"],"n":2,"skip":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"dishes":["soup"]}` {
		t.Fatalf("output = %s", out)
	}
	if last.URL.EscapedPath() != "/menu/mon%20day" || last.URL.RawQuery != "lang=en&n=2&tags=a&tags=b" {
		t.Fatalf("upstream request = %s ? %s", last.URL.EscapedPath(), last.URL.RawQuery)
	}
	if got := last.Header.Get("Authorization"); got != "Bearer "+token {
		t.Fatalf("Authorization = %q", got)
	}
	if len(tk.reqs) != 1 || tk.reqs[0].AppRef.Name != "demo" || tk.reqs[0].Auth.Subjects.User != "demo:user:alice" || tk.reqs[0].Scopes[0] != "menu.read" {
		t.Fatalf("token requests = %+v", tk.reqs)
	}
	// The REST route's call: nothing to resume, no idempotency key.
	if tk.reqs[0].Resume != nil || last.Header.Get("Idempotency-Key") != "" {
		t.Fatalf("resume %+v, Idempotency-Key %q: want none", tk.reqs[0].Resume, last.Header.Get("Idempotency-Key"))
	}
}

// TestTurnCall: a turn's call hands getAccessToken the parked call's
// resume target, so the consent's auth.granted comes back to it, and
// sends its idempotency key upstream — on a ready token and on a consent.
func TestTurnCall(t *testing.T) {
	resume := &domain.ResumeInfo{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "support"}, InstanceKey: "thread-1", AgentName: "assistant",
		Origin: map[string]any{"channel": "C1"}, Auth: domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "alice"}}, TurnID: "turn-1", Step: 2, CallID: "call-7"}
	call := Call{Auth: domain.TurnAuth{Subjects: &domain.Subjects{User: "demo:user:alice"}}, Resume: resume, IdempotencyKey: "agentauth-turn-1-call-7"}
	for _, tc := range []struct {
		name     string
		res      oauth.Result
		upstream bool
	}{
		{"ready", ready(), true},
		{"consent needed", oauth.Result{Status: oauth.StatusAuthorizationRequired, AuthSessionID: "as-1", AuthorizationURL: "https://idp/authorize"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv, last, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { calls.Add(1); io.WriteString(w, `{}`) })
			tk := &tokens{res: tc.res}
			_, err := New(Options{Tokens: tk}).CallInvoker(tool(srv.URL, "POST", "/orders", true), call)(context.Background(), json.RawMessage(`{}`))
			if len(tk.reqs) != 1 || tk.reqs[0].Resume != resume || tk.reqs[0].Auth.Subjects.User != "demo:user:alice" {
				t.Fatalf("token requests = %+v, want one with the call's resume target and auth", tk.reqs)
			}
			if !tc.upstream {
				var ar *toolhooks.AuthorizationRequired
				if !errors.As(err, &ar) || calls.Load() != 0 {
					t.Fatalf("err = %v, upstream calls %d: want AuthorizationRequired and no upstream call", err, calls.Load())
				}
				return
			}
			if err != nil || calls.Load() != 1 {
				t.Fatalf("err = %v, upstream calls %d", err, calls.Load())
			}
			if got := last.Header.Get("Idempotency-Key"); got != "agentauth-turn-1-call-7" {
				t.Fatalf("Idempotency-Key = %q", got)
			}
		})
	}
	t.Run("a key that is no header value is refused before anything runs", func(t *testing.T) {
		srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { t.Error("upstream called") })
		tk := &tokens{res: ready()}
		for _, key := range []string{"a\r\nX-Evil: 1", "a b", strings.Repeat("k", 256), "clé"} {
			_, err := New(Options{Tokens: tk}).CallInvoker(tool(srv.URL, "GET", "/", true), Call{IdempotencyKey: key})(context.Background(), nil)
			var te *toolhooks.ToolError
			if !errors.As(err, &te) || te.Code != toolhooks.CodeTool {
				t.Errorf("key %q: err = %v, want a tool error", key, err)
			}
		}
		if len(tk.reqs) != 0 {
			t.Fatalf("a token was fetched for a call that cannot run")
		}
	})
}

func TestPostBodyAndTextOutput(t *testing.T) {
	srv, last, body := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "created")
	})
	out, err := New(Options{}).Invoker(tool(srv.URL, "POST", "/orders", false), domain.TurnAuth{}, false)(context.Background(), json.RawMessage(`{"dish":"soup","qty":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `"created"` || *body != `{"dish":"soup","qty":2}` || last.Header.Get("Content-Type") != "application/json" || last.Header.Get("Authorization") != "" {
		t.Fatalf("output %s, body %s, headers %v", out, *body, last.Header)
	}
}

func TestAuthorizationRequiredIsAResult(t *testing.T) {
	srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { t.Error("upstream called without a token") })
	exp := time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)
	tk := &tokens{res: oauth.Result{Status: oauth.StatusAuthorizationRequired, AuthSessionID: "as-1", AuthorizationURL: "https://idp/authorize?x", SessionExpiresAt: exp, Message: "connect demo"}}
	_, err := New(Options{Tokens: tk}).Invoker(tool(srv.URL, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
	var ar *toolhooks.AuthorizationRequired
	if !errors.As(err, &ar) {
		t.Fatalf("err = %v, want AuthorizationRequired", err)
	}
	var got map[string]any
	if err := json.Unmarshal(ar.Authorization, &got); err != nil {
		t.Fatal(err)
	}
	if got["authSessionId"] != "as-1" || got["authorizationUrl"] != "https://idp/authorize?x" || got["expiresAt"] != "2026-11-22T03:00:00Z" || got["oauthAppRef"] != "OAuthApp/demo" {
		t.Fatalf("authorization = %v", got)
	}
}

func TestUpstreamFailures(t *testing.T) {
	big := strings.Repeat("x", 2048)
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		code     string
		contains string
	}{
		{"server error", 500, "boom", CodeUpstream, "upstream answered 500 Internal Server Error: boom"},
		{"unauthorized", 401, "bad token", CodeUpstreamAuth, "401"},
		{"token echoed in an error", 400, "you sent " + token, CodeUpstream, "you sent [REDACTED]"},
		{"too large", 200, big, CodeResponseLimit, "larger than 1024 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			_, err := New(Options{Tokens: &tokens{res: ready()}, MaxResponse: 1024}).Invoker(tool(srv.URL, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Message, tc.contains) || strings.Contains(e.Message, token) {
				t.Fatalf("err = %#v, want code %s containing %q and no token", err, tc.code, tc.contains)
			}
		})
	}
}

func TestTokenEchoScrubbedFromOutput(t *testing.T) {
	srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"seen":"`+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+`"}`)
	})
	out, err := New(Options{Tokens: &tokens{res: ready()}}).Invoker(tool(srv.URL, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
	if err != nil || strings.Contains(string(out), token) || !strings.Contains(string(out), "[REDACTED]") {
		t.Fatalf("output %s, err %v: the token must be scrubbed", out, err)
	}
}

func TestBadArguments(t *testing.T) {
	r := New(Options{})
	for _, tc := range []struct{ name, args, want string }{
		{"missing path arg", `{}`, "path parameter {day} needs"},
		{"object path arg", `{"day":{"x":1}}`, "path parameter {day} needs"},
		{"not an object", `[1]`, "arguments must be a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Invoker(tool("http://127.0.0.1:1", "GET", "/menu/{day}", false), domain.TurnAuth{}, false)(context.Background(), json.RawMessage(tc.args))
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeArgs || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("err = %v, want %s containing %q", err, CodeArgs, tc.want)
			}
		})
	}
}

func TestCrossOriginRedirectRefused(t *testing.T) {
	other, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			t.Error("the token followed a redirect to another origin")
		}
	})
	srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/steal", http.StatusFound)
	})
	_, err := New(Options{Tokens: &tokens{res: ready()}}).Invoker(tool(srv.URL, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnreachable || !strings.Contains(e.Message, "redirect to another origin") {
		t.Fatalf("err = %v", err)
	}
}

func TestTenantToolsReachPublicAddressesOnly(t *testing.T) {
	srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{}`) })
	_, err := New(Options{}).Invoker(tool(srv.URL, "GET", "/", false), domain.TurnAuth{}, true)(context.Background(), nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeNotAllowed {
		t.Fatalf("tenant tool to loopback: err = %v, want it refused with %s", err, CodeNotAllowed)
	}
	if _, err := New(Options{AllowPrivateUpstreams: true}).Invoker(tool(srv.URL, "GET", "/", false), domain.TurnAuth{}, true)(context.Background(), nil); err != nil {
		t.Fatalf("with AllowPrivateUpstreams: %v", err)
	}
	// The same URL as a bundle tool: the operator chose it.
	if _, err := New(Options{}).Invoker(tool(srv.URL, "GET", "/", false), domain.TurnAuth{}, false)(context.Background(), nil); err != nil {
		t.Fatalf("bundle tool to loopback: %v", err)
	}
}

// TestRefusalNamesNoAddress: a tenant who points a tool at an internal
// name learns that it was refused, never what it resolved to; the
// operator's log has the host, the address and the rule.
func TestRefusalNamesNoAddress(t *testing.T) {
	srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { t.Error("the guard let a tenant tool reach loopback") })
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
	var logged bytes.Buffer
	r := New(Options{Log: slog.New(slog.NewJSONHandler(&logged, nil))})
	_, err := r.Invoker(tool("http://localhost:"+port, "GET", "/secret?q=1", false), domain.TurnAuth{}, true)(context.Background(), nil)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want a tool error", err)
	}
	want := "GET localhost:" + port + ": " + notAllowedMessage
	if e.Code != CodeNotAllowed || e.Message != want {
		t.Fatalf("caller sees %s %q, want %s %q", e.Code, e.Message, CodeNotAllowed, want)
	}
	log := logged.String()
	if !strings.Contains(log, `"host":"localhost:`+port+`"`) || !strings.Contains(log, "loopback") ||
		!(strings.Contains(log, "127.0.0.1") || strings.Contains(log, "::1")) || strings.Contains(log, "secret") {
		t.Fatalf("operator log = %s, want the host, the resolved address and the rule, not the path", log)
	}
}

// TestResolverFailureNamesNoResolver: a name that does not resolve answers
// like one that resolves to a refused address (a tenant cannot tell which
// internal names exist) and never names the resolver.
func TestResolverFailureNamesNoResolver(t *testing.T) {
	var logged bytes.Buffer
	r := New(Options{Log: slog.New(slog.NewJSONHandler(&logged, nil))})
	tl := tool("https://db.corp.internal", "GET", "/", false)
	req, _ := buildRequest(context.Background(), tl, nil)
	dnsErr := &net.DNSError{Err: "no such host", Name: "db.corp.internal", Server: "10.0.0.2:53", IsNotFound: true}
	err := r.unreachable(context.Background(), tl, req, &url.Error{Op: "Get", URL: req.URL.String(), Err: &net.OpError{Op: "dial", Net: "tcp", Err: dnsErr}}, "", true)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeNotAllowed || e.Message != "GET db.corp.internal: "+notAllowedMessage {
		t.Fatalf("caller sees %v, want %s with the generic message", err, CodeNotAllowed)
	}
	if !strings.Contains(logged.String(), "10.0.0.2:53") {
		t.Fatalf("operator log = %s, want the resolver's answer", logged.String())
	}
	// A bundle tool's operator chose the URL: the detail stays in its error.
	err = r.unreachable(context.Background(), tl, req, &url.Error{Op: "Get", URL: req.URL.String(), Err: &net.OpError{Op: "dial", Net: "tcp", Err: dnsErr}}, "", false)
	if !errors.As(err, &e) || e.Code != CodeUnreachable || !strings.Contains(e.Message, "no such host") {
		t.Fatalf("bundle tool: %v", err)
	}
}

// TestNoProxyFromEnvironment: with every proxy variable naming a proxy, an
// uploaded tool's request still goes straight to the upstream. A proxy
// would dial for us, past the guard, to wherever the tenant asks.
//
// net/http reads the proxy variables once per process, so the call runs in
// a fresh copy of this test binary whose environment names the proxy. The
// guard is off in it (AllowPrivateUpstreams only lifts the address check):
// a loopback proxy would otherwise be refused by the guard and hide a
// transport that uses it. The upstream is dialled as 0.0.0.0, which reaches
// the local listener but, unlike loopback addresses, is not exempt from
// the proxy variables.
func TestNoProxyFromEnvironment(t *testing.T) {
	if os.Getenv("HTTPTOOL_PROXY_CHILD") == "1" {
		srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"via":"direct"}`) })
		port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
		out, err := New(Options{AllowPrivateUpstreams: true, Timeout: 5 * time.Second}).
			Invoker(tool("http://0.0.0.0:"+port, "GET", "/", false), domain.TurnAuth{}, true)(context.Background(), nil)
		if err != nil || string(out) != `{"via":"direct"}` {
			t.Fatalf("output %s, err %v: want the upstream's own answer", out, err)
		}
		return
	}
	var hits atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, `{"via":"proxy"}`)
	}))
	defer proxy.Close()
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		t.Setenv(k, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	t.Setenv("HTTPTOOL_PROXY_CHILD", "1")
	out, err := exec.Command(os.Args[0], "-test.run=^TestNoProxyFromEnvironment$", "-test.count=1", "-test.v").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNoProxyFromEnvironment") {
		t.Fatalf("the call in a process with proxy variables: %v\n%s", err, out)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the proxy from the environment got %d requests", n)
	}
}

// TestOptionDefaults: an unset (or negative) timeout or response limit is
// the documented default (docs/tools.md: 20 s, 1 MiB), not "no limit": a
// hung or endless upstream must not hold the tools function.
func TestOptionDefaults(t *testing.T) {
	const timeout, maxResponse = 20 * time.Second, 1 << 20
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"zero", Options{}},
		{"negative", Options{Timeout: -time.Second, MaxResponse: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := New(tc.o)
			if r.timeout != timeout || r.maxResponse != maxResponse {
				t.Fatalf("timeout %v, max response %d, want %v and %d", r.timeout, r.maxResponse, timeout, maxResponse)
			}
			// The request's context carries the limit, so that a turn's
			// call can carry a longer one (TestCallerLimit).
			if r.open.Timeout != 0 || r.guarded.Timeout != 0 {
				t.Fatalf("client timeouts %v/%v", r.open.Timeout, r.guarded.Timeout)
			}
		})
	}
}

// TestTimeoutEndsTheCall: a set timeout is the one the call gets, and
// its end is a timeout naming the limit, the request cancelled.
func TestTimeoutEndsTheCall(t *testing.T) {
	cancelled := make(chan struct{})
	srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(2 * time.Second):
			io.WriteString(w, `{"late":true}`)
		}
	})
	out, err := New(Options{Timeout: 100 * time.Millisecond}).Invoker(tool(srv.URL, "GET", "/", false), domain.TurnAuth{}, false)(context.Background(), nil)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeTimeout || !strings.Contains(e.Message, "within 100ms") {
		t.Fatalf("output %s, err %v, want %s naming the 100ms timeout, not the answer 2 s later", out, err, CodeTimeout)
	}
	<-cancelled
}

// TestCallerLimit: a call its caller bounds (a turn's, by the agent's
// limit) is not cut at the runner's timeout; the caller's context ends
// it, and that is not called the runner's timeout.
func TestCallerLimit(t *testing.T) {
	got := make(chan struct{}, 1)
	srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait") == "" {
			io.WriteString(w, `{"ok":true}`)
			return
		}
		got <- struct{}{}
		<-r.Context().Done()
	})
	r := New(Options{Timeout: time.Nanosecond}) // over before any request could be answered
	bounded := r.CallInvoker(tool(srv.URL, "GET", "/", false), Call{CallerLimit: true})
	if out, err := bounded(context.Background(), nil); err != nil || string(out) != `{"ok":true}` {
		t.Fatalf("bounded by its caller: output %s, err %v", out, err)
	}
	if _, err := r.CallInvoker(tool(srv.URL, "GET", "/", false), Call{})(context.Background(), nil); !strings.Contains(fmt.Sprint(err), "request timeout of http tools") {
		t.Fatalf("unbounded: err %v, want the runner's timeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-got; cancel() }()
	_, err := bounded(ctx, json.RawMessage(`{"wait":"1"}`))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeUnreachable {
		t.Fatalf("cancelled by its caller: err %v, want %s", err, CodeUnreachable)
	}
}

// TestSameOriginRedirects: redirects on the tool's origin are followed,
// the token going along, up to 4 of them; the 5th is refused.
func TestSameOriginRedirects(t *testing.T) {
	for _, tc := range []struct {
		name    string
		hops    int
		wantErr string
	}{
		{"one", 1, ""},
		{"four, the limit", 4, ""},
		{"five, one past the limit", 5, "stopped after 5 redirects"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var authorized atomic.Int32
			srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") == "Bearer "+token {
					authorized.Add(1)
				}
				n := len(r.URL.Path) - len(strings.TrimRight(r.URL.Path, "x")) // one x per hop so far
				if n < tc.hops {
					http.Redirect(w, r, r.URL.Path+"x", http.StatusFound)
					return
				}
				io.WriteString(w, `{"done":true}`)
			})
			out, err := New(Options{Tokens: &tokens{res: ready()}}).Invoker(tool(srv.URL, "GET", "/hop", true), domain.TurnAuth{}, false)(context.Background(), nil)
			if tc.wantErr != "" {
				var e *Error
				if !errors.As(err, &e) || e.Code != CodeUnreachable || !strings.Contains(e.Message, tc.wantErr) {
					t.Fatalf("output %s, err %v, want %s containing %q", out, err, CodeUnreachable, tc.wantErr)
				}
				return
			}
			if err != nil || string(out) != `{"done":true}` {
				t.Fatalf("output %s, err %v, want the last hop's answer", out, err)
			}
			if n := int(authorized.Load()); n != tc.hops+1 {
				t.Fatalf("%d of %d requests carried the token", n, tc.hops+1)
			}
		})
	}
}

// TestAuthorizationScheme: the token goes out under the scheme the
// provider named; an empty or any-case "bearer" type is Bearer.
func TestAuthorizationScheme(t *testing.T) {
	for _, tc := range []struct{ tokenType, want string }{
		{"", "Bearer " + token},
		{"bearer", "Bearer " + token},
		{"BEARER", "Bearer " + token},
		{"DPoP", "DPoP " + token},
	} {
		t.Run(tc.tokenType, func(t *testing.T) {
			srv, last, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{}`) })
			res := ready()
			res.TokenType = tc.tokenType
			if _, err := New(Options{Tokens: &tokens{res: res}}).Invoker(tool(srv.URL, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			if got := last.Header.Get("Authorization"); got != tc.want {
				t.Fatalf("Authorization = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTokenFailureIsAnAuthError: a getAccessToken error reaches the model
// as E_TOOL_AUTH naming the app and the broker's code, and the upstream
// is not called.
func TestTokenFailureIsAnAuthError(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  oauth.Result
		want string
	}{
		{"with the broker's error", oauth.ErrorResult("scopeNotGranted", "scope menu.write not granted"), "OAuthApp/demo: scope menu.write not granted (scopeNotGranted)"},
		{"without one", oauth.Result{Status: oauth.StatusError}, "OAuthApp/demo: getAccessToken failed (unknown)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { t.Error("upstream called without a token") })
			_, err := New(Options{Tokens: &tokens{res: tc.res}}).Invoker(tool(srv.URL, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeAuth || e.Message != tc.want {
				t.Fatalf("err = %#v, want %s %q", err, CodeAuth, tc.want)
			}
		})
	}
}

// TestAuthorizationRequiredDeviceCode: the device code prompt is part of
// the authorization object when the flow has one, and absent otherwise.
func TestAuthorizationRequiredDeviceCode(t *testing.T) {
	dc := &oauth.DeviceCodePrompt{VerificationURI: "https://idp/device", UserCode: "WDJB-MJHT", Interval: 5}
	for _, tc := range []struct {
		name string
		dc   *oauth.DeviceCodePrompt
		want string
	}{
		{"device code flow", dc, `{"interval":5,"userCode":"WDJB-MJHT","verificationUri":"https://idp/device"}`},
		{"browser flow", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tk := &tokens{res: oauth.Result{Status: oauth.StatusAuthorizationRequired, AuthSessionID: "as-1", DeviceCode: tc.dc}}
			_, err := New(Options{Tokens: tk}).Invoker(tool("http://127.0.0.1:1", "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
			var ar *toolhooks.AuthorizationRequired
			if !errors.As(err, &ar) {
				t.Fatalf("err = %v, want AuthorizationRequired", err)
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(ar.Authorization, &got); err != nil {
				t.Fatal(err)
			}
			d, ok := got["deviceCode"]
			if tc.want == "" && ok {
				t.Fatalf("deviceCode = %s, want none", d)
			}
			if tc.want != "" {
				var norm map[string]any
				_ = json.Unmarshal(d, &norm)
				if b, _ := json.Marshal(norm); string(b) != tc.want {
					t.Fatalf("deviceCode = %s, want %s", d, tc.want)
				}
			}
		})
	}
}

// TestResponseSizeLimit: an answer of exactly MaxResponse bytes is the
// output; one byte more is refused.
func TestResponseSizeLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		code string
	}{
		{"at the limit", 1024, ""},
		{"one past it", 1025, CodeResponseLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `"` + strings.Repeat("x", tc.size-2) + `"`
			srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
			out, err := New(Options{MaxResponse: 1024}).Invoker(tool(srv.URL, "GET", "/", false), domain.TurnAuth{}, false)(context.Background(), nil)
			if tc.code == "" {
				if err != nil || string(out) != body {
					t.Fatalf("output of %d bytes, err %v, want the %d-byte answer", len(out), err, tc.size)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
		})
	}
}

// TestSuccessIsAny2xx: every 2xx answer is the output, 299 included; 300
// and up is an upstream error.
func TestSuccessIsAny2xx(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{
		{200, ""},
		{299, ""},
		{300, CodeUpstream},
	} {
		t.Run(strconv.Itoa(tc.status), func(t *testing.T) {
			srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				io.WriteString(w, `{"ok":1}`)
			})
			out, err := New(Options{}).Invoker(tool(srv.URL, "GET", "/", false), domain.TurnAuth{}, false)(context.Background(), nil)
			if tc.code == "" {
				if err != nil || string(out) != `{"ok":1}` {
					t.Fatalf("status %d: output %s, err %v, want the answer", tc.status, out, err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != tc.code {
				t.Fatalf("status %d: err = %v, want %s", tc.status, err, tc.code)
			}
		})
	}
}

// TestShortTokenScrubbed: a token of 8 bytes, the shortest scrub
// replaces, is scrubbed from what the upstream echoes.
func TestShortTokenScrubbed(t *testing.T) {
	const short = "k7Q2xZ9p"
	srv, _, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"seen":"`+strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")+`"}`)
	})
	res := ready()
	res.AccessToken = domain.NewSecret(short)
	out, err := New(Options{Tokens: &tokens{res: res}}).Invoker(tool(srv.URL, "GET", "/", true), domain.TurnAuth{}, false)(context.Background(), nil)
	if err != nil || string(out) != `{"seen":"[REDACTED]"}` {
		t.Fatalf("output %s, err %v: the 8-byte token must be scrubbed", out, err)
	}
}

// TestArgumentMapping: path parameters fill their segments (also two in
// a row) and leave the query; lists repeat a query parameter, their nulls
// dropped and their objects as JSON.
func TestArgumentMapping(t *testing.T) {
	for _, tc := range []struct {
		name, path, args, wantPath, wantQuery string
	}{
		{"adjacent path parameters", "/files/{name}{ext}", `{"name":"report","ext":".pdf"}`, "/files/report.pdf", ""},
		{"list with null and object", "/search", `{"ids":[1,null,{"a":"b"},"x"]}`, "/search", `ids=1&ids=%7B%22a%22%3A%22b%22%7D&ids=x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, last, _ := upstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{}`) })
			if _, err := New(Options{}).Invoker(tool(srv.URL, "GET", tc.path, false), domain.TurnAuth{}, false)(context.Background(), json.RawMessage(tc.args)); err != nil {
				t.Fatal(err)
			}
			if last.URL.EscapedPath() != tc.wantPath || last.URL.RawQuery != tc.wantQuery {
				t.Fatalf("upstream request = %s ? %s, want %s ? %s", last.URL.EscapedPath(), last.URL.RawQuery, tc.wantPath, tc.wantQuery)
			}
		})
	}
}
