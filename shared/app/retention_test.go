package app

import (
	"context"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
)

// TestBuildWiresTheRetentionWindows: AGENTAUTH_SESSION_RETENTION and
// AGENTAUTH_QUEUE_DEDUP_WINDOW, as config reads them, reach the home's
// event queue (OpenEmbedded) and the OAuth manager's cleanup (Build): the
// sweep deletes a finished session past the short retention and keeps one
// within it.
func TestBuildWiresTheRetentionWindows(t *testing.T) {
	ctx := context.Background()
	cfg := setup(t, teamApp)
	vars := map[string]string{config.SessionRetention: "2m", config.QueueDedupWindow: "3m"}
	read, err := config.FromEnv(func(k string) string { return vars[k] }, config.Local)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SessionRetention, cfg.QueueDedupWindow = read.SessionRetention, read.QueueDedupWindow

	h, err := OpenEmbedded(ctx, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Queue.DedupWindow(); got != 3*time.Minute {
		t.Fatalf("the queue's dedup window is %s, want 3m", got)
	}
	a, err := Build(ctx, cfg, FromEmbedded(h, cfg.LocalSecrets()), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(ctx) })
	now := time.Now().UTC()
	ids := map[time.Duration]string{}
	for _, since := range []time.Duration{3 * time.Minute, time.Minute} { // since the expiry
		done := now.Add(-since - 5*time.Minute)
		s := domain.Session{ID: domain.NewSessionID(), Provider: "demo", OAuthAppRef: domain.ObjectRef{Kind: "OAuthApp", Name: "team"},
			SubjectMode: "global", Subject: "demo:team:T1", Status: domain.SessionCompleted,
			CreatedAt: done.Add(-time.Minute), ExpiresAt: now.Add(-since), CompletedAt: &done}
		if err := h.Store.CreateSession(ctx, s); err != nil {
			t.Fatal(err)
		}
		ids[since] = s.ID
	}
	rep, err := a.Sweep(ctx)
	if err != nil || rep.Deleted != 1 {
		t.Fatalf("sweep %+v %v, want the one session past the 2m retention deleted", rep, err)
	}
	if _, err := h.Store.GetSession(ctx, ids[3*time.Minute]); err == nil {
		t.Error("the session that expired 3m ago is still there")
	}
	if _, err := h.Store.GetSession(ctx, ids[time.Minute]); err != nil {
		t.Errorf("the session that expired 1m ago: %v", err)
	}
}
