package turntools

import (
	"context"
	"testing"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/filestore"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/turn/engine"
)

type nopQueue struct{}

func (nopQueue) Enqueue(context.Context, domain.Event) error { return nil }

// A consent a turn's tool call starts is stored as started by the turn,
// with the turn's call as its resume target.
func TestTurnCallConsentStartedByTurn(t *testing.T) {
	home := t.TempDir()
	st, err := filestore.New(home)
	if err != nil {
		t.Fatal(err)
	}
	kr, _, err := aesseal.Ensure(home, "", false)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, harnessOptions{tokens: func(b *bundle.Bundle) httptool.TokenSource {
		mgr, err := oauth.New(oauth.Config{Bundle: b, Store: st, Sealer: kr, Queue: nopQueue{}, StateKeys: kr.DerivedKeys("state"), BaseURL: "http://127.0.0.1:8080"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mgr.Close(context.Background()) })
		return mgr
	}})
	out := h.tools.Invoke(context.Background(), invocation(turnOf("assistant", alice), "c1", "get_menu", `{"day":"mon"}`, "get_menu"))
	if out.Kind != engine.OutcomeAuthorizationRequired || out.AuthSession == "" {
		t.Fatalf("want a consent, got %+v", out)
	}
	list, bad, err := st.ListSessions(context.Background())
	if err != nil || len(bad) > 0 || len(list) != 1 {
		t.Fatalf("sessions: %d %v %v", len(list), bad, err)
	}
	if s := list[0]; s.ID != out.AuthSession || s.StartedBy != domain.StartedByTurn || s.Resume.CallID != "c1" {
		t.Fatalf("StartedBy %q (call %q), want %q", s.StartedBy, s.Resume.CallID, domain.StartedByTurn)
	}
}
