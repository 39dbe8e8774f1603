// Package e2ekit holds helpers for agentauth's end-to-end tests: a real
// OpenID provider (oidc-provider on Node, see test/e2e/provider) started as a
// child process, and a headless Chromium driven through chromedp that logs in
// and consents on that provider's pages like a user would.
//
// Both need things outside Go: `npm ci` in test/e2e/provider and a Chromium
// at /usr/bin/chromium (or $CHROMIUM). The Makefile's e2e-deps target
// installs them; RequireProvider and RequireBrowser skip a test with a clear
// message when they are missing (or fail it when E2E_REQUIRE=1).
//
// It is also the Go side of the SDKs' integration contract
// (sdk/TESTING.md): the harness an SDK's suite drives (SDKHarness: consent
// in Chromium, a TCP proxy whose connections it cuts, a webhook
// receiver), a recorder of the tokens a provider issues, and the runner of
// each SDK's integration script (SDKSuites, RunSDKSuite).
package e2ekit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// ModulePath is the Go module whose root holds test/e2e/provider.
const ModulePath = "github.com/agentauth/agentauth"

// ProviderDirEnv overrides where provider.mjs is looked up.
const ProviderDirEnv = "E2E_PROVIDER_DIR"

// RequireEnv, when set to 1, turns the skips of RequireProvider and
// RequireBrowser into failures (for CI, where the deps must be installed).
const RequireEnv = "E2E_REQUIRE"

// DefaultProviderStartTimeout bounds each start attempt's wait for the
// provider's listening line (a stalled start is tried again, at most 3 times).
const DefaultProviderStartTimeout = 20 * time.Second

const depsHintProvider = "run `make e2e-deps` (or `npm ci` in test/e2e/provider)"

// Client is the subset of oidc-provider client metadata the tests use. It is
// marshalled into PROVIDER_CLIENTS_JSON. Empty GrantTypes default to
// authorization_code + refresh_token and an empty TokenEndpointAuthMethod to
// client_secret_basic (provider-side clientDefaults).
type Client struct {
	ClientID                string   `json:"client_id"`
	ClientSecret            string   `json:"client_secret,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	// Scope, when set, is the space separated list of scopes the client may
	// request (oidc-provider's client "scope" metadata).
	Scope string `json:"scope,omitempty"`
}

// Grant types accepted in Client.GrantTypes.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantRefreshToken      = "refresh_token"
	GrantDeviceCode        = "urn:ietf:params:oauth:grant-type:device_code"
	GrantClientCredentials = "client_credentials"
)

// ProviderOptions configures StartProvider.
type ProviderOptions struct {
	// Clients replaces the provider's default clients (agentauth-demo,
	// agentauth-demo-post). Nil keeps the defaults.
	Clients []Client
	// AccessTokenTTL is the access token lifetime (whole seconds, >= 1s);
	// zero keeps the provider default (1h).
	AccessTokenTTL time.Duration
	// RefreshTokenTTL is the refresh token lifetime; zero keeps 14 days.
	RefreshTokenTTL time.Duration
	// Stats enables GET /__stats (PROVIDER_TEST_STATS=1).
	Stats bool
	// Env holds extra KEY=VALUE pairs for the node process.
	Env []string
	// StartTimeout bounds the start; zero means DefaultProviderStartTimeout.
	StartTimeout time.Duration
	// Dir is the provider directory; empty means <module root>/test/e2e/provider
	// (or $E2E_PROVIDER_DIR).
	Dir string
	// Port is the 127.0.0.1 port to listen on; zero picks a free one. A
	// fixed port (e.g. 9090, where examples/bundle expects the demo
	// provider) fails the start when it is taken.
	Port int
}

// Provider is a running test OpenID provider.
type Provider struct {
	// Issuer is the provider's issuer URL, e.g. http://127.0.0.1:40123.
	Issuer string

	// Endpoints read from the discovery document.
	AuthorizationURL       string
	TokenURL               string
	UserInfoURL            string
	RevocationURL          string
	IntrospectionURL       string
	DeviceAuthorizationURL string
	JWKSURL                string
	EndSessionURL          string

	// Discovery is the raw OpenID discovery document.
	Discovery map[string]any

	// HTTPClient is used by the helper methods (10s timeout by default).
	HTTPClient *http.Client

	cmd     *exec.Cmd
	logs    *ringLog
	done    chan struct{}
	waitErr error

	closeOnce sync.Once
}

// FreePort is a 127.0.0.1 port that was free a moment ago: for a server
// whose address must be known before it starts (a redirect URI, an issuer).
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// ProviderDir returns the directory holding provider.mjs: $E2E_PROVIDER_DIR,
// else <module root>/test/e2e/provider.
func ProviderDir() (string, error) {
	if d := os.Getenv(ProviderDirEnv); d != "" {
		return d, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "test", "e2e", "provider"), nil
}

// ModuleRoot finds the root of the agentauth module by walking up from the
// working directory (go test runs in the package directory), falling back
// to `go env GOMOD`.
func ModuleRoot() (string, error) {
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; {
			if isAgentauthModule(filepath.Join(dir, "go.mod")) {
				return dir, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("e2ekit: cannot find the %s module root: no go.mod up from the working directory and `go env GOMOD` failed: %w", ModulePath, err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull || !isAgentauthModule(gomod) {
		return "", fmt.Errorf("e2ekit: cannot find the %s module root (go env GOMOD = %q)", ModulePath, gomod)
	}
	return filepath.Dir(gomod), nil
}

func isAgentauthModule(gomod string) bool {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "module" && strings.Trim(f[1], `"`) == ModulePath {
			return true
		}
	}
	return false
}

