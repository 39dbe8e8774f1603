package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// readmeCommands are the `bin/agentauth <prefix>…` commands of README.md's
// sh blocks, as argument lists: continuation lines joined, comments cut,
// quotes read as sh reads them.
func readmeCommands(t *testing.T, prefix string) [][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	blocks := strings.Split(string(raw), "```sh\n")
	for _, b := range blocks[1:] {
		b, _, _ = strings.Cut(b, "```")
		for _, line := range strings.Split(strings.ReplaceAll(b, "\\\n", " "), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "bin/agentauth ") {
				continue
			}
			words := shellWords(t, line)
			if len(words) > 1 && words[0] == "bin/agentauth" && strings.HasPrefix(strings.Join(words[1:], " "), prefix) {
				out = append(out, words[1:])
			}
		}
	}
	return out
}

// shellWords splits a line as sh does for the README's commands: spaces
// separate words, '…' and "…" quote, # starts a comment.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case r == '#' && !in:
			return words
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("an open quote in README line %q", line)
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// TestREADMESendDrivesTheDemoAgent (issue 18.3): the README's turn
// walkthrough, with its own commands, on serve's app over the example
// bundle (the scripted model on a free port): `send` with the README's
// user and claims makes the demo agent call whoami — the access policy
// shows it to those claims — which parks on alice's consent, and
// `instances events` shows the consent link. (Without claims the policy
// hid whoami and the agent answered that the tool was not in its
// catalog.)
func TestREADMESendDrivesTheDemoAgent(t *testing.T) {
	ctx := context.Background()
	sends := readmeCommands(t, "send ")
	events := readmeCommands(t, "instances events ")
	if len(sends) == 0 || len(events) == 0 {
		t.Fatalf("README.md shows no send (%d) or instances events (%d) command", len(sends), len(events))
	}

	sm, err := scripted.New(scripted.DemoScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	modelURL, err := sm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	bundleDir := t.TempDir()
	example := filepath.Join("..", "..", "examples", "bundle")
	files, err := filepath.Glob(filepath.Join(example, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("example bundle: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "http://"+scripted.DemoAddr+"/v1", modelURL+"/v1"))
		if err := os.WriteFile(filepath.Join(bundleDir, filepath.Base(f)), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "secrets", "demo-oidc"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "secrets", "demo-oidc", "clientSecret"), []byte("demo-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := homeConfig(t, home)
	cfg.BundleDir = bundleDir
	tok, _, err := runtimeToken(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h, err := openHome(ctx, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	cfg.PublicURL = "http://" + srv.Listener.Addr().String()
	a, err := app.Build(ctx, cfg, app.FromEmbedded(h, cfg.LocalSecrets()), nil, app.Options{RuntimeAuth: httpapi.BearerToken{Token: tok}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(context.Background()) })
	srv.Config.Handler = a.Handler()
	srv.Start()
	t.Cleanup(srv.Close)
	at := []string{"--url", srv.URL, "--home", home}
	withServer := func(words []string, n int) []string { // the flags go before the message
		return append(append(append([]string{}, words[:n]...), at...), words[n:]...)
	}

	send := sends[0]
	out, errOut, err := runCmd(t, withServer(send, 1)...)
	if err != nil || !strings.HasPrefix(out, "ev-") || !strings.Contains(errOut, "queued for default/thread-1/assistant") {
		t.Fatalf("%v: %v %q %q", send, err, out, errOut)
	}
	// The worker's part: every queued event to the engine.
	queued, err := h.Queue.List(ctx)
	if err != nil || len(queued) != 1 {
		t.Fatalf("queued %d events: %v", len(queued), err)
	}
	if err := a.Turns.Engine.Handle(ctx, queued[0]); err != nil {
		t.Fatal(err)
	}

	var shown []struct {
		Type string
		Data map[string]any
	}
	out, errOut, err = runCmd(t, withServer(events[0], 2)...)
	if err != nil || !strings.HasSuffix(errOut, "(parked)\n") {
		t.Fatalf("%v: %v %q", events[0], err, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Type string
			Data map[string]any
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		shown = append(shown, e)
	}
	var called, parked bool
	for _, e := range shown {
		called = called || e.Type == "tool.called" && e.Data["tool"] == "whoami"
		parked = parked || e.Type == "turn.parked" && e.Data["tool"] == "whoami" &&
			strings.HasPrefix(e.Data["authorizationUrl"].(string), "http://127.0.0.1:9090/auth?")
	}
	if !called || !parked || strings.Contains(out, "NOT_IN_CATALOG") || strings.Contains(out, "NotInCatalog") {
		t.Fatalf("the demo agent did not park on whoami:\n%s", out)
	}
	// The turn acts for the README's user, with its claims.
	pending, err := a.OAuth.PendingBlock(ctx, domain.ResumeTarget{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: "thread-1", AgentName: "assistant"})
	if err != nil || len(pending.Items) != 1 {
		t.Fatalf("pending consents: %+v %v", pending, err)
	}
}
