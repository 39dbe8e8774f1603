package e2ekit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SDKPythonVenv is where `make sdk-check` (sdk/python/ci.sh) installs
// the Python SDK and its test dependencies, relative to the module root.
const SDKPythonVenv = ".tools/sdk-python"

// SDKSuite is one client SDK's integration suite, run as a subprocess
// (sdk/TESTING.md).
type SDKSuite struct {
	// Name is the subtest's name: python, typescript.
	Name string
	// Script and Args are the command, Script relative to the module root
	// (or absolute).
	Script string
	Args   []string
	// Installed is what `make sdk-check` leaves when the SDK's
	// environment is installed (a venv's python, node_modules).
	Installed string
}

// SDKSuites are the SDKs' integration suites, in the order they run.
func SDKSuites(root string) []SDKSuite {
	venv := filepath.Join(root, SDKPythonVenv)
	return []SDKSuite{
		{Name: "python", Script: "sdk/python/integration.sh", Args: []string{venv}, Installed: filepath.Join(venv, "bin", "python")},
		{Name: "typescript", Script: "sdk/typescript/integration.sh", Installed: filepath.Join(root, "sdk", "typescript", "node_modules")},
	}
}

func (s SDKSuite) path(root string) string {
	if filepath.IsAbs(s.Script) {
		return s.Script
	}
	return filepath.Join(root, s.Script)
}

// SDKSuiteAvailable says why suite cannot run here (its script or its
// installed environment is missing), or nil.
func SDKSuiteAvailable(root string, suite SDKSuite) error {
	script := suite.path(root)
	if st, err := os.Stat(script); err != nil || st.Mode()&0o111 == 0 {
		return fmt.Errorf("e2ekit: the %s SDK's integration script %s is missing or not executable", suite.Name, suite.Script)
	}
	if _, err := os.Stat(suite.Installed); err != nil {
		return fmt.Errorf("e2ekit: the %s SDK's environment is not installed (%s is missing): run `make sdk-check`", suite.Name, suite.Installed)
	}
	return nil
}

// RequireSDKSuite skips the test when suite cannot run here (or fails it
// when E2E_REQUIRE=1).
func RequireSDKSuite(t testing.TB, root string, suite SDKSuite) {
	t.Helper()
	if err := SDKSuiteAvailable(root, suite); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%v (%s=1, so this is a failure, not a skip)", err, RequireEnv)
		}
		t.Skipf("skipping the %s SDK's integration suite (set %s=1 to fail instead): %v", suite.Name, RequireEnv, err)
	}
}

// RequireSomeSDKSuite skips the test (or fails it when E2E_REQUIRE=1)
// when none of suites can run here, naming why for each, before the test
// starts anything; a suite of several that cannot run is skipped on its
// own by RequireSDKSuite.
func RequireSomeSDKSuite(t testing.TB, root string, suites []SDKSuite) {
	t.Helper()
	var missing []error
	for _, s := range suites {
		if err := SDKSuiteAvailable(root, s); err != nil {
			missing = append(missing, err)
		}
	}
	if len(missing) < len(suites) {
		return
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("%v (%s=1, so this is a failure, not a skip)", errors.Join(missing...), RequireEnv)
	}
	t.Skipf("skipping the SDKs' integration suites: %v", errors.Join(missing...))
}

// SDKEnv is the environment a suite runs with: this process's, without
// any AGENTAUTH_* or AWS_* variable (the suite sees exactly what the
// contract gives it), plus vars ("KEY=VALUE").
func SDKEnv(vars ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AGENTAUTH_") || strings.HasPrefix(k, "AWS_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, vars...)
}

// RunSDKSuite runs suite from the module root with env, each line of its
// output going to the test log as it comes, and returns that output and
// its error (a non-zero exit, or ctx's end, when its whole process group
// is killed).
func RunSDKSuite(ctx context.Context, t testing.TB, root string, suite SDKSuite, env []string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(ctx, suite.path(root), suite.Args...)
	cmd.Dir = root
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A grandchild that keeps the output pipe open must not hold Wait.
	cmd.WaitDelay = 10 * time.Second
	w := &lineLogger{t: t, prefix: suite.Name + "| "}
	cmd.Stdout, cmd.Stderr = w, w
	start := time.Now()
	err := cmd.Run()
	w.flush()
	if ctx.Err() != nil {
		return w.all.String(), fmt.Errorf("%s: did not end in time (%v): %w", suite.Script, time.Since(start).Round(time.Second), ctx.Err())
	}
	if err != nil {
		return w.all.String(), fmt.Errorf("%s: %w (after %v)", suite.Script, err, time.Since(start).Round(time.Second))
	}
	t.Logf("%s passed in %v", suite.Script, time.Since(start).Round(time.Second))
	return w.all.String(), nil
}

// lineLogger writes whole lines to the test log, and keeps them all.
type lineLogger struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	buf    []byte
	all    bytes.Buffer
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all.Write(p)
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.t.Log(l.prefix + strings.TrimRight(string(l.buf[:i]), "\r"))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(l.prefix + string(l.buf))
		l.buf = nil
	}
}

// TokenRecorder is a reverse proxy in front of an OAuth provider that
// keeps every token value the provider's token endpoint answers
// (access, refresh and ID tokens), so that a test can look for them
// where they must not be. Point an OAuthApp's tokenUrl at it, or put it
// where a bundle expects the provider.
type TokenRecorder struct {
	// URL is http://<addr> of the recorder.
	URL string

	srv    *http.Server
	mu     sync.Mutex
	tokens map[string]string // value → what it is
}

// StartTokenRecorder listens on addr ("127.0.0.1:0" for any port) and
// forwards every request to target (the provider's base URL), keeping
// the Host header the client sent. It stops when the test ends.
func StartTokenRecorder(t testing.TB, addr, target string) *TokenRecorder {
	t.Helper()
	tu, err := url.Parse(target)
	if err != nil || tu.Host == "" {
		t.Fatalf("e2ekit: token recorder target %q: %v", target, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("e2ekit: token recorder on %s: %v", addr, err)
	}
	r := &TokenRecorder{URL: "http://" + ln.Addr().String(), tokens: map[string]string{}}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(tu)
			pr.Out.Host = pr.In.Host
		},
		ModifyResponse: r.keep,
	}
	r.srv = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	t.Cleanup(func() { r.srv.Close() })
	return r
}

// keep reads a JSON answer's token fields and puts the body back.
func (r *TokenRecorder) keep(resp *http.Response) error {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var fields map[string]any
	if json.Unmarshal(body, &fields) != nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, name := range []string{"access_token", "refresh_token", "id_token"} {
		if v, ok := fields[name].(string); ok && v != "" {
			r.tokens[v] = name
		}
	}
	return nil
}

// Keep adds a token the test got from the provider some other way.
func (r *TokenRecorder) Keep(what, value string) {
	if value == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens[value] = what
}

// Tokens returns every token value kept, mapped to what it is.
func (r *TokenRecorder) Tokens() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]string, len(r.tokens))
	for k, v := range r.tokens {
		out[k] = v
	}
	return out
}

// Leaks names each kept token (by what it is and its first characters)
// that appears in data; tokens under 16 bytes are not looked for.
func (r *TokenRecorder) Leaks(data string) []string {
	var out []string
	for v, what := range r.Tokens() {
		if len(v) >= 16 && strings.Contains(data, v) {
			out = append(out, fmt.Sprintf("%s (%.6s…)", what, v))
		}
	}
	return out
}