// ProviderAvailable reports why the provider cannot be started here (node
// missing, node_modules not installed), or nil.
func ProviderAvailable() error {
	dir, err := ProviderDir()
	if err != nil {
		return err
	}
	return providerAvailableIn(dir)
}

func providerAvailableIn(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "provider.mjs")); err != nil {
		return fmt.Errorf("e2ekit: provider.mjs not found in %s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "oidc-provider", "package.json")); err != nil {
		return fmt.Errorf("e2ekit: %s/node_modules/oidc-provider is missing: %s", dir, depsHintProvider)
	}
	if _, err := exec.LookPath(nodeBinary()); err != nil {
		return fmt.Errorf("e2ekit: node not found (%v): install Node.js >= 20.19 (make e2e-deps)", err)
	}
	return nil
}

func nodeBinary() string {
	if n := os.Getenv("NODE"); n != "" {
		return n
	}
	return "node"
}

// RequireProvider skips the test when the provider's dependencies are
// missing (or fails it when E2E_REQUIRE=1).
func RequireProvider(t testing.TB) {
	t.Helper()
	if err := ProviderAvailable(); err != nil {
		skipOrFail(t, err)
	}
}

func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%v (%s=1, so this is a failure, not a skip)", err, RequireEnv)
	}
	t.Skipf("skipping end-to-end test, a dependency is missing (the Makefile's e2e-deps target installs it; set %s=1 to fail instead): %v", RequireEnv, err)
}

// StartProvider starts the test provider on a free 127.0.0.1 port (or
// ProviderOptions.Port) and stops it (the whole process group) when the test
// ends. It fails the test when the provider cannot start; call
// RequireProvider first to skip instead.
func StartProvider(t testing.TB, opts ProviderOptions) *Provider {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := LaunchProvider(ctx, opts)
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("provider log (last lines):\n%s", strings.Join(p.Logs(), "\n"))
		}
		if err := p.Close(); err != nil {
			t.Logf("stopping provider: %v", err)
		}
	})
	return p
}

