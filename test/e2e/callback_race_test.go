package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// copier stands in front of agentauth's callback route as the browser's
// redirect target: it sends copies of the callback it receives to
// agentauth at once — a double click, a retry and a replay racing — and
// answers the browser with one of their pages.
type copier struct {
	target string // agentauth's base URL
	copies int

	mu      sync.Mutex
	results []copyResult
}

type copyResult struct {
	status int
	body   string
}

func (c *copier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/oauth/callback/") {
		http.NotFound(w, r)
		return
	}
	c.mu.Lock()
	n := c.copies
	c.mu.Unlock()
	start := make(chan struct{})
	var wg sync.WaitGroup
	out := make([]copyResult, n)
	for i := range n {
		wg.Go(func() {
			<-start
			resp, err := http.Get(c.target + r.URL.RequestURI())
			if err != nil {
				out[i] = copyResult{status: -1, body: err.Error()}
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out[i] = copyResult{status: resp.StatusCode, body: string(b)}
		})
	}
	close(start)
	wg.Wait()
	c.mu.Lock()
	c.results = append(c.results, out...)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(out[0].status)
	_, _ = io.WriteString(w, out[0].body)
}

func (c *copier) take() []copyResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.results
	c.results = nil
	return r
}

// TestConcurrentCallbackCopiesAtTheProvider (issue 9 item 1): 2 and 20
// copies of one valid callback at once, against oidc-provider, which
// revokes the tokens of a code redeemed twice. Before the claim every
// trial ended with no grant; now exactly one copy redeems the code: one
// grant, one auth.granted, and the token works at the provider.
func TestConcurrentCallbackCopiesAtTheProvider(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	port := freePort(t)
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	publicURL := "http://" + front.Addr().String()
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{
		Clients: []e2ekit.Client{{
			ClientID: clientID, ClientSecret: clientSecret,
			RedirectURIs: []string{publicURL + "/oauth/callback/e2e-global"},
			GrantTypes:   []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken},
		}},
	})
	srv := startServer(t, port, t.TempDir(), map[string]string{"apps.yaml": appYAML(p, "e2e-global", "global", "")},
		"E2E_CLIENT_SECRET="+clientSecret, "AGENTAUTH_PUBLIC_URL="+publicURL)
	cp := &copier{target: srv.URL}
	fs := &http.Server{Handler: cp, ReadHeaderTimeout: 5 * time.Second}
	go fs.Serve(front)
	t.Cleanup(func() { fs.Close() })
	browser := e2ekit.StartBrowser(t)

	for i, copies := range []int{2, 20} {
		t.Run(fmt.Sprint(copies, " copies"), func(t *testing.T) {
			cp.mu.Lock()
			cp.copies = copies
			cp.mu.Unlock()
			// A team of its own per run: a fresh grant each time.
			req := tokenReq{App: "e2e-global", Global: fmt.Sprintf("demo:team:race-%d", i), User: "demo:user:alice", Instance: fmt.Sprintf("inst-race-%d", i)}
			out := srv.token(t, req)
			if out["status"] != "authorization_required" {
				t.Fatalf("want authorization_required, got %v", out)
			}
			sessionID := out["authSessionId"].(string)
			if _, err := browser.Authorize(ctx, out["authorizationUrl"].(string), "alice"); err != nil {
				t.Fatalf("browser: %v", err)
			}
			results := cp.take()
			connected, used := 0, 0
			for _, r := range results {
				switch {
				case r.status == 200 && strings.Contains(r.body, `data-status="ok"`):
					connected++
				case r.status == 400 && strings.Contains(r.body, `data-reason="session_already_used"`):
					used++
				default:
					t.Errorf("a copy answered %d: %.300s", r.status, r.body)
				}
			}
			if len(results) != copies || connected != 1 || used != copies-1 {
				t.Fatalf("%d copies: %d connected, %d session_already_used; want 1 and %d", len(results), connected, used, copies-1)
			}
			granted := 0
			for _, line := range strings.Split(strings.TrimSpace(srv.admin(t, "events", "list")), "\n") {
				var e domain.Event
				if line != "" && json.Unmarshal([]byte(line), &e) == nil && e.ID == sessionID {
					granted++
				}
			}
			if granted != 1 {
				t.Fatalf("%d auth.granted events for the session, want 1", granted)
			}
			ready := srv.token(t, req)
			if ready["status"] != "ready" {
				t.Fatalf("after the race: %v", ready)
			}
			claims, status, err := p.UserInfo(ctx, ready["accessToken"].(string))
			if err != nil || status != 200 || claims["sub"] != "alice" {
				t.Fatalf("the stored token at the provider: %d %v %v", status, claims, err)
			}
		})
	}
}
