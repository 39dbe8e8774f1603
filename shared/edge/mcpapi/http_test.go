package mcpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// serve runs the MCP server over Streamable HTTP on a loopback server.
func serve(t *testing.T, tools *fakeTools, stateless bool) *httptest.Server {
	t.Helper()
	s, err := New(Config{Tools: tools, Version: "rev-1"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	err = s.Register(mux, HTTPConfig{
		Verifier:             fakeVerifier{"tok-alice": {"sub": "alice", "scope": "profile.read"}, "tok-bob": {"sub": "bob"}, "tok-nosub": {"scope": "x"}},
		Resource:             resource,
		AuthorizationServers: []string{"https://issuer.example.test"},
		Stateless:            stateless,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// bearerTransport adds a bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

func client(t *testing.T, srv *httptest.Server, token string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + Path, HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1, DisableStandaloneSSE: true}
	return mcp.NewClient(&mcp.Implementation{Name: "test-client"}, nil).Connect(context.Background(), tr, nil)
}

func TestHTTPRefusesWithoutAValidToken(t *testing.T) {
	srv := serve(t, &fakeTools{}, true)
	for _, tc := range []struct{ name, auth, challenge string }{
		{"no token", "", `Bearer resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp"`},
		{"a token for another resource", "Bearer tok-other", `Bearer resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp", error="invalid_token"`},
		{"no subject", "Bearer tok-nosub", `Bearer resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp", error="invalid_token"`},
		{"a verifier error without a reason", "Bearer tok-boom", `Bearer resource_metadata="https://tools.example.test/.well-known/oauth-protected-resource/mcp", error="invalid_token"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
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
	srv := serve(t, &fakeTools{}, true)
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := http.Get(srv.URL + path)
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
			tools := &fakeTools{}
			cs, err := client(t, serve(t, tools, stateless), "tok-alice")
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			ctx := context.Background()
			list, err := cs.ListTools(ctx, nil)
			if err != nil || len(list.Tools) != 6 { // five tools and search_skills
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
	srv := serve(t, &fakeTools{}, true)
	req, _ := http.NewRequest("POST", srv.URL+Path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
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
	srv := serve(t, &fakeTools{}, false)
	cs, err := client(t, srv, "tok-alice")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	req, _ := http.NewRequest("POST", srv.URL+Path, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`))
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

// TestHTTPSessionsHearOfChanges: a session-keeping server tells its
// sessions when the caller's tool list changed and when a consent it
// elicited is over.
func TestHTTPSessionsHearOfChanges(t *testing.T) {
	tools, consents := &fakeTools{}, &fakeConsents{}
	s, err := New(Config{Tools: tools, Consents: consents, WatchEvery: 20 * time.Millisecond, ManifestEvery: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	if err := s.Register(mux, HTTPConfig{Verifier: fakeVerifier{"tok-alice": {"sub": "alice"}}, Resource: resource}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	listChanged, completed := make(chan struct{}, 4), make(chan string, 4)
	opts := &mcp.ClientOptions{
		Capabilities:           &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { listChanged <- struct{}{} },
		ElicitationCompleteHandler: func(_ context.Context, r *mcp.ElicitationCompleteNotificationRequest) {
			completed <- r.Params.ElicitationID
		},
	}
	tr := &mcp.StreamableClientTransport{Endpoint: srv.URL + Path, HTTPClient: &http.Client{Transport: bearerTransport{"tok-alice"}}, MaxRetries: -1}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, opts).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	tools.mu.Lock()
	tools.extra = true // a tenant uploads a tool
	tools.mu.Unlock()
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