// LaunchProvider is StartProvider without testing.TB: the caller must Close
// the returned provider (e.g. from TestMain). ctx bounds the start only.
func LaunchProvider(ctx context.Context, opts ProviderOptions) (*Provider, error) {
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = ProviderDir(); err != nil {
			return nil, err
		}
	}
	if err := providerAvailableIn(dir); err != nil {
		return nil, err
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = DefaultProviderStartTimeout
	}
	env := make([]string, 0, len(os.Environ())+8)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PROVIDER_") {
			env = append(env, kv)
		}
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("e2ekit: provider port %d out of range", opts.Port)
	}
	env = append(env, "PROVIDER_PORT="+strconv.Itoa(opts.Port))
	if opts.Clients != nil {
		b, err := json.Marshal(opts.Clients)
		if err != nil {
			return nil, fmt.Errorf("e2ekit: marshal clients: %w", err)
		}
		env = append(env, "PROVIDER_CLIENTS_JSON="+string(b))
	}
	if opts.AccessTokenTTL > 0 {
		env = append(env, "PROVIDER_ACCESS_TOKEN_TTL="+strconv.Itoa(ttlSeconds(opts.AccessTokenTTL)))
	}
	if opts.RefreshTokenTTL > 0 {
		env = append(env, "PROVIDER_REFRESH_TOKEN_TTL="+strconv.Itoa(ttlSeconds(opts.RefreshTokenTTL)))
	}
	if opts.Stats {
		env = append(env, "PROVIDER_TEST_STATS=1")
	}
	env = append(env, opts.Env...)

	// A provider killed by a signal before it listened was not killed by
	// us (on a shared machine a stray signal can hit a fresh process), and
	// one that stalls before listening (seen once in ~50 starts under heavy
	// load, never reproduced) is killed: both are tried again with a fresh
	// process, each attempt bounded by timeout. A configuration error exits
	// with status 1 and is final.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		actx, cancel := context.WithTimeout(ctx, timeout)
		p, signaled, err := startProvider(actx, dir, env, timeout)
		stalled := err != nil && actx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			return p, nil
		}
		lastErr = err
		if !(signaled || stalled) || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// startProvider starts node once. signaled reports that the process died
// from a signal before printing its listening line.
func startProvider(ctx context.Context, dir string, env []string, timeout time.Duration) (_ *Provider, signaled bool, _ error) {
	cmd := exec.Command(nodeBinary(), "provider.mjs")
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, false, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, false, err
	}
	if err := cmd.Start(); err != nil {
		return nil, false, fmt.Errorf("e2ekit: start node provider.mjs in %s: %w", dir, err)
	}

	p := &Provider{
		HTTPClient: &http.Client{Timeout: 10 * time.Second},
		cmd:        cmd,
		logs:       newRingLog(400),
		done:       make(chan struct{}),
	}
	issuerCh := make(chan string, 1)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			p.logs.add(line)
			if sent {
				continue
			}
			var ev struct {
				Event  string `json:"event"`
				Issuer string `json:"issuer"`
			}
			if json.Unmarshal([]byte(line), &ev) == nil && ev.Event == "listening" && ev.Issuer != "" {
				issuerCh <- ev.Issuer
				sent = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		defer readers.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			p.logs.add("stderr: " + sc.Text())
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() {
		readers.Wait() // pipes must be drained before Wait
		p.waitErr = cmd.Wait()
		close(p.done)
	}()

	select {
	case p.Issuer = <-issuerCh:
	case <-p.done:
		var ee *exec.ExitError
		if errors.As(p.waitErr, &ee) {
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				signaled = true
			}
		}
		return nil, signaled, fmt.Errorf("e2ekit: provider exited before listening (%v); %s\nlog tail:\n%s",
			p.waitErr, depsHintIfMissing(p.logs), strings.Join(p.logs.tail(30), "\n"))
	case <-ctx.Done():
		_ = p.Close()
		return nil, false, fmt.Errorf("e2ekit: provider did not print its listening line within %s: %w\nlog tail:\n%s",
			timeout, ctx.Err(), strings.Join(p.logs.tail(30), "\n"))
	}

	if err := p.loadDiscovery(ctx); err != nil {
		_ = p.Close()
		return nil, false, fmt.Errorf("e2ekit: provider discovery: %w\nlog tail:\n%s", err, strings.Join(p.logs.tail(30), "\n"))
	}
	return p, false, nil
}

func ttlSeconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

func depsHintIfMissing(l *ringLog) string {
	for _, line := range l.tail(50) {
		if strings.Contains(line, "ERR_MODULE_NOT_FOUND") || strings.Contains(line, "Cannot find package") {
			return "node modules are missing: " + depsHintProvider
		}
	}
	return "see the log tail"
}

// Close stops the provider: SIGTERM to its process group, SIGKILL after 5s.
func (p *Provider) Close() error {
	var err error
	p.closeOnce.Do(func() {
		if p.cmd == nil || p.cmd.Process == nil {
			return
		}
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			select {
			case <-p.done:
			case <-time.After(5 * time.Second):
				err = errors.New("e2ekit: provider process did not exit after SIGKILL")
			}
		}
	})
	return err
}

// Logs returns the last lines the provider printed (stdout JSON events and
// stderr lines prefixed "stderr: "). Token values are never logged.
func (p *Provider) Logs() []string { return p.logs.tail(0) }

func (p *Provider) loadDiscovery(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(p.Issuer, "/")+"/.well-known/openid-configuration", nil)
	if err != nil {
		return err
	}
	var doc map[string]any
	status, err := p.doJSON(req, &doc)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET discovery: status %d", status)
	}
	str := func(k string) string { s, _ := doc[k].(string); return s }
	p.Discovery = doc
	p.AuthorizationURL = str("authorization_endpoint")
	p.TokenURL = str("token_endpoint")
	p.UserInfoURL = str("userinfo_endpoint")
	p.RevocationURL = str("revocation_endpoint")
	p.IntrospectionURL = str("introspection_endpoint")
	p.DeviceAuthorizationURL = str("device_authorization_endpoint")
	p.JWKSURL = str("jwks_uri")
	p.EndSessionURL = str("end_session_endpoint")
	if iss := str("issuer"); iss != p.Issuer {
		return fmt.Errorf("discovery issuer %q != listening issuer %q", iss, p.Issuer)
	}
	if p.AuthorizationURL == "" || p.TokenURL == "" {
		return errors.New("discovery lacks authorization_endpoint or token_endpoint")
	}
	return nil
}

// Endpoint returns the provider's endpoints for golang.org/x/oauth2, with
// client_secret_basic (oidc-provider also accepts client_secret_post).
func (p *Provider) Endpoint() oauth2.Endpoint {
	return oauth2.Endpoint{
		AuthURL:       p.AuthorizationURL,
		TokenURL:      p.TokenURL,
		DeviceAuthURL: p.DeviceAuthorizationURL,
		AuthStyle:     oauth2.AuthStyleInHeader,
	}
}

// UserInfo calls the userinfo endpoint with the bearer token. It returns the
// decoded claims (or error body) and the HTTP status; err is for transport
// and decoding failures only.
func (p *Provider) UserInfo(ctx context.Context, accessToken string) (map[string]any, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.UserInfoURL, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+accessToken)
	var out map[string]any
	status, err := p.doJSON(req, &out)
	return out, status, err
}

// Introspect asks the introspection endpoint (RFC 7662) whether token is
// active, authenticating as the client with client_secret_basic.
func (p *Provider) Introspect(ctx context.Context, clientID, clientSecret, token string) (bool, error) {
	out, err := p.IntrospectResponse(ctx, clientID, clientSecret, token)
	if err != nil {
		return false, err
	}
	active, _ := out["active"].(bool)
	return active, nil
}

