package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// The addresses README.md's commands are written for: `make run`'s.
const (
	readmeAgentauthAddr = "127.0.0.1:8080"
	readmeProviderAddr  = "127.0.0.1:9090"
	readmeModelAddr     = "127.0.0.1:9292" // the scripted model's
)

// readmeSnippetMarker names the fenced block that follows it in README.md;
// the tests run such blocks as written.
var readmeSnippetMarker = regexp.MustCompile(`^<!-- test/e2e runs this: ([A-Za-z0-9._-]+) -->$`)

// readmeSnippets returns README.md's marked blocks by name (docSnippets).
func readmeSnippets(t *testing.T) map[string]string { return docSnippets(t, "README.md") }

// docSnippets returns the marked blocks of the document at doc (a path
// in the module) by name: each marker line is followed by an opening
// fence, and the block is everything up to the closing one.
func docSnippets(t *testing.T, doc string) map[string]string {
	t.Helper()
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	out := map[string]string{}
	for i := 0; i < len(lines); i++ {
		m := readmeSnippetMarker.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		name := m[1]
		if _, dup := out[name]; dup {
			t.Fatalf("%s:%d: a second block named %q", doc, i+1, name)
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("%s:%d: the marker of %q is not followed by a fenced block", doc, i+1, name)
		}
		var body []string
		j := i + 2
		for ; j < len(lines) && lines[j] != "```"; j++ {
			body = append(body, lines[j])
		}
		if j == len(lines) {
			t.Fatalf("%s:%d: the block %q is not closed", doc, i+1, name)
		}
		out[name] = strings.Join(body, "\n") + "\n"
		i = j
	}
	return out
}

// requireCommand skips the test when a command the README uses is not on
// PATH (fails it with E2E_REQUIRE=1).
func requireCommand(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv(e2ekit.RequireEnv) == "1" {
				t.Fatalf("%s is not on PATH (%s=1, so this is a failure, not a skip)", name, e2ekit.RequireEnv)
			}
			t.Skipf("%s is not on PATH", name)
		}
	}
}

// cleanEnv is the test's environment without anything that would steer
// agentauth, the provider or the README's commands.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AGENTAUTH_") || strings.HasPrefix(k, "PROVIDER_") ||
			strings.HasPrefix(k, "GOONDAN_") || k == "MCP_TOKEN" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// makeRun is scripts/run.sh — what `make run` runs — started on free ports.
type makeRun struct {
	Addr, ProviderAddr, ModelAddr, Home string
	Out                                 *lockedBuffer // its stdout and stderr: the banner, then serve's log
	cmd                                 *exec.Cmd
}

