package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// agentauthBin is the binary under test, built once by TestMain.
var agentauthBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentauth-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentauthBin = filepath.Join(dir, "agentauth")
	root, err := e2ekit.ModuleRoot()
	if err == nil {
		cmd := exec.Command("go", "build", "-o", agentauthBin, "./cmd/agentauth")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		err = cmd.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build agentauth:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// lockedBuffer collects a process's output (e2ekit's, one definition).
type lockedBuffer = e2ekit.SyncBuffer

// server is a running `agentauth serve`.
type server struct {
	URL, Home, Bundle, Token string
	Stdout, Stderr           *lockedBuffer
	cmd                      *exec.Cmd

	mu        sync.Mutex
	responses []recorded // every HTTP response body the test received
}

type recorded struct {
	what string
	body []byte
}

// freePort is e2ekit.FreePort, under the name this package's tests call.
func freePort(t *testing.T) int {
	t.Helper()
	return e2ekit.FreePort(t)
}

// startServer runs agentauth serve on addr with bundle files and waits for
// /healthz.
func startServer(t *testing.T, port int, home string, bundleFiles map[string]string, env ...string) *server {
	t.Helper()
	bdir := t.TempDir()
	for name, content := range bundleFiles {
		if err := os.WriteFile(filepath.Join(bdir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return serveBundle(t, port, home, bdir, env...)
}

// serveBundle runs agentauth serve on 127.0.0.1:port with the bundle
// directory bdir as it is (a git repository, say) and waits for /healthz.
func serveBundle(t *testing.T, port int, home, bdir string, env ...string) *server {
	t.Helper()
	s := &server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Home: home, Bundle: bdir, Token: "e2e-runtime-token-" + fmt.Sprint(time.Now().UnixNano()),
		Stdout: &lockedBuffer{}, Stderr: &lockedBuffer{}}
	s.cmd = exec.Command(agentauthBin, "serve", "--bundle", bdir, "--home", home, "--addr", fmt.Sprintf("127.0.0.1:%d", port))
	s.cmd.Env = append(append(os.Environ(), "AGENTAUTH_RUNTIME_TOKEN="+s.Token), env...)
	s.cmd.Stdout, s.cmd.Stderr = s.Stdout, s.Stderr
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.stop() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(s.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s
			}
		}
		if time.Now().After(deadline) || s.cmd.ProcessState != nil {
			t.Fatalf("agentauth did not start: %v\nstderr:\n%s\nstdout:\n%s", err, s.Stderr, s.Stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *server) stop() {
	if s.cmd.Process == nil || s.cmd.ProcessState != nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

func (s *server) record(what string, body []byte) {
	s.mu.Lock()
	s.responses = append(s.responses, recorded{what, body})
	s.mu.Unlock()
}

// request sends method path with the bearer (none when empty) and a JSON
// body, records the answer for the leak scan as what, and decodes it.
func (s *server) request(t *testing.T, method, path, bearer string, body any, timeout time.Duration) (int, http.Header, []byte, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d %q", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, resp.Header, raw, out
}

// call makes a runtime API call and decodes the JSON answer.
func (s *server) call(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	code, _, raw, out := s.request(t, method, path, s.Token, body, 70*time.Second)
	if out == nil {
		t.Fatalf("%s %s: %d, empty answer", method, path, code)
	}
	what := method + " " + path
	if out["status"] == "ready" {
		what = "ready"
	}
	s.record(what, raw)
	return code, out
}

type tokenReq struct {
	App      string
	Global   string
	User     string
	MinTTL   *int
	Instance string
}

func (s *server) token(t *testing.T, r tokenReq) map[string]any {
	t.Helper()
	body := map[string]any{
		"oauthAppRef": "OAuthApp/" + r.App,
		"turn": map[string]any{
			"auth":   map[string]any{"actor": map[string]any{"type": "user", "id": "demo:" + r.User}, "subjects": map[string]string{"global": r.Global, "user": r.User}},
			"origin": map[string]any{"connector": "e2e", "channel": "C-" + r.App},
			"resume": map[string]any{"swarmRef": "Swarm/default", "instanceKey": r.Instance, "agentName": "planner"},
		},
	}
	if r.MinTTL != nil {
		body["minTtlSeconds"] = *r.MinTTL
	}
	code, out := s.call(t, "POST", "/v1/oauth/token", body)
	if code != 200 {
		t.Fatalf("token: HTTP %d %v", code, out)
	}
	return out
}

// admin runs an agentauth admin command on the server's home.
func (s *server) admin(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(agentauthBin, append(args, "--home", s.Home)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("agentauth %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}
