package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// The names the load uses.
const (
	appReady   = "soak-ready"   // one subject, consented at start: token reads are ready
	appConsent = "soak-consent" // many subjects; half consented, half left pending
	appPark    = "soak-park"    // the parking tool's app: never consented
	toolOrders = "list_orders"  // no auth: the upstream answers
	toolPark   = "profile"      // needs soak-park's consent: the call parks
	swarm      = "default"
	agent      = "assistant"
	readySub   = "soak:team:ready"
)

// soakBundle is the server's bundle: three OAuthApps on the fake
// provider, two http tools on the upstream, a policy that shows both to
// any caller with a scope, and an Agent on the scripted model.
func soakBundle(provider, upstreamURL, modelURL string) string {
	app := func(name string) string {
		return fmt.Sprintf(`apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: %[1]s}
spec:
  provider: soak
  flow: authorizationCode
  subjectMode: global
  client:
    clientId: {value: soak}
    clientSecret: {valueFrom: {env: SOAK_CLIENT_SECRET}}
  endpoints:
    authorizationUrl: %[2]s/authorize
    tokenUrl: %[2]s/token
  scopes: [read]
  redirect: {callbackPath: /oauth/callback/%[1]s}
---
`, name, provider)
	}
	return app(appReady) + app(appConsent) + app(appPark) + fmt.Sprintf(`apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: orders}
spec:
  id: "orders:list"
  name: %[3]s
  description: Lists orders
  inputSchema: {type: object, properties: {note: {type: string}}}
  sourceId: orders
  sourcePath: /orders
  method: GET
  transport: http
  url: %[1]s
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: profile}
spec:
  id: "consent:profile"
  name: %[4]s
  description: The user's profile (needs the user's consent)
  inputSchema: {type: object, additionalProperties: false}
  sourceId: consent
  sourcePath: /me
  method: GET
  transport: http
  url: %[1]s
  auth: {oauthAppRef: %[5]s}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: soak}
spec: {selectors: [{source: "regex:(orders|consent)$", requiredTags: []}]}
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: soak}
spec: {claimMatchers: [{claim: scope, operator: exists}], allowedGroupIds: [soak]}
---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: scripted}
spec: {provider: openai, model: scripted, endpoint: %[2]q}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: %[6]s}
spec:
  modelRef: Model/scripted
  systemPrompt: Answer briefly.
  tools: {explicitToolIds: ["orders:list", "consent:profile"]}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: %[7]s}
spec: {agents: [Agent/%[6]s], entrypoint: Agent/%[6]s}
`, upstreamURL, modelURL+"/v1", toolOrders, toolPark, appPark, agent, swarm)
}

// soakScript is what the scripted model (not a language model) answers:
// "orders" calls list_orders and answers its result; "profile" calls the
// tool that parks on consent.
func soakScript() scripted.Script {
	return scripted.Script{Turns: []scripted.Turn{
		{ToolResult: toolOrders, Text: "You have orders. (The scripted model answered, not a language model.)"},
		{ToolResult: toolPark, Text: "Here is your profile. (The scripted model answered, not a language model.)"},
		{UserContains: "profile", ToolCalls: []scripted.ToolCall{{Name: toolPark, Args: json.RawMessage(`{}`)}}},
		{UserContains: "orders", ToolCalls: []scripted.ToolCall{{Name: toolOrders, Args: json.RawMessage(`{}`)}}},
	}}
}

// stack is everything the soak runs: the helpers on loopback and the
// server process.
type stack struct {
	work, home string
	url        string // the server's base URL
	debugAddr  string // its --debug-addr listener, as bound
	debug      *debugClient
	token      string // the runtime token
	issuer     *issuer
	cmd        *exec.Cmd
	exited     chan struct{}
	stops      []func()
}

// serveSettings are what the soak sets on the server beyond its stack.
type serveSettings struct {
	bin string
	// sessionRetention and dedupWindow set AGENTAUTH_SESSION_RETENTION
	// and AGENTAUTH_QUEUE_DEDUP_WINDOW; 0 leaves the server's default.
	sessionRetention, dedupWindow time.Duration
}

