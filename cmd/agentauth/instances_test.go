package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/turnsapi"
	"github.com/agentauth/agentauth/shared/testkit/turntest"
)

// turnServer serves the turn routes over a test plane, with the runtime
// token in a home as `agentauth serve` leaves it.
func turnServer(t *testing.T, script ...turntest.Answer) (*turntest.Plane, string, string) {
	t.Helper()
	const tok = "cli-test-runtime-token"
	p := turntest.New(t, script...)
	api, err := turnsapi.New(turnsapi.Config{Turns: p.Turns, Caller: httpapi.BearerToken{Token: domain.NewSecret(tok)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "runtime-token"), []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.RuntimeToken, "")
	return p, srv.URL, home
}

func TestSendAndInstances(t *testing.T) {
	p, url, home := turnServer(t, turntest.Say("hello alice"), turntest.Say("hello again"))
	at := []string{"--url", url, "--home", home}
	cmd := func(args ...string) string {
		t.Helper()
		out, _, err := runCmd(t, append(args, at...)...)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return out
	}
	target := []string{"--swarm", "support", "--instance", "1712345678.000100", "--agent", "assistant"}

	out, errOut, err := runCmd(t, append(append([]string{"send", "--swarm", "support", "--instance", "1712345678.000100", "--user", "demo:user:alice"}, at...), "who am I?")...)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	queued := p.Queue.Pending()
	if len(queued) != 1 || queued[0].ID != id || !strings.HasPrefix(id, "ev-") || !strings.Contains(errOut, "support/1712345678.000100/assistant") {
		t.Fatalf("send printed %q %q; queued %+v", out, errOut, queued)
	}
	ev := queued[0]
	var in struct{ Type, Text string }
	_ = json.Unmarshal([]byte(ev.Input), &in)
	if in.Type != "user.input" || in.Text != "who am I?" || ev.Auth.Actor == nil || ev.Auth.Actor.ID != "demo:user:alice" || ev.Auth.Subjects.User != "demo:user:alice" || ev.Origin["via"] != "cli" || ev.Origin["connector"] != nil {
		t.Fatalf("queued %+v (input %+v)", ev, in)
	}
	p.Deliver(t)

	// --agent picks the agent; a key of "." is escaped so it survives the path.
	out, _, err = runCmd(t, append(append([]string{"send", "--swarm", "support", "--instance", ".", "--agent", "billing"}, at...), "invoice")...)
	if err != nil {
		t.Fatal(err)
	}
	if q := p.Queue.Pending(); len(q) != 1 || q[0].AgentName != "billing" || q[0].InstanceKey != "." || q[0].Auth.Actor != nil {
		t.Fatalf("queued %+v", q)
	}
	p.Deliver(t)

	list := cmd("instances", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "SWARM") || !strings.Contains(list, "1712345678.000100  assistant") || !strings.Contains(list, "billing") {
		t.Fatalf("list:\n%s", list)
	}
	if only := cmd("instances", "list", "--agent", "billing"); strings.Contains(only, "1712345678") || !strings.Contains(only, "billing") {
		t.Fatalf("list --agent billing:\n%s", only)
	}

	var inspected struct {
		Status      string
		RecentTurns []struct{ Status, FinalAnswer string }
	}
	if err := json.Unmarshal([]byte(cmd(append([]string{"instances", "inspect"}, target...)...)), &inspected); err != nil {
		t.Fatal(err)
	}
	if inspected.Status != "active" || len(inspected.RecentTurns) != 1 || inspected.RecentTurns[0].FinalAnswer != "hello alice" {
		t.Fatalf("inspect %+v", inspected)
	}

	for _, step := range []struct{ args []string }{
		{[]string{"instances", "pause"}},
		{[]string{"instances", "resume"}},
		{[]string{"instances", "terminate", "--reason", "done"}},
	} {
		if out := cmd(append(step.args, target...)...); !strings.HasPrefix(out, "support/1712345678.000100/assistant: ") {
			t.Fatalf("%v: %q", step.args, out)
		}
	}
	if out := cmd(append([]string{"instances", "inspect"}, target...)...); !strings.Contains(out, `"status": "terminated"`) {
		t.Fatalf("after terminate: %s", out)
	}
	_, _, err = runCmd(t, append(append([]string{"instances", "pause"}, target...), at...)...)
	if err == nil || !strings.Contains(err.Error(), "409 instanceTerminated") {
		t.Fatalf("pause of a terminated instance: %v", err)
	}
	if out := cmd(append([]string{"instances", "delete"}, target...)...); !strings.Contains(out, "OAuth grants are kept") {
		t.Fatalf("delete: %q", out)
	}
	_, _, err = runCmd(t, append(append([]string{"instances", "inspect"}, target...), at...)...)
	if err == nil || !strings.Contains(err.Error(), "404 notFound") {
		t.Fatalf("inspect after delete: %v", err)
	}
}

func TestSendErrors(t *testing.T) {
	_, url, home := turnServer(t)
	for _, tc := range []struct {
		name  string
		args  []string
		usage bool
		says  string
	}{
		{"no text", []string{"send", "--swarm", "support", "--instance", "k"}, true, "the message"},
		{"flags after the text", []string{"send", "--swarm", "support", "hi", "--instance", "k"}, true, "after the flags"},
		{"no swarm", []string{"send", "--instance", "k", "hi"}, true, "--swarm"},
		{"unknown swarm", []string{"send", "--swarm", "sales", "--instance", "k", "--url", url, "--home", home, "hi"}, false, `404 notFound: no swarm "sales"`},
		{"agent not in the swarm", []string{"send", "--swarm", "support", "--instance", "k", "--agent", "planner", "--url", url, "--home", home, "hi"}, false, "400 invalidRequest"},
		{"bad url", []string{"send", "--swarm", "support", "--instance", "k", "--url", "127.0.0.1:8080", "--home", home, "hi"}, true, "--url"},
		{"no server", []string{"send", "--swarm", "support", "--instance", "k", "--url", "http://127.0.0.1:1", "--home", home, "hi"}, false, "agentauth serve"},
		{"instances without agent", []string{"instances", "pause", "--swarm", "support", "--instance", "k"}, true, "--agent"},
		{"unknown instances command", []string{"instances", "restart"}, true, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := runCmd(t, tc.args...)
			var ue usageError
			if err == nil || asUsage(err, &ue) != tc.usage || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v (usage error: %v), want one saying %q", err, err != nil && asUsage(err, &ue), tc.says)
			}
		})
	}
}

func TestClientToken(t *testing.T) {
	_, url, home := turnServer(t)
	send := []string{"send", "--swarm", "support", "--instance", "k", "--url", url}

	// A wrong token is the server's 401.
	t.Setenv(config.RuntimeToken, "not-the-token")
	if _, _, err := runCmd(t, append(send, "--home", home, "hi")...); err == nil || !strings.Contains(err.Error(), "401 unauthenticated") {
		t.Fatalf("wrong token: %v", err)
	}
	// No token anywhere: an error, and none is created (the server would
	// not know it).
	t.Setenv(config.RuntimeToken, "")
	empty := t.TempDir()
	if _, _, err := runCmd(t, append(send, "--home", empty, "hi")...); err == nil || !strings.Contains(err.Error(), "no runtime token") {
		t.Fatalf("no token: %v", err)
	}
	if _, err := os.Stat(filepath.Join(empty, "runtime-token")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a token was created: %v", err)
	}
}
