package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
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

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/config"
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
    clientSecret: {value: bench-secret}
  endpoints:
    authorizationUrl: http://127.0.0.1:1/authorize
    tokenUrl: http://127.0.0.1:1/token
  scopes: [read]
  redirect: {callbackPath: /oauth/callback/bench}
`

const benchSubject = "bench:team:T1"

// benchLoad is one bounded closed-loop load: at most maxReq requests,
// until the deadline, on conc connections.
type benchLoad struct {
	duration time.Duration
	conc     int
	maxReq   int
}

// cmdBench measures the ready path of the real local server stack (router,
// caller auth, JSON, manager, filesystem store, AES keyring, JSON logs to a
// file) over loopback with a bounded closed-loop load.
func benchCommand() command {
	return command{name: "bench", summary: "measure the token route's ready path of the real server stack over loopback",
		about: `It serves a temporary home holding one grant on a loopback port and sends
			POST /v1/oauth/token from the same process: a bounded closed-loop load, then req/s and
			p50/p90/p99. It never touches your home or a running server.`,
		bind: func(fs *flag.FlagSet, _ *config.Config) action {
			var load benchLoad
			fs.DurationVar(&load.duration, "duration", 10*time.Second, "`DURATION` how long to send load, like 10s or 1m30s (at most 2m)")
			fs.IntVar(&load.conc, "concurrency", 16, "`N` concurrent connections, 1 to 256")
			fs.IntVar(&load.maxReq, "max-requests", 2_000_000, "stop after `N` requests")
			return func(ctx context.Context, std stdio, _ []string) error { return cmdBench(ctx, load, std.out) }
		}}
}

func cmdBench(ctx context.Context, load benchLoad, stdout io.Writer) error {
	if load.duration <= 0 || load.duration > 2*time.Minute || load.conc < 1 || load.conc > 256 || load.maxReq < 1 {
		return usageError{msg: "bench: --duration must be in (0, 2m], --concurrency in [1, 256], --max-requests ≥ 1"}
	}
	home, err := os.MkdirTemp("", "agentauth-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	tok := domain.NewSecret("bench-runtime-token")
	url, stop, err := startBenchServer(ctx, home, tok)
	if err != nil {
		return err
	}
	defer stop()

	body, _ := json.Marshal(map[string]any{
		"oauthAppRef": "OAuthApp/bench",
		"turn":        map[string]any{"auth": map[string]any{"subjects": map[string]string{"global": benchSubject}}},
	})
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: load.conc, MaxConnsPerHost: load.conc}}
	one := readyRequest(ctx, client, url+"/v1/oauth/token", tok, body)
	// Warm up: connections, caches.
	var warm bytes.Buffer
	for range 200 {
		if _, err := one(&warm); err != nil {
			return fmt.Errorf("bench warm-up: %w", err)
		}
	}
	fmt.Fprintf(stdout, "bench: POST /v1/oauth/token (ready, warm) for %s with %d connections on %s…\n", load.duration, load.conc, url)
	res := load.run(ctx, one)
	return res.report(stdout)
}

// startBenchServer builds the local server with app.Build on a fresh home
// holding the bench bundle and a seeded grant, and serves it on a loopback
// port. It returns the base URL and a stop function.
func startBenchServer(ctx context.Context, home string, tok domain.Secret) (string, func(), error) {
	cfg, err := config.FromEnv(func(string) string { return "" }, config.Local)
	if err != nil {
		return "", nil, err
	}
	cfg.Home, cfg.BundleDir = home, filepath.Join(home, "bundle")
	if err := os.MkdirAll(cfg.BundleDir, 0o700); err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.BundleDir, "bench.yaml"), []byte(benchBundle), 0o600); err != nil {
		return "", nil, err
	}
	h, err := openHome(ctx, cfg, true)
	if err != nil {
		return "", nil, err
	}
	logFile, err := os.Create(filepath.Join(home, "server.log"))
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		logFile.Close()
		return "", nil, err
	}
	cfg.PublicURL = "http://" + ln.Addr().String()
	log := logging.New(logFile, slog.LevelInfo)
	be, err := localBackends(ctx, cfg, h, log)
	if err != nil {
		logFile.Close()
		return "", nil, err
	}
	a, err := app.Build(ctx, cfg, be, log, app.Options{RuntimeAuth: httpapi.BearerToken{Token: tok}, Function: "bench"})
	if err == nil {
		err = seedGrant(ctx, h, a.Bundle.OAuthApps["bench"], benchSubject)
	}
	if err != nil {
		ln.Close()
		logFile.Close()
		return "", nil, err
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	return cfg.PublicURL, func() { srv.Close(); logFile.Close() }, nil
}

// readyRequest returns a function that sends one token request and checks
// the answer is ready, cheaply: the generator shares the server's cores.
func readyRequest(ctx context.Context, client *http.Client, url string, tok domain.Secret, body []byte) func(*bytes.Buffer) (time.Duration, error) {
	readyPrefix := []byte(`{"status":"ready"`)
	return func(buf *bytes.Buffer) (time.Duration, error) {
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
}

// benchResult is what a load run measured.
type benchResult struct {
	lat      []time.Duration
	errs     int
	firstErr error
	elapsed  time.Duration
}

// run sends the load: conc workers, each one request at a time, until the
// deadline, the request budget or ctx ends.
func (l benchLoad) run(ctx context.Context, one func(*bytes.Buffer) (time.Duration, error)) benchResult {
	var (
		mu   sync.Mutex
		res  = benchResult{lat: make([]time.Duration, 0, 1<<16)}
		sent int
	)
	take := func() bool {
		mu.Lock()
		defer mu.Unlock()
		if sent >= l.maxReq {
			return false
		}
		sent++
		return true
	}
	deadline := time.Now().Add(l.duration)
	start := time.Now()
	var wg sync.WaitGroup
	for range l.conc {
		wg.Go(func() {
			local := make([]time.Duration, 0, 1<<14)
			var buf bytes.Buffer
			for time.Now().Before(deadline) && ctx.Err() == nil && take() {
				d, err := one(&buf)
				if err != nil {
					mu.Lock()
					res.errs++
					if res.firstErr == nil {
						res.firstErr = err
					}
					mu.Unlock()
					continue
				}
				local = append(local, d)
			}
			mu.Lock()
			res.lat = append(res.lat, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// report prints throughput and latency percentiles; failed requests make
// it an error.
func (r benchResult) report(w io.Writer) error {
	if len(r.lat) == 0 {
		return fmt.Errorf("bench: no successful request (first error: %v)", r.firstErr)
	}
	slices.Sort(r.lat)
	pct := func(p float64) time.Duration { return r.lat[min(len(r.lat)-1, int(float64(len(r.lat))*p))] }
	fmt.Fprintf(w, "requests %d ok, %d errors in %.2fs\nthroughput %.0f req/s\nlatency p50 %s  p90 %s  p99 %s  max %s\n",
		len(r.lat), r.errs, r.elapsed.Seconds(), float64(len(r.lat))/r.elapsed.Seconds(),
		pct(0.50).Round(time.Microsecond), pct(0.90).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), r.lat[len(r.lat)-1].Round(time.Microsecond))
	if r.errs > 0 {
		return fmt.Errorf("bench: %d requests failed (first: %v)", r.errs, r.firstErr)
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
