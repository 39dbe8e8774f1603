package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/local/embedded"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/observe/logging"
)

// benchBundle is a one-app bundle; its provider is never called because
// the bench grant does not expire.
const benchBundle = `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: bench}
spec:
  provider: bench
  flow: authorizationCode
  subjectMode: global
  client:
    clientId: {value: bench}
    clientSecret: {valueFrom: {env: AGENTAUTH_BENCH_CLIENT_SECRET}}
  endpoints:
    authorizationUrl: http://127.0.0.1:1/authorize
    tokenUrl: http://127.0.0.1:1/token
  scopes: [read]
  redirect: {callbackPath: /oauth/callback/bench}
`

// cmdBench measures the ready path of the real local server stack (router,
// caller auth, JSON, manager, filesystem store, AES keyring, JSON logs to a
// file) over loopback with a bounded closed-loop load.
func cmdBench(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("bench")
	duration := fs.Duration("duration", 10*time.Second, "how long to send load (at most 2m)")
	conc := fs.Int("concurrency", 16, "concurrent connections (1-256)")
	maxReq := fs.Int("max-requests", 2_000_000, "stop after this many requests")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *duration <= 0 || *duration > 2*time.Minute || *conc < 1 || *conc > 256 || *maxReq < 1 {
		return usageError{"bench: --duration must be in (0, 2m], --concurrency in [1, 256], --max-requests ≥ 1"}
	}
	home, err := os.MkdirTemp("", "agentauth-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	os.Setenv("AGENTAUTH_BENCH_CLIENT_SECRET", "bench-secret")
	b, err := bundle.Parse([]bundle.File{{Name: "bench.yaml", Data: []byte(benchBundle)}}, bundle.Options{})
	if err != nil {
		return err
	}
	h, err := openHome(ctx, home, true)
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(home, "server.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	log := logging.New(logFile, slog.LevelInfo)
	mgr, err := oauth.New(oauth.Config{Bundle: b, Store: h.Store, Sealer: h.Keyring, Queue: h.Queue, StateKeys: h.Keyring.DerivedKeys("state"), BaseURL: "http://127.0.0.1", Logger: log})
	if err != nil {
		return err
	}
	const subject = "bench:team:T1"
	if err := seedGrant(ctx, h, b.OAuthApps["bench"], subject); err != nil {
		return err
	}
	tok := domain.NewSecret("bench-runtime-token")
	api, err := httpapi.New(mgr, b, httpapi.BearerToken{Token: tok}, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	body, _ := json.Marshal(map[string]any{
		"oauthAppRef": "OAuthApp/bench",
		"turn":        map[string]any{"auth": map[string]any{"subjects": map[string]string{"global": subject}}},
	})
	url := "http://" + ln.Addr().String() + "/v1/oauth/token"
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: *conc, MaxConnsPerHost: *conc}}
	readyPrefix := []byte(`{"status":"ready"`)
	// one sends a request and checks the answer is ready, cheaply: the
	// generator shares the server's cores, so it should cost little.
	one := func(buf *bytes.Buffer) (time.Duration, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok.Reveal())
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		buf.Reset()
		_, err = buf.ReadFrom(resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if err == nil && (resp.StatusCode != http.StatusOK || !bytes.HasPrefix(buf.Bytes(), readyPrefix)) {
			err = fmt.Errorf("HTTP %d, want a ready result", resp.StatusCode)
		}
		return d, err
	}
	// Warm up: connections, caches.
	var warm bytes.Buffer
	for range 200 {
		if _, err := one(&warm); err != nil {
			return fmt.Errorf("bench warm-up: %w", err)
		}
	}

	fmt.Fprintf(stdout, "bench: POST /v1/oauth/token (ready, warm) for %s with %d connections on %s…\n", *duration, *conc, ln.Addr())
	var (
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, 1<<16)
		errs    int
		firstEr error
		sent    int
	)
	deadline := time.Now().Add(*duration)
	start := time.Now()
	var wg sync.WaitGroup
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, 1<<14)
			var buf bytes.Buffer
			for time.Now().Before(deadline) && ctx.Err() == nil {
				mu.Lock()
				if sent >= *maxReq {
					mu.Unlock()
					break
				}
				sent++
				mu.Unlock()
				d, err := one(&buf)
				if err != nil {
					mu.Lock()
					errs++
					if firstEr == nil {
						firstEr = err
					}
					mu.Unlock()
					continue
				}
				local = append(local, d)
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(lat) == 0 {
		return fmt.Errorf("bench: no successful request (first error: %v)", firstEr)
	}
	slices.Sort(lat)
	pct := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
	fmt.Fprintf(stdout, "requests %d ok, %d errors in %.2fs\nthroughput %.0f req/s\nlatency p50 %s  p90 %s  p99 %s  max %s\n",
		len(lat), errs, elapsed.Seconds(), float64(len(lat))/elapsed.Seconds(),
		pct(0.50).Round(time.Microsecond), pct(0.90).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	if errs > 0 {
		return fmt.Errorf("bench: %d requests failed (first: %v)", errs, firstEr)
	}
	return nil
}

// seedGrant stores a non-expiring grant, as a completed consent would.
func seedGrant(ctx context.Context, h *embedded.Backends, app *bundle.OAuthApp, subject string) error {
	id := oauth.GrantID(app.Ref(), subject)
	at, err := h.Keyring.Seal(ctx, []byte("bench-access-token"), domain.Binding{Record: "grant", RecordID: id, Field: "accessToken"})
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	_, err = h.Store.PutGrant(ctx, domain.Grant{
		ID: id, Provider: app.Provider, OAuthAppRef: app.Ref(), Subject: subject, Flow: domain.FlowAuthorizationCode,
		ScopesGranted: app.Scopes, Token: domain.GrantToken{TokenType: "bearer", AccessToken: at, IssuedAt: now},
		CreatedAt: now, UpdatedAt: now,
	}, 0)
	return err
}
