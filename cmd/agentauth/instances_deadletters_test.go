package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/queueworker"
	"github.com/agentauth/agentauth/shared/turn"
)

// deadLetterHome is a home whose turn worker gave up on events, one per
// instance key given (the handler always fails).
func deadLetterHome(t *testing.T, keys ...string) string {
	t.Helper()
	ctx := context.Background()
	t.Setenv(config.Table, "")
	home := t.TempDir()
	h, err := openHome(ctx, homeConfig(t, home), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		ev := domain.Event{ID: "ev-" + k, SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "support"}, InstanceKey: k, AgentName: "assistant",
			Input: `{"type":"user.input","text":"hi"}`}
		if err := h.Queue.Enqueue(ctx, ev); err != nil {
			t.Fatal(err)
		}
		w := &queueworker.Worker{Queue: h.Queue, Dir: h.WorkerDir, MaxAttempts: 1,
			KeyOf:  func(e domain.Event) turn.InstanceKey { return turn.InstanceKey{Key: e.InstanceKey} },
			Handle: func(context.Context, domain.Event) error { return errors.New("model unreachable:\n503") }}
		if err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return home
}

func TestDeadLettersAndRedrive(t *testing.T) {
	home := deadLetterHome(t, "thread-1", "thread-2", "thread-3")
	at := []string{"--home", home}

	out, errOut, err := runCmd(t, append([]string{"instances", "dead-letters"}, at...)...)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "support/thread-1/assistant") ||
		!strings.Contains(lines[1], "ev-thread-1") || !strings.Contains(lines[1], "model unreachable: 503") || !strings.Contains(lines[3], "ev-thread-3") {
		t.Fatalf("dead-letters table:\n%s", out)
	}
	if strings.TrimSpace(errOut) != "3 dead letters, oldest first" {
		t.Fatalf("stderr %q", errOut)
	}

	out, errOut, err = runCmd(t, append([]string{"instances", "dead-letters", "--json", "-n", "2"}, at...)...)
	if err != nil {
		t.Fatal(err)
	}
	var views []deadLetterView
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var v deadLetterView
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		views = append(views, v)
	}
	if len(views) != 2 || views[0].Event.ID != "ev-thread-1" || views[0].Attempts != 1 || views[0].Error == "" || views[0].At.IsZero() ||
		!strings.Contains(errOut, "2 of 3 dead letters") {
		t.Fatalf("--json -n 2: %+v; stderr %q", views, errOut)
	}

	out, _, err = runCmd(t, append([]string{"instances", "redrive"}, append(at, views[0].ID)...)...)
	if err != nil || !strings.Contains(out, "redriven "+views[0].ID) {
		t.Fatalf("redrive: %q %v", out, err)
	}
	h, err := openHome(context.Background(), homeConfig(t, home), false)
	if err != nil {
		t.Fatal(err)
	}
	if evs, _ := h.Queue.List(context.Background()); len(evs) != 1 || evs[0].ID != "ev-thread-1" {
		t.Fatalf("queued after the redrive: %+v", evs)
	}
	_, _, err = runCmd(t, append([]string{"instances", "redrive"}, append(at, views[0].ID)...)...)
	if err == nil || !strings.Contains(err.Error(), "no dead letter "+views[0].ID) {
		t.Fatalf("second redrive: %v", err)
	}
	_, _, err = runCmd(t, append([]string{"instances", "redrive"}, append(at, "../queue")...)...)
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "no dead letter id") {
		t.Fatalf("redrive ../queue: %v", err)
	}
	_, _, err = runCmd(t, append([]string{"instances", "dead-letters", "-n", "0"}, at...)...)
	if !errors.As(err, &ue) {
		t.Fatalf("-n 0: %v", err)
	}
}

func TestNoDeadLetters(t *testing.T) {
	home := deadLetterHome(t)
	out, errOut, err := runCmd(t, "instances", "dead-letters", "--home", home)
	if err != nil || out != "" || strings.TrimSpace(errOut) != "no dead letters" {
		t.Fatalf("%q %q %v", out, errOut, err)
	}
}
