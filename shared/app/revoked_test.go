package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
)

// TestTurnRecoversFromARevokedGrant is issue 18.2 on serve's parts (the
// embedded home, the OAuth core, the http tool, the engine, the turn
// worker on the file queue): a consented grant the provider then forgets
// (a restart of `make run`'s provider, a user who removed the app). The
// next turn's whoami call gets 401; its one refresh is refused
// (invalid_grant); the grant becomes a tombstone; auth.revoked is queued
// to the call and recorded without running anything; the call parks with
// a fresh consent link; the consent completes and exactly that call runs
// again, once, and the agent answers. No log line holds a token.
func TestTurnRecoversFromARevokedGrant(t *testing.T) {
	r := newConsentRig(t)
	w := r.worker()
	ctx := context.Background()
	key := turn.InstanceKey{Swarm: "default", Key: "thread-1", Agent: "assistant"}

	// The first consent, as in the walkthrough.
	r.post(t, key.Key, 1)
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	r.consent(t, receive(t, r.parked, "turn.parked"))
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if tr := receive(t, r.ended, "the first turn's end"); tr.Status != turn.TurnCompleted || !strings.Contains(tr.Final, "alice") {
		t.Fatalf("first turn %s %q", tr.Status, tr.Final)
	}
	grantID := oauth.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "demo"}, "demo:team:T1")
	first, err := r.home.Store.GetGrant(ctx, grantID)
	if err != nil || first.Revoked {
		t.Fatalf("the consented grant: %+v %v", first, err)
	}
	for len(r.hits) > 0 {
		<-r.hits
	}

	// The provider forgets it. The next message's call is refused.
	r.idp.forget()
	r.post(t, key.Key, 1)
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	link := receive(t, r.parked, "turn.parked after the refusal")
	receive(t, r.hits, "the refused request")
	g, err := r.home.Store.GetGrant(ctx, grantID)
	if err != nil || !g.Revoked || g.RevokedReason != domain.RevokedRefreshRejected || !g.Token.AccessToken.IsZero() || g.Token.RefreshToken != nil {
		t.Fatalf("the grant after the refused refresh: %+v %v, want a tombstone (refresh_rejected, no token)", g, err)
	}
	st, err := r.app.Turns.Inspect(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	parked := lastTurnOf(st)
	var call turn.Call
	for _, cl := range st.Calls {
		if cl.TurnID == parked.ID && cl.State == turn.CallParked {
			call = cl
		}
	}
	if parked.Status != turn.TurnParked || call.ID == "" || !strings.Contains(link, "state=") {
		t.Fatalf("turn %s, parked call %+v, link %q: want the call parked on a fresh consent", parked.Status, call, link)
	}
	queued, err := r.home.Queue.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var revoked []domain.Event
	for _, ev := range queued {
		if ev.Metadata["eventType"] == engine.EventAuthRevoked {
			revoked = append(revoked, ev)
		}
	}
	if len(revoked) != 1 || revoked[0].Metadata["callId"] != call.ID || revoked[0].Metadata["turnId"] != parked.ID ||
		revoked[0].Metadata["authSessionId"] != call.AuthSession || revoked[0].InstanceKey != key.Key {
		t.Fatalf("auth.revoked events %+v, want one for call %s parked on %s", revoked, call.ID, call.AuthSession)
	}
	var in domain.AuthRevokedEvent
	if err := json.Unmarshal([]byte(revoked[0].Input), &in); err != nil || in.GrantID != grantID || in.Reason != domain.RevokedRefreshRejected {
		t.Fatalf("auth.revoked input %s: %v", revoked[0].Input, err)
	}

	// auth.revoked is recorded; nothing runs, the call stays parked.
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ = r.app.Turns.Inspect(ctx, key)
	if tr := lastTurnOf(st); tr.ID != parked.ID || tr.Status != turn.TurnParked || len(st.Backlog) != 0 || !st.HasProcessed(revoked[0].ID) {
		t.Fatalf("after auth.revoked: turn %s %s, backlog %d: want the same turn parked, the event recorded", tr.ID, tr.Status, len(st.Backlog))
	}

	// The consent: the same call runs again, once, with the new token.
	r.consent(t, link)
	if err := w.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	tr := receive(t, r.ended, "the second turn's end")
	if tr.ID != parked.ID || tr.Status != turn.TurnCompleted || !strings.Contains(tr.Final, "alice") {
		t.Fatalf("turn %s %s %q, want %s completed with the upstream's name", tr.ID, tr.Status, tr.Final, parked.ID)
	}
	st, _ = r.app.Turns.Inspect(ctx, key)
	var types []string
	for _, e := range st.TurnEvents[tr.ID] {
		types = append(types, e.Type)
	}
	got := strings.Join(types, ",")
	if strings.Count(got, turn.EvToolCalled) != 1 || strings.Count(got, turn.EvTurnParked) != 1 || strings.Count(got, turn.EvTurnResumed) != 1 ||
		strings.Count(got, turn.EvToolCompleted) != 1 || strings.Contains(got, turn.EvToolFailed) {
		t.Fatalf("the turn's events: %s", got)
	}
	for _, cl := range st.Calls {
		if cl.TurnID == tr.ID && (cl.ID != call.ID || cl.State != turn.CallOK) {
			t.Fatalf("call %s %s: want only %s, ok", cl.ID, cl.State, call.ID)
		}
	}
	if g, _ := r.home.Store.GetGrant(ctx, grantID); g.Revoked {
		t.Fatal("the new consent left the grant revoked")
	}
	if all, _ := r.logs.from(0); strings.Contains(all, tokenCanary) {
		t.Fatalf("a log line holds a token:\n%s", all)
	}
}

// lastTurnOf is the instance's most recently started turn.
func lastTurnOf(st turn.State) turn.Turn {
	var last turn.Turn
	for _, t := range st.Turns {
		if last.ID == "" || t.StartedAt.After(last.StartedAt) {
			last = t
		}
	}
	return last
}
