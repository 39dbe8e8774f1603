package e2ekit_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// An upstream that answers each line with "echo: <line>" and keeps the
// connection open.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "echo: %s\n", sc.Text())
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestDropProxyCutsOpenConnectionsOnly(t *testing.T) {
	p := e2ekit.StartDropProxy(t, echoServer(t))
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	roundTrip := func(c net.Conn, r *bufio.Reader, msg string) (string, error) {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintln(c, msg); err != nil {
			return "", err
		}
		return r.ReadString('\n')
	}
	a, ra := dial()
	b, rb := dial()
	for _, c := range []struct {
		c net.Conn
		r *bufio.Reader
	}{{a, ra}, {b, rb}} {
		if got, err := roundTrip(c.c, c.r, "hi"); err != nil || got != "echo: hi\n" {
			t.Fatalf("through the proxy: %q %v", got, err)
		}
	}
	if n := p.DropAll(); n != 2 {
		t.Fatalf("DropAll closed %d connections, want 2", n)
	}
	a.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := ra.ReadString('\n'); err != io.EOF && !isClosed(err) {
		t.Fatalf("a dropped connection reads %v, want EOF or reset", err)
	}
	c, rc := dial()
	if got, err := roundTrip(c, rc, "again"); err != nil || got != "echo: again\n" {
		t.Fatalf("a new connection after the drop: %q %v", got, err)
	}
	if n := p.DropAll(); n != 1 || p.Accepted() != 3 {
		t.Fatalf("second drop: %d closed, %d accepted; want 1 and 3", n, p.Accepted())
	}
}

func isClosed(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset") || strings.Contains(err.Error(), "closed"))
}

func TestSDKHarnessControlServer(t *testing.T) {
	h := e2ekit.StartSDKHarness(t, e2ekit.SDKHarnessOptions{Upstream: echoServer(t)})
	post := func(url, body string, hdr map[string]string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	// Two deliveries to one connector, one to another.
	for i, c := range []string{"hook-a", "hook-b", "hook-a"} {
		if code, _ := post(h.HookURL(c), fmt.Sprintf(`{"n":%d}`, i), map[string]string{"x-agentauth-timestamp": "1700000000", "X-Agentauth-Signature": "v1=ab"}); code != 200 {
			t.Fatalf("delivery %d: HTTP %d", i, code)
		}
	}
	resp, err := http.Get(h.URL + "/deliveries?connector=hook-a")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Data []struct {
			Headers map[string]string `json:"headers"`
			Body    string            `json:"body"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if len(got.Data) != 2 || got.Data[0].Body != `{"n":0}` || got.Data[1].Body != `{"n":2}` ||
		got.Data[0].Headers["X-Agentauth-Timestamp"] != "1700000000" || got.Data[0].Headers["X-Agentauth-Signature"] != "v1=ab" {
		t.Fatalf("deliveries of hook-a: %+v", got)
	}
	if resp, _ := http.Get(h.URL + "/deliveries"); resp.StatusCode != 400 {
		t.Fatalf("deliveries without a connector: HTTP %d", resp.StatusCode)
	}

	// /drop closes what is open through the proxy.
	c, err := net.Dial("tcp", strings.TrimPrefix(h.ProxyBase, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintln(c, "hello")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "echo: hello\n" {
		t.Fatalf("through the proxy: %q %v", line, err)
	}
	if code, out := post(h.URL+"/drop", "", nil); code != 200 || out["dropped"] != float64(1) {
		t.Fatalf("drop: %d %v", code, out)
	}
	// A consent without a browser, or with a bad body.
	if code, out := post(h.URL+"/consent", `{"login":"x"}`, nil); code != 400 || out["error"] == "" {
		t.Fatalf("consent without a URL: %d %v", code, out)
	}
	if code, _ := post(h.URL+"/consent", `{"authorizationUrl":"http://127.0.0.1:1/auth","login":"x"}`, nil); code != 503 {
		t.Fatalf("consent without a browser: %d", code)
	}
	if c := h.Counts(); c.Deliveries != 3 || c.Drops != 1 || c.Dropped != 1 || c.Consents != 0 {
		t.Fatalf("counts: %+v", c)
	}
}

func TestTokenRecorderKeepsIssuedTokens(t *testing.T) {
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/token":
			if r.Header.Get("Authorization") == "" || r.Host != r.Header.Get("X-Want-Host") {
				http.Error(w, "the proxy lost a header", 400)
				return
			}
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			io.WriteString(w, `{"access_token":"at-0123456789abcdef","refresh_token":"rt-0123456789abcdef","id_token":"short","token_type":"Bearer"}`)
		default:
			io.WriteString(w, `{"access_token":"not-json-typed-0123456789"}`)
		}
	}))
	defer provider.Close()
	rec := e2ekit.StartTokenRecorder(t, "127.0.0.1:0", provider.URL)
	req, _ := http.NewRequest(http.MethodPost, rec.URL+"/token", strings.NewReader("grant_type=x"))
	req.SetBasicAuth("client", "secret")
	req.Header.Set("X-Want-Host", strings.TrimPrefix(rec.URL, "http://"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "at-0123456789abcdef") {
		t.Fatalf("through the recorder: %d %s", resp.StatusCode, body)
	}
	http.Get(rec.URL + "/other")
	got := rec.Tokens()
	if len(got) != 3 || got["at-0123456789abcdef"] != "access_token" || got["rt-0123456789abcdef"] != "refresh_token" || got["short"] != "id_token" {
		t.Fatalf("kept: %v", got)
	}
	leaks := rec.Leaks("log line with rt-0123456789abcdef and short")
	if len(leaks) != 1 || !strings.HasPrefix(leaks[0], "refresh_token (rt-012…)") {
		t.Fatalf("leaks: %v (a token under 16 bytes is not looked for)", leaks)
	}
}

func TestRunSDKSuite(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) e2ekit.SDKSuite {
		path := dir + "/" + name
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return e2ekit.SDKSuite{Name: name, Script: path, Installed: path}
	}
	ctx := context.Background()
	env := e2ekit.SDKEnv("AGENTAUTH_TEST_X=given")
	out, err := e2ekit.RunSDKSuite(ctx, t, dir, script("ok", `echo "x=$AGENTAUTH_TEST_X url=${AGENTAUTH_URL:-unset}"; printf 'no newline'`), env)
	if err != nil || out != "x=given url=unset\nno newline" {
		t.Fatalf("ok: %q %v", out, err)
	}
	if _, err := e2ekit.RunSDKSuite(ctx, t, dir, script("fails", "exit 3\n"), env); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("a failing suite: %v", err)
	}
	// A suite past its time is killed with its children (sleep holds the
	// output pipe open).
	tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := e2ekit.RunSDKSuite(tctx, t, dir, script("hangs", "sleep 60 & sleep 60\n"), env); err == nil || !strings.Contains(err.Error(), "did not end in time") {
		t.Fatalf("a hanging suite: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the hanging suite took %v to stop", d)
	}
	if err := e2ekit.SDKSuiteAvailable(dir, e2ekit.SDKSuite{Name: "x", Script: "missing.sh"}); err == nil {
		t.Fatal("a missing script is available")
	}
	if err := e2ekit.SDKSuiteAvailable(dir, e2ekit.SDKSuite{Name: "x", Script: dir + "/ok", Installed: dir + "/venv"}); err == nil || !strings.Contains(err.Error(), "make sdk-check") {
		t.Fatalf("a missing environment: %v", err)
	}
}
