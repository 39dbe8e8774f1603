package e2ekit_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// TestBrowserLocalhostSubdomains: with BrowserOptions.LocalhostSubdomains a
// *.localhost name (e.g. an emulator's <apiId>.execute-api.localhost)
// reaches 127.0.0.1 on the URL's port with its own Host header; without
// it the name does not resolve.
func TestBrowserLocalhostSubdomains(t *testing.T) {
	e2ekit.RequireBrowser(t)
	var mu sync.Mutex
	var hosts []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>sub</title><p>reached</p>")
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	target := "http://abc123.execute-api.localhost:" + port + "/healthz"
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	b := e2ekit.StartBrowserWith(t, e2ekit.BrowserOptions{LocalhostSubdomains: true})
	res, err := b.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != http.StatusOK || res.Title != "sub" {
		t.Fatalf("with LocalhostSubdomains: %+v", res)
	}
	mu.Lock()
	got := append([]string(nil), hosts...)
	mu.Unlock()
	if len(got) == 0 || got[0] != "abc123.execute-api.localhost:"+port {
		t.Fatalf("Host headers seen: %q", got)
	}

	// Other names still fail to resolve.
	res, err = b.Open(ctx, "http://example.com:"+port+"/")
	if err != nil {
		t.Fatal(err)
	}
	if res.LoadError == "" {
		t.Fatalf("example.com resolved with LocalhostSubdomains: %+v", res)
	}

	// The default browser keeps *.localhost unresolved.
	plain := e2ekit.StartBrowser(t)
	res, err = plain.Open(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	if res.LoadError == "" {
		t.Fatalf("a default browser reached %s: %+v", target, res)
	}
}

// TestStartProviderPort: ProviderOptions.Port fixes the provider's port.
func TestStartProviderPort(t *testing.T) {
	e2ekit.RequireProvider(t)
	port := e2ekit.FreePort(t)
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{Port: port})
	if want := fmt.Sprintf("http://127.0.0.1:%d", port); p.Issuer != want {
		t.Fatalf("issuer %q, want %q", p.Issuer, want)
	}
	// A taken port fails the start instead of picking another.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if q, err := e2ekit.LaunchProvider(ctx, e2ekit.ProviderOptions{Port: port}); err == nil {
		q.Close()
		t.Fatalf("a second provider started on the taken port %d", port)
	}
}
