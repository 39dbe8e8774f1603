package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// The make run banner's lines (scripts/run.sh): none may be printed
// before serve answers. bannerReady starts its last.
var bannerLines = []string{"runtime token (Authorization: Bearer", "demo OpenID provider:", "agent JWT for the tool routes:",
	"MCP server:", "agent JWT for MCP", "operator console:", "scripted model (a fixed script", bannerReady}

const bannerReady = "ready: agentauth on http://"

// makeCmd is `make <args>` in the module root, in its own process group,
// on the test's environment without AGENTAUTH_* and the like.
func makeCmd(t *testing.T, out *lockedBuffer, args ...string) *exec.Cmd {
	t.Helper()
	requireCommand(t, "make", "bash")
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", root}, args...)...)
	cmd.Env = cleanEnv()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// runBounded runs cmd to its end within limit (its whole process group
// is killed at the limit) and returns its exit status.
func runBounded(t *testing.T, cmd *exec.Cmd, limit time.Duration, out *lockedBuffer) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(limit):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("make %v did not end within %s:\n%s", cmd.Args[4:], limit, out)
	}
	return cmd.ProcessState.ExitCode()
}

// Issue 18.7: `make build` says it is building — the first build takes
// minutes and was silent — and how long it took.
func TestMakeBuildSaysWhatItDoes(t *testing.T) {
	out := &lockedBuffer{}
	bin := filepath.Join(t.TempDir(), "agentauth")
	if code := runBounded(t, makeCmd(t, out, "build", "BIN="+bin), 10*time.Minute, out); code != 0 {
		t.Fatalf("make build: exit %d\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 || lines[0] != "building agentauth (first build takes a few minutes)…" ||
		!regexp.MustCompile(`^built `+regexp.QuoteMeta(bin)+` in [0-9]+ s$`).MatchString(lines[len(lines)-1]) {
		t.Fatalf("make build printed:\n%s", out)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no binary: %v", err)
	}
}

// Issue 18.7: a bundle serve refuses ends make run with serve's error and
// a non-zero status, and prints no banner line: nothing looks like a
// start. Nothing is left listening.
func TestMakeRunRefusedBundlePrintsNoBanner(t *testing.T) {
	e2ekit.RequireProvider(t)
	bundle := t.TempDir()
	if err := os.WriteFile(filepath.Join(bundle, "apps.yaml"), []byte(`apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: broken}
spec: {provider: demo, flo: authorizationCode}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, providerPort := fmt.Sprintf("127.0.0.1:%d", freePort(t)), freePort(t)
	out := &lockedBuffer{}
	cmd := makeCmd(t, out, "run", "BIN="+filepath.Join(t.TempDir(), "agentauth"), "HOME_DIR="+t.TempDir(), "BUNDLE="+bundle,
		"ADDR="+addr, fmt.Sprintf("PROVIDER_PORT=%d", providerPort), "MODEL_ADDR=")
	code := runBounded(t, cmd, 10*time.Minute, out)
	got := out.String()
	if code == 0 || !strings.Contains(got, "apps.yaml:4: OAuthApp/broken: spec.flo: unknown field; did you mean flow?") ||
		!strings.Contains(got, "agentauth serve did not start") {
		t.Fatalf("make run with a refused bundle: exit %d\n%s", code, got)
	}
	for _, line := range bannerLines {
		if strings.Contains(got, line) {
			t.Errorf("make run printed the banner line %q for a bundle serve refused:\n%s", line, got)
		}
	}
	for _, a := range []string{addr, fmt.Sprintf("127.0.0.1:%d", providerPort)} {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("something still listens on %s after make run ended", a)
		}
	}
}

// Issue 18.7: make run prints its banner only once serve answers: when
// the banner's first line appears, /healthz answers already (it printed
// the banner before starting serve). Interrupted, it stops serve, the
// provider and the scripted model.
func TestMakeRunBannerOnlyOnceServing(t *testing.T) {
	e2ekit.RequireProvider(t)
	root, err := e2ekit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	addr, providerPort, modelAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t)), freePort(t), fmt.Sprintf("127.0.0.1:%d", freePort(t))
	bundle := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(root, "examples", "bundle", "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.NewReplacer(readmeProviderAddr, fmt.Sprintf("127.0.0.1:%d", providerPort), readmeModelAddr, modelAddr).Replace(string(b)))
		if err := os.WriteFile(filepath.Join(bundle, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out := &lockedBuffer{}
	cmd := makeCmd(t, out, "run", "BIN="+filepath.Join(t.TempDir(), "agentauth"), "HOME_DIR="+t.TempDir(), "BUNDLE="+bundle,
		"ADDR="+addr, fmt.Sprintf("PROVIDER_PORT=%d", providerPort), "MODEL_ADDR="+modelAddr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})

	healthy := func() bool {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get("http://" + addr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}
	deadline := time.Now().Add(10 * time.Minute) // a cold build of cmd/agentauth takes minutes
	for !strings.Contains(out.String(), bannerLines[0]) {
		select {
		case <-exited:
			t.Fatalf("make run ended before its banner:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no banner within 10 minutes:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !healthy() {
		t.Fatalf("the banner was printed before agentauth answered /healthz:\n%s", out)
	}
	// Open it in a browser, says the banner: the page is there.
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("Accept", "text/html")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET / in a browser: %v %v", err, resp)
	} else {
		resp.Body.Close()
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), bannerReady); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the banner is incomplete:\n%s", out)
		}
	}
	for _, line := range bannerLines {
		if strings.Count(out.String(), line) != 1 {
			t.Errorf("the banner line %q is printed %d times:\n%s", line, strings.Count(out.String(), line), out)
		}
	}

	// Ctrl-C reaches the whole foreground group.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("make run did not stop within 30 s of Ctrl-C:\n%s", out)
	}
	for _, a := range []string{addr, fmt.Sprintf("127.0.0.1:%d", providerPort), modelAddr} {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("something still listens on %s after make run stopped", a)
		}
	}
}

// Issue 18.7: make reset says what it deletes and deletes the demo home;
// it refuses a directory make run did not make, /, the repository, and a
// home a running serve holds.
func TestMakeReset(t *testing.T) {
	demoHome := func(t *testing.T) string {
		home := filepath.Join(t.TempDir(), "home")
		for path, data := range map[string]string{
			"secrets/demo-oidc/clientSecret": "demo-secret\n",
			"runtime-token":                  "aat_test\n",
			"provider.log":                   "",
			"turns/x/journal":                "",
		} {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(home, path)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, path), []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return home
	}
	reset := func(t *testing.T, home string) (int, string) {
		t.Helper()
		out := &lockedBuffer{}
		code := runBounded(t, makeCmd(t, out, "reset", "HOME_DIR="+home), time.Minute, out)
		return code, out.String()
	}

	t.Run("a demo home", func(t *testing.T) {
		home := demoHome(t)
		code, out := reset(t, home)
		real, _ := filepath.EvalSymlinks(filepath.Dir(home))
		for _, want := range []string{"make reset deletes the demo home " + filepath.Join(real, "home") + ":",
			"  runtime-token — the runtime token", "  provider.log — a log", "  turns — agent instances and their turns",
			"  secrets — the demo client's secret", "deleted;"} {
			if !strings.Contains(out, want) {
				t.Errorf("the output lacks %q:\n%s", want, out)
			}
		}
		if _, err := os.Stat(home); code != 0 || !os.IsNotExist(err) {
			t.Fatalf("exit %d, home %v:\n%s", code, err, out)
		}
		if code, out := reset(t, home); code != 0 || !strings.Contains(out, "does not exist: nothing to delete") {
			t.Fatalf("again: exit %d\n%s", code, out)
		}
	})

	refused := func(t *testing.T, home, why string) {
		t.Helper()
		code, out := reset(t, home)
		if code == 0 || !strings.Contains(out, "make reset: not deleting") || !strings.Contains(out, why) {
			t.Fatalf("exit %d, want a refusal saying %q:\n%s", code, why, out)
		}
	}
	t.Run("not made by make run", func(t *testing.T) {
		home := t.TempDir()
		if err := os.WriteFile(filepath.Join(home, "runtime-token"), []byte("aat_x\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		refused(t, home, "has no secrets/demo-oidc/clientSecret")
		if _, err := os.Stat(filepath.Join(home, "runtime-token")); err != nil {
			t.Fatalf("the refused directory lost a file: %v", err)
		}
	})
	t.Run("the root", func(t *testing.T) { refused(t, "/", "not a demo home") })
	t.Run("the repository", func(t *testing.T) { refused(t, ".", "not a demo home") })
	t.Run("a link to a demo home", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "link")
		if err := os.Symlink(demoHome(t), link); err != nil {
			t.Fatal(err)
		}
		refused(t, link, "symbolic link")
	})
	t.Run("a home serve runs on", func(t *testing.T) {
		home := demoHome(t)
		srv := startServer(t, freePort(t), home, map[string]string{"b.yaml": ""})
		refused(t, home, "an agentauth serve is running on it")
		srv.stop()
		if code, out := reset(t, home); code != 0 {
			t.Fatalf("after serve stopped: exit %d\n%s", code, out)
		}
	})
}