// listening is the server's start line (cmd/agentauth serve).
var listening = regexp.MustCompile(`^agentauth listening on (http://127\.0\.0\.1:[0-9]+) `)

// debugLogMsg is the message of the JSON log line serve writes once its
// --debug-addr listener is bound; its addr attribute is the bound address.
const debugLogMsg = "debug endpoints on"

// startTimeout bounds the wait for the server's start line.
const startTimeout = 30 * time.Second

// startStack starts the helpers, writes the bundle, starts `bin serve` on
// a free loopback port of a fresh home under a temporary work directory,
// with its debug endpoints on another (--debug-addr 127.0.0.1:0), and
// waits for its start line and the log line that names the debug address.
// close stops it all.
func startStack(ctx context.Context, set serveSettings) (_ *stack, err error) {
	bin := set.bin
	s := &stack{exited: make(chan struct{})}
	defer func() {
		if err != nil {
			s.close(true)
		}
	}()
	if s.work, err = os.MkdirTemp("", "agentauth-soak-"); err != nil {
		return nil, err
	}
	s.home = filepath.Join(s.work, "home")
	bundleDir := filepath.Join(s.work, "bundle")
	if err := os.MkdirAll(bundleDir, 0o700); err != nil {
		return nil, err
	}
	if s.issuer, err = newIssuer(); err != nil {
		return nil, err
	}
	model, err := scripted.New(soakScript(), nil)
	if err != nil {
		return nil, err
	}
	modelURL, err := model.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { _ = model.Close() })
	urls := map[string]string{}
	for _, svc := range []struct {
		name string
		h    http.Handler
	}{{"provider", fakeProvider()}, {"upstream", upstream()}, {"jwks", s.issuer}} {
		base, stop, err := loopback(svc.h)
		if err != nil {
			return nil, err
		}
		s.stops = append(s.stops, stop)
		urls[svc.name] = base
	}
	bundle := soakBundle(urls["provider"], urls["upstream"], modelURL)
	if err := os.WriteFile(filepath.Join(bundleDir, "soak.yaml"), []byte(bundle), 0o600); err != nil {
		return nil, err
	}
	s.token = "soak-runtime-" + randomHex(16)
	// Appended to by the server (stdout: JSON logs) and by the soak (its
	// stderr), so neither overwrites the other.
	serveLog, err := os.OpenFile(filepath.Join(s.work, "serve.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { serveLog.Close() })
	s.cmd = exec.Command(bin, "serve", "--bundle", bundleDir, "--home", s.home, "--addr", "127.0.0.1:0", "--debug-addr", "127.0.0.1:0")
	s.cmd.Env = append(os.Environ(),
		"AGENTAUTH_RUNTIME_TOKEN="+s.token,
		"AGENTAUTH_JWKS_URL="+urls["jwks"]+"/jwks", "AGENTAUTH_JWT_ISSUER="+jwtIssuer, "AGENTAUTH_JWT_AUDIENCE="+jwtAudience,
		"AGENTAUTH_TOOLS_ALLOW_PRIVATE_UPSTREAMS=1", "SOAK_CLIENT_SECRET=soak-secret-"+randomHex(8),
		// The load, not the limiter, is under test: REST, MCP and turn
		// calls per principal stay far below this.
		"AGENTAUTH_TOOL_RATE_LIMIT=100/s")
	for name, d := range map[string]time.Duration{"AGENTAUTH_SESSION_RETENTION": set.sessionRetention, "AGENTAUTH_QUEUE_DEDUP_WINDOW": set.dedupWindow} {
		if d > 0 {
			s.cmd.Env = append(s.cmd.Env, name+"="+d.String())
		}
	}
	stdout, err := s.cmd.StdoutPipe() // JSON logs, copied to serve.log
	if err != nil {
		return nil, err
	}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	// Its own process group: a Ctrl-C reaches the soak, which stops the
	// server after its summary.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", bin, err)
	}
	started, debugOn := make(chan string, 1), make(chan string, 1)
	// Both pipes are read to their end whatever they hold, so the server
	// never blocks on a write.
	var pipes sync.WaitGroup
	pipes.Go(func() { copyLines(stderr, serveLog, firstMatch(started, startURL)) })
	pipes.Go(func() { copyLines(stdout, serveLog, firstMatch(debugOn, debugAddr)) })
	// Wait reads no pipe before both copies are done (exec.Cmd's rule).
	go func() { pipes.Wait(); _ = s.cmd.Wait(); close(s.exited) }()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	for _, w := range []struct {
		what string
		got  chan string
		to   *string
	}{{"start line", started, &s.url}, {`"` + debugLogMsg + `" log line`, debugOn, &s.debugAddr}} {
		select {
		case *w.to = <-w.got:
		case <-s.exited:
			return nil, fmt.Errorf("%s serve exited at start (%v); its output: %s", bin, s.cmd.ProcessState, tail(filepath.Join(s.work, "serve.log")))
		case <-timer.C:
			return nil, fmt.Errorf("%s serve printed no %s within %s; its output: %s", bin, w.what, startTimeout, tail(filepath.Join(s.work, "serve.log")))
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	s.debug = newDebugClient(s.debugAddr)
	return s, nil
}

// maxLogLine is the longest line copyLines matches; a longer one is
// copied whole and not matched.
const maxLogLine = 64 << 10

// copyLines copies r to w line by line until r ends, and calls match with
// each line (without its newline) of at most maxLogLine bytes.
func copyLines(r io.Reader, w io.Writer, match func(string)) {
	br := bufio.NewReaderSize(r, maxLogLine)
	long := false
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			_, _ = w.Write(chunk)
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			long = true
			continue
		case err != nil:
			if len(chunk) > 0 && !long {
				match(string(chunk))
			}
			return
		}
		if !long {
			match(strings.TrimSuffix(string(chunk), "\n"))
		}
		long = false
	}
}