// startMakeRun runs scripts/run.sh as the Makefile does, with agentauth on
// 127.0.0.1:apiPort and the demo provider on providerPort, serving
// examples/bundle with the provider's address put in, the scripted model
// on a free port (the bundle's Model pointed at it), and waits for
// /healthz and the banner. The provider's demo clients are its defaults
// but for their redirect URIs, which name agentauth's address.
func startMakeRun(t *testing.T, apiPort, providerPort int) *makeRun {
	t.Helper()
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	providerDir, err := e2ekit.ProviderDir()
	if err != nil {
		t.Fatal(err)
	}
	r := &makeRun{Addr: fmt.Sprintf("127.0.0.1:%d", apiPort), ProviderAddr: fmt.Sprintf("127.0.0.1:%d", providerPort),
		ModelAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), Home: t.TempDir(), Out: &lockedBuffer{}}
	base := "http://" + r.Addr

	bundle := t.TempDir()
	files, err := filepath.Glob(filepath.Join(root, "examples", "bundle", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("examples/bundle: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.NewReplacer(readmeProviderAddr, r.ProviderAddr, readmeModelAddr, r.ModelAddr).Replace(string(b)))
		if err := os.WriteFile(filepath.Join(bundle, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clients, err := json.Marshal([]e2ekit.Client{
		{ClientID: "agentauth-demo", ClientSecret: "demo-secret",
			RedirectURIs: []string{base + "/oauth/callback/demo-global", base + "/oauth/callback/demo-user"},
			GrantTypes:   []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken}},
		{ClientID: "agentauth-agent", ClientSecret: "agent-secret", RedirectURIs: []string{base + "/unused"},
			GrantTypes: []string{e2ekit.GrantClientCredentials, e2ekit.GrantAuthorizationCode}, Scope: "profile.read agentauth:admin"},
		e2ekit.ConsoleClient(base + "/console/auth/callback"),
	})
	if err != nil {
		t.Fatal(err)
	}

	r.cmd = exec.Command("bash", filepath.Join(root, "scripts", "run.sh"))
	r.cmd.Dir = root
	r.cmd.Env = append(cleanEnv(), "BIN="+agentauthBin, "HOME_DIR="+r.Home, "BUNDLE="+bundle, "ADDR="+r.Addr,
		"PROVIDER_DIR="+providerDir, fmt.Sprintf("PROVIDER_PORT=%d", providerPort), "MODEL_ADDR="+r.ModelAddr,
		"PROVIDER_CLIENTS_JSON="+string(clients))
	r.cmd.Stdout, r.cmd.Stderr = r.Out, r.Out
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// The whole group: bash, the provider, serve (run.sh's trap stops
		// the provider too).
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			plog, _ := os.ReadFile(filepath.Join(r.Home, "provider.log"))
			t.Logf("scripts/run.sh output:\n%s\nprovider.log:\n%s", r.Out, plog)
		}
	})

	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			// The banner follows /healthz; its last line says ready.
			if resp.StatusCode == 200 && strings.Contains(r.Out.String(), bannerReady) {
				return r
			}
		}
		select {
		case <-exited:
			t.Fatalf("scripts/run.sh ended before agentauth answered /healthz")
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("agentauth did not answer /healthz within 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// bannerCurl runs the curl the banner line starting with prefix prints and
// returns the access token it got.
func (r *makeRun) bannerCurl(t *testing.T, prefix string) string {
	t.Helper()
	for line := range strings.SplitSeq(r.Out.String(), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		_, curl, ok := strings.Cut(line, ": curl ")
		if !ok {
			t.Fatalf("the banner line %q has no curl", line)
		}
		out, err := exec.Command("bash", "-c", "curl "+curl).Output()
		if err != nil {
			t.Fatalf("the banner's curl (%s): %v", line, err)
		}
		var tok struct {
			AccessToken string `json:"access_token"`
			ExpiresIn   int    `json:"expires_in"`
			Error       string `json:"error"`
		}
		if err := json.Unmarshal(out, &tok); err != nil || tok.AccessToken == "" || tok.ExpiresIn <= 0 {
			t.Fatalf("the banner's curl (%s) got %v (error %q)", line, err, tok.Error)
		}
		return tok.AccessToken
	}
	t.Fatalf("the make run banner has no line starting %q:\n%s", prefix, r.Out)
	return ""
}

// TestREADMEMCPFromMakeRun runs README.md's "MCP from `make run`" as
// written against scripts/run.sh (what `make run` runs, on free ports: the
// README's 127.0.0.1:8080 and :9090 are replaced by them and by nothing
// else): the banner names /mcp and its curl gets a token /mcp accepts
// (the tool routes' JWT it refuses, wrong_audience); the README's install
// block pins the SDK versions installed by `make mcp-client-deps`; its
// token command, then its Python and its TypeScript script, each on the
// official SDK, list the tools and call whoami, print the consent link,
// which Chromium approves as alice on the provider's pages, and after
// Enter print alice's profile (the grant revoked between them, so each
// sees the link); the desktop client JSON, with the token put in, opens
// an MCP session and lists the tools.
func TestREADMEMCPFromMakeRun(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	requireCommand(t, "bash", "curl", "python3", "node")
	kinds := e2ekit.MCPClientKinds(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	snippets := readmeSnippets(t)
	for _, name := range []string{"mcp-token", "mcp-install", "mcp_whoami.py", "mcp-python", "mcp_whoami.mjs", "mcp-typescript", "mcp-client-config"} {
		if snippets[name] == "" {
			t.Fatalf("README.md has no block marked %q", name)
		}
	}
	for _, name := range []string{"mcp-token", "mcp_whoami.py", "mcp_whoami.mjs", "mcp-client-config"} {
		if !strings.Contains(snippets[name], readmeAgentauthAddr) {
			t.Fatalf("README.md's %q does not name %s, so it would not reach the server under test:\n%s", name, readmeAgentauthAddr, snippets[name])
		}
	}
	if !strings.Contains(snippets["mcp-token"], readmeProviderAddr) {
		t.Fatalf("README.md's mcp-token does not name %s:\n%s", readmeProviderAddr, snippets["mcp-token"])
	}

	r := startMakeRun(t, freePort(t), freePort(t))
	asWritten := strings.NewReplacer(readmeAgentauthAddr, r.Addr, readmeProviderAddr, r.ProviderAddr).Replace
	resource := "http://" + r.Addr + "/mcp"
	var tokens []string // for the leak scan

	t.Run("the banner's MCP recipe", func(t *testing.T) {
		if !strings.Contains(r.Out.String(), "MCP server: "+resource+" ") {
			t.Fatalf("the banner does not name %s:\n%s", resource, r.Out)
		}
		tok := r.bannerCurl(t, "agent JWT for MCP")
		tokens = append(tokens, tok)
		raw := &rawMCP{url: resource, token: tok}
		raw.open(t)
		raw.request(t, "tools/list", map[string]any{})

		rest := r.bannerCurl(t, "agent JWT for the tool routes")
		tokens = append(tokens, rest)
		code, body := mcpInitialize(t, resource, rest)
		if code != 401 || !strings.Contains(body, `"wrong_audience"`) {
			t.Fatalf("the tool routes' JWT at /mcp: %d %s", code, body)
		}
	})

	// The SDKs' tool routes take the JWT README.md's sdk-agent-token
	// block exports: the tool routes accept it.
	t.Run("the SDKs' agent JWT", func(t *testing.T) {
		block := snippets["sdk-agent-token"]
		if block == "" || !strings.Contains(block, readmeProviderAddr) {
			t.Fatalf("README.md's sdk-agent-token block is missing or does not name %s:\n%s", readmeProviderAddr, block)
		}
		script := "set -euo pipefail\n" + asWritten(block) + `curl -sS -H "Authorization: Bearer $AGENTAUTH_AGENT_TOKEN" http://` + r.Addr + "/v1/agents/tools\n"
		out, err := exec.CommandContext(ctx, "bash", "-c", script).CombinedOutput()
		if err != nil || !strings.Contains(string(out), `"name":"whoami"`) {
			t.Fatalf("the exported JWT at /v1/agents/tools: %v\n%s", err, out)
		}
	})

	// The install block names what the tests run: the SDKs `make
	// mcp-client-deps` installed.
	var python string
	for _, k := range kinds {
		if k.Name == "python" {
			python = k.Argv[0]
		}
	}
	venv := filepath.Dir(filepath.Dir(python))
	out, err := exec.Command(python, "-c", "import importlib.metadata as m; print(m.version('mcp'))").Output()
	if err != nil {
		t.Fatalf("the mcp version in %s: %v", venv, err)
	}
	pyVersion := strings.TrimSpace(string(out))
	root, _ := e2ekit.ModuleRoot()
	nodeModules := filepath.Join(root, "test", "e2e", "mcpclients", "node_modules")
	var pkg struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(nodeModules, "@modelcontextprotocol", "sdk", "package.json")); err != nil || json.Unmarshal(b, &pkg) != nil {
		t.Fatalf("the TypeScript SDK's package.json: %v", err)
	}
	for _, pin := range []string{"mcp==" + pyVersion, "@modelcontextprotocol/sdk@" + pkg.Version} {
		if !strings.Contains(snippets["mcp-install"], pin) {
			t.Fatalf("README.md's install block does not pin %s (what the tests run):\n%s", pin, snippets["mcp-install"])
		}
	}

	// The README's directory: its install block's result, as links to the
	// pinned installs.
	work := t.TempDir()
	for link, target := range map[string]string{".venv": venv, "node_modules": nodeModules} {
		if err := os.Symlink(target, filepath.Join(work, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"mcp_whoami.py", "mcp_whoami.mjs"} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(asWritten(snippets[name])), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	browser := e2ekit.StartBrowser(t)
	api := &server{URL: "http://" + r.Addr} // the runtime routes, for the revocation
	tokenFile, err := os.ReadFile(filepath.Join(r.Home, "runtime-token"))
	if err != nil {
		t.Fatal(err)
	}
	api.Token = strings.TrimSpace(string(tokenFile))

	for _, run := range []struct{ name, block string }{{"python", "mcp-python"}, {"typescript", "mcp-typescript"}} {
		t.Run(run.name, func(t *testing.T) {
			script := "set -euo pipefail\n" + asWritten(snippets["mcp-token"]) + asWritten(snippets[run.block])
			got := runReadmeClient(ctx, t, work, script, "http://"+r.ProviderAddr+"/auth?", func(link string) {
				res, err := browser.Authorize(ctx, link, "alice")
				if err != nil || !strings.Contains(res.BodyText, "Connected") {
					t.Fatalf("consent in Chromium: %v %+v", err, res)
				}
			})
			if got.consents != 1 {
				t.Fatalf("%d consent links, want 1:\n%s", got.consents, got.stdout)
			}
			if !slices.Contains(got.tools, "whoami") || !slices.Contains(got.tools, "search_skills") {
				t.Fatalf("tools: %v\n%s", got.tools, got.stdout)
			}
			if got.whoami["sub"] != "alice" || got.whoami["name"] != "Alice" {
				t.Fatalf("whoami: %v\n%s", got.whoami, got.stdout)
			}
			// The next client meets the consent again.
			code, out := api.call(t, "POST", "/v1/oauth/revoke", map[string]any{"oauthAppRef": "OAuthApp/demo-user", "subject": "demo:user:alice"})
			if code != 200 || out["revoked"] != true {
				t.Fatalf("revoke: %d %v", code, out)
			}
		})
	}

	t.Run("the desktop client config", func(t *testing.T) {
		var cfg struct {
			MCPServers map[string]struct {
				Type    string            `json:"type"`
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal([]byte(asWritten(snippets["mcp-client-config"])), &cfg); err != nil {
			t.Fatalf("the config is not JSON: %v", err)
		}
		entry, ok := cfg.MCPServers["agentauth"]
		if len(cfg.MCPServers) != 1 || !ok || entry.Type != "http" || entry.URL != resource {
			t.Fatalf("the config's server: %+v", cfg.MCPServers)
		}
		auth, ok := strings.CutPrefix(entry.Headers["Authorization"], "Bearer ")
		if len(entry.Headers) != 1 || !ok || auth != "<MCP_TOKEN>" {
			t.Fatalf("the config's headers: %v", entry.Headers)
		}
		tok := r.bannerCurl(t, "agent JWT for MCP")
		tokens = append(tokens, tok)
		raw := &rawMCP{url: entry.URL, token: strings.Replace(auth, "<MCP_TOKEN>", tok, 1)}
		raw.open(t)
		raw.request(t, "tools/list", map[string]any{})
	})

	for _, tok := range tokens {
		if strings.Contains(r.Out.String(), tok) {
			t.Errorf("a JWT (%.8s…) is in the output of scripts/run.sh (serve's log)", tok)
		}
	}
}

// mcpInitialize posts an MCP initialize with the bearer token and returns
// the status and body.
func mcpInitialize(t *testing.T, url, token string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"agentauth-e2e","version":"0"}}}`
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// readmeClientRun is what one of the README's client scripts printed.
type readmeClientRun struct {
	stdout   string
	tools    []string
	consents int
	whoami   map[string]any
}

// consentLink finds a consent link in a line of the scripts' output.
var consentLink = regexp.MustCompile(`https?://\S+`)

// runReadmeClient runs script (bash) in dir as a user would in a
// terminal: each consent link it prints (a URL starting linkPrefix) is
// given to consent, then Enter is pressed; it must end by itself, with
// status 0, having printed the tools and whoami's answer.
func runReadmeClient(ctx context.Context, t *testing.T, dir, script, linkPrefix string, consent func(link string)) readmeClientRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }() // anything left over
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	var got readmeClientRun
	var all strings.Builder
	for done := false; !done; {
		select {
		case line, ok := <-lines:
			if !ok {
				done = true
				break
			}
			all.WriteString(line + "\n")
			if names, ok := strings.CutPrefix(line, "tools: "); ok {
				got.tools = strings.Split(names, ", ")
			}
			if _, answer, ok := strings.Cut(line, "whoami: "); ok {
				if err := json.Unmarshal([]byte(answer), &got.whoami); err != nil {
					t.Fatalf("whoami printed %q: %v", answer, err)
				}
			}
			for _, link := range consentLink.FindAllString(line, -1) {
				if strings.HasPrefix(link, linkPrefix) {
					got.consents++
					consent(link)
					if _, err := io.WriteString(stdin, "\n"); err != nil {
						t.Fatalf("press Enter: %v", err)
					}
				}
			}
		case <-ctx.Done():
			t.Fatalf("the script did not end within 2 minutes; it printed:\n%s\nstderr:\n%s", all.String(), stderr)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the script failed: %v; it printed:\n%s\nstderr:\n%s", err, all.String(), stderr)
	}
	got.stdout = all.String()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Logf("the script's stderr: %.600s", s)
	}
	return got
}