// IntrospectResponse is Introspect returning the whole response.
func (p *Provider) IntrospectResponse(ctx context.Context, clientID, clientSecret, token string) (map[string]any, error) {
	var out map[string]any
	status, err := p.postForm(ctx, p.IntrospectionURL, clientID, clientSecret, url.Values{"token": {token}}, &out)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return out, fmt.Errorf("e2ekit: introspection: status %d: %v", status, out)
	}
	return out, nil
}

// Revoke revokes token at the revocation endpoint (RFC 7009) with
// client_secret_basic; hint ("access_token", "refresh_token") may be empty.
func (p *Provider) Revoke(ctx context.Context, clientID, clientSecret, token, hint string) error {
	form := url.Values{"token": {token}}
	if hint != "" {
		form.Set("token_type_hint", hint)
	}
	var out map[string]any
	status, err := p.postForm(ctx, p.RevocationURL, clientID, clientSecret, form, &out)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("e2ekit: revocation: status %d: %v", status, out)
	}
	return nil
}

// Stats are the provider's test counters (GET /__stats, ProviderOptions.Stats).
type Stats struct {
	// Grants counts successful token responses by grant_type
	// ("authorization_code", "refresh_token", device code URN).
	Grants map[string]int `json:"grants"`
	// GrantErrors counts failed token requests by grant_type.
	GrantErrors map[string]int `json:"grant_errors"`
	// RefreshFailures counts failed refresh_token grants (any reason).
	RefreshFailures int `json:"refresh_failures"`
	// RefreshReuse counts refresh_token grants that presented an already
	// rotated refresh token (each also revokes the grant).
	RefreshReuse int `json:"refresh_reuse"`
	// RefreshRotations counts refresh tokens consumed by rotation.
	RefreshRotations int `json:"refresh_rotations"`
	// Revocations counts successful revocation endpoint calls.
	Revocations int `json:"revocations"`
	// GrantsRevoked counts grants revoked (revocation of a refresh token, or
	// refresh token reuse).
	GrantsRevoked        int `json:"grants_revoked"`
	Authorizations       int `json:"authorizations"`
	UserInfo             int `json:"userinfo"`
	UserInfoErrors       int `json:"userinfo_errors"`
	Introspections       int `json:"introspections"`
	DeviceAuthorizations int `json:"device_authorizations"`
}

// Stats fetches GET /__stats (needs ProviderOptions.Stats).
func (p *Provider) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(p.Issuer, "/")+"/__stats", nil)
	if err != nil {
		return s, err
	}
	status, err := p.doJSON(req, &s)
	if err != nil {
		return s, err
	}
	if status != http.StatusOK {
		return s, fmt.Errorf("e2ekit: GET /__stats: status %d (start the provider with ProviderOptions.Stats)", status)
	}
	return s, nil
}

func (p *Provider) postForm(ctx context.Context, endpoint, clientID, clientSecret string, form url.Values, out any) (int, error) {
	if endpoint == "" {
		return 0, errors.New("e2ekit: endpoint not advertised by the provider")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	// RFC 6749 2.3.1: form-encode id and secret before basic auth.
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(clientSecret))
	return p.doJSON(req, out)
}

func (p *Provider) doJSON(req *http.Request, out any) (int, error) {
	req.Header.Set("Accept", "application/json")
	c := p.HTTPClient
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return resp.StatusCode, nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return resp.StatusCode, fmt.Errorf("decode %s %s (status %d): %w", req.Method, req.URL.Path, resp.StatusCode, err)
	}
	return resp.StatusCode, nil
}

// ringLog keeps the last n lines.
type ringLog struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newRingLog(n int) *ringLog { return &ringLog{n: n} }

func (r *ringLog) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	if len(r.lines) > r.n {
		r.lines = append(r.lines[:0:0], r.lines[len(r.lines)-r.n:]...)
	}
}

// tail returns the last k lines (all when k <= 0).
func (r *ringLog) tail(k int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k <= 0 || k > len(r.lines) {
		k = len(r.lines)
	}
	return append([]string(nil), r.lines[len(r.lines)-k:]...)
}