// firstMatch sends on found the first non-empty result of parse of a line.
func firstMatch(found chan<- string, parse func(string) string) func(string) {
	sent := false
	return func(line string) {
		if sent {
			return
		}
		if v := parse(line); v != "" {
			found <- v
			sent = true
		}
	}
}

// startURL is the base URL of serve's start line, "" for another line.
func startURL(line string) string {
	if m := listening.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// debugAddr is the bound loopback address of serve's debug log line, ""
// for another line (or an address off loopback, which the soak never
// calls).
func debugAddr(line string) string {
	if !strings.Contains(line, `"`+debugLogMsg+`"`) {
		return ""
	}
	var rec struct {
		Msg  string `json:"msg"`
		Addr string `json:"addr"`
	}
	if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != debugLogMsg {
		return ""
	}
	host, _, err := net.SplitHostPort(rec.Addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return ""
	}
	return rec.Addr
}

// tail is the end of a log file, for an error message.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// pid is the server's process id.
func (s *stack) pid() int { return s.cmd.Process.Pid }

// read reads the server's process, its home and its /debug/vars.
func (s *stack) read(ctx context.Context) (resources, error) {
	r, err := readResources(s.pid(), s.home)
	if err != nil {
		return r, err
	}
	v, err := s.debug.vars(ctx)
	if err != nil {
		return r, err
	}
	r.goroutines, r.heapInuse = v.Goroutines, v.HeapInuse
	return r, nil
}

// alive says whether the server still runs.
func (s *stack) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// close stops the server (SIGTERM, then SIGKILL after 10 s) and the
// helpers, and removes the work directory when remove is set.
func (s *stack) close(remove bool) {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(10 * time.Second)
		select {
		case <-s.exited:
		case <-timer.C:
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
		timer.Stop()
	}
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	if remove && s.work != "" {
		_ = os.RemoveAll(s.work)
	}
}
