package oauth

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// parkedCall is the resume target of a turn's tool call (the engine's).
func parkedCall() *domain.ResumeInfo {
	r := *testResume
	r.TurnID, r.Step, r.CallID = "turn-1", 2, "call-7"
	return &r
}

// revokedEvents are the queued auth.revoked events.
func (h *harness) revokedEvents() []domain.Event {
	var out []domain.Event
	for _, e := range h.queue.list() {
		if e.Metadata["eventType"] == "auth.revoked" {
			out = append(out, e)
		}
	}
	return out
}

// TestTokenRefused: what the broker does with a token an upstream
// refused — refreshes the grant at once (expiry notwithstanding), or,
// when the provider refuses the refresh or there is no refresh token,
// revokes the grant (a tombstone with its reason, no token left), answers
// with a new consent and queues auth.revoked to the call's resume target.
func TestTokenRefused(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setup     func(h *harness) // before the consent
		refuse    func(h *harness) // after it, before the refusal
		resume    *domain.ResumeInfo
		status    string
		refreshes int    // refresh requests at the provider (x/oauth2's auth style detection sends a refused one twice)
		reason    string // the tombstone's reason; "" for a grant kept
		event     bool   // an auth.revoked event queued
		code      string // the error result's code
	}{
		{name: "the refresh works: a new token", status: StatusReady, refreshes: 1, resume: parkedCall()},
		{name: "the provider refuses the refresh (invalid_grant)", refuse: func(h *harness) { h.p.refreshError = "invalid_grant" },
			resume: parkedCall(), status: StatusAuthorizationRequired, refreshes: 2, reason: domain.RevokedRefreshRejected, event: true},
		{name: "no refresh token", setup: func(h *harness) { h.p.noRefresh = true },
			resume: parkedCall(), status: StatusAuthorizationRequired, refreshes: 0, reason: domain.RevokedTokenRefused, event: true},
		{name: "no resume target: the consent only", refuse: func(h *harness) { h.p.refreshError = "invalid_grant" },
			status: StatusAuthorizationRequired, refreshes: 2, reason: domain.RevokedRefreshRejected},
		{name: "the provider is down: an error, the grant kept", refuse: func(h *harness) { h.p.tokenStatus = 503 },
			resume: parkedCall(), status: StatusError, refreshes: 0, code: CodeRefreshFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			if tc.setup != nil {
				tc.setup(h)
			}
			first := h.consent("global", "team")
			if tc.refuse != nil {
				tc.refuse(h)
			}
			ctx := context.Background()
			req := TokenRequest{AppRef: appRef("global"), Auth: auth("demo:team:T1", ""), Resume: tc.resume}
			res := h.m.TokenRefused(ctx, req, first.AccessToken)
			if res.Status != tc.status || tc.code != "" && (res.Error == nil || res.Error.Code != tc.code) {
				t.Fatalf("answer %+v, want %s %s", res, tc.status, tc.code)
			}
			if n := h.p.refreshes(); n != tc.refreshes {
				t.Fatalf("%d refreshes at the provider, want %d", n, tc.refreshes)
			}
			if res.Status == StatusReady && (res.AccessToken.Reveal() == first.AccessToken.Reveal() || !h.p.live(res.AccessToken.Reveal())) {
				t.Fatal("ready with the refused token, or one the provider does not know")
			}
			g, err := h.store.GetGrant(ctx, GrantID(appRef("global"), "demo:team:T1"))
			if err != nil {
				t.Fatal(err)
			}
			if g.Revoked != (tc.reason != "") || g.RevokedReason != tc.reason {
				t.Fatalf("grant revoked %v (%q), want reason %q", g.Revoked, g.RevokedReason, tc.reason)
			}
			if g.Revoked && (g.RevokedAt == nil || !g.Token.AccessToken.IsZero() || g.Token.RefreshToken != nil) {
				t.Fatalf("the tombstone keeps tokens or has no time: %+v", g)
			}
			evs := h.revokedEvents()
			if len(evs) != map[bool]int{true: 1}[tc.event] {
				t.Fatalf("%d auth.revoked events, want event=%v", len(evs), tc.event)
			}
			if tc.event {
				e := evs[0]
				var in domain.AuthRevokedEvent
				if err := json.Unmarshal([]byte(e.Input), &in); err != nil {
					t.Fatal(err)
				}
				want := domain.AuthRevokedEvent{Type: "auth.revoked", OAuthAppRef: appRef("global"), Provider: "demo", Subject: "demo:team:T1",
					GrantID: g.ID, Reason: tc.reason, AuthSessionID: res.AuthSessionID}
				if in != want {
					t.Fatalf("auth.revoked input %+v, want %+v", in, want)
				}
				md := e.Metadata
				if e.ID != "revoked:"+res.AuthSessionID || e.AgentName != "planner" || e.InstanceKey != testResume.InstanceKey || e.SwarmRef.Name != "default" ||
					e.Origin["channel"] != "C123" || md["authSessionId"] != res.AuthSessionID || md["grantId"] != g.ID ||
					md["turnId"] != "turn-1" || md["callId"] != "call-7" || md["step"] != "2" {
					t.Fatalf("auth.revoked event %+v", e)
				}
				raw, _ := json.Marshal(e)
				if strings.Contains(string(raw), first.AccessToken.Reveal()) || strings.Contains(string(raw), "rt-") {
					t.Fatalf("the event holds a token: %s", raw)
				}
				if s, err := h.store.GetSession(ctx, res.AuthSessionID); err != nil || s.Status != domain.SessionPending || s.Resume.CallID != "call-7" {
					t.Fatalf("the new consent's session %+v %v: want pending, resuming the call", s, err)
				}
			}
			if strings.Contains(h.logs.String(), first.AccessToken.Reveal()) || res.Error != nil && strings.Contains(res.Error.Message, "fake says") {
				t.Fatal("a token or the provider's description reached a log or the answer")
			}
		})
	}
}

// TestTokenRefusedAfterAnotherRefresh: a token refused after the grant was
// refreshed (by another call, another process) is answered with the
// grant's newer token; nothing is refreshed again.
func TestTokenRefusedAfterAnotherRefresh(t *testing.T) {
	h := newHarness(t)
	first := h.consent("global", "team")
	h.clock.Advance(time.Hour) // the next request refreshes
	second := h.request("global")
	if second.Status != StatusReady || h.p.refreshes() != 1 {
		t.Fatalf("refresh: %+v (%d refreshes)", second, h.p.refreshes())
	}
	res := h.m.TokenRefused(context.Background(), TokenRequest{AppRef: appRef("global"), Auth: auth("demo:team:T1", "")}, first.AccessToken)
	if res.Status != StatusReady || res.AccessToken.Reveal() != second.AccessToken.Reveal() || h.p.refreshes() != 1 {
		t.Fatalf("answer %+v after %d refreshes: want the grant's current token, no other refresh", res, h.p.refreshes())
	}
}

// TestConcurrentRefusalsAreOneRefresh: 50 calls on two processes (two
// managers on one store) have the same token refused at once: one
// refresh at the provider, and every call gets its token.
func TestConcurrentRefusalsAreOneRefresh(t *testing.T) {
	h := newHarness(t)
	first := h.consent("global", "team")
	other := h.newManager(h.store)
	h.p.refreshDelay = 200 * time.Millisecond
	var wg sync.WaitGroup
	tokens := make([]string, 50)
	for i := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := h.m
			if i%2 == 1 {
				m = other
			}
			res := m.TokenRefused(context.Background(), TokenRequest{AppRef: appRef("global"), Auth: auth("demo:team:T1", "")}, first.AccessToken)
			if res.Status == StatusReady {
				tokens[i] = res.AccessToken.Reveal()
			}
		}()
	}
	wg.Wait()
	if n := h.p.refreshes(); n != 1 {
		t.Fatalf("%d refreshes at the provider, want 1", n)
	}
	for i, tok := range tokens {
		if tok == "" || tok != tokens[0] || tok == first.AccessToken.Reveal() {
			t.Fatalf("call %d got %q, want the one refreshed token", i, tok)
		}
	}
}

// TestRefusedCallRunAgain: the same call refused again (a re-run after a
// crash, a second call of the turn) finds the tombstone, gets the same
// consent, and auth.revoked is queued once.
func TestRefusedCallRunAgain(t *testing.T) {
	h := newHarness(t)
	first := h.consent("global", "team")
	h.p.refreshError = "invalid_grant"
	req := TokenRequest{AppRef: appRef("global"), Auth: auth("demo:team:T1", ""), Resume: parkedCall()}
	a := h.m.TokenRefused(context.Background(), req, first.AccessToken)
	b := h.m.TokenRefused(context.Background(), req, first.AccessToken)
	// One refresh: two requests, x/oauth2 trying the other auth style.
	if a.Status != StatusAuthorizationRequired || b.AuthSessionID != a.AuthSessionID || h.p.refreshes() != 2 {
		t.Fatalf("answers %+v and %+v after %d refreshes: want one consent, one refresh", a, b, h.p.refreshes())
	}
	if n := len(h.revokedEvents()); n != 1 {
		t.Fatalf("%d auth.revoked events, want 1", n)
	}
}

// TestExpiredGrantRefusedAtRefresh: the grant's refresh refused when its
// token expired (no upstream involved) revokes it the same way and
// queues auth.revoked to the request's resume target; the revoke route
// records its own reason.
func TestExpiredGrantRefusedAtRefresh(t *testing.T) {
	h := newHarness(t)
	h.consent("global", "team")
	h.p.refreshError = "invalid_grant"
	h.clock.Advance(time.Hour)
	res := h.request("global", func(r *TokenRequest) { r.Resume = parkedCall() })
	evs := h.revokedEvents()
	if res.Status != StatusAuthorizationRequired || len(evs) != 1 || evs[0].Metadata["authSessionId"] != res.AuthSessionID {
		t.Fatalf("answer %+v, auth.revoked events %+v: want a consent announced once", res, evs)
	}
	g, _ := h.store.GetGrant(context.Background(), GrantID(appRef("global"), "demo:team:T1"))
	if !g.Revoked || g.RevokedReason != domain.RevokedRefreshRejected {
		t.Fatalf("grant %+v", g)
	}

	h.p.refreshError = ""
	h.consent("global", "team")
	if _, err := h.m.RevokeGrant(context.Background(), appRef("global"), "demo:team:T1"); err != nil {
		t.Fatal(err)
	}
	g, _ = h.store.GetGrant(context.Background(), GrantID(appRef("global"), "demo:team:T1"))
	if !g.Revoked || g.RevokedReason != domain.RevokedByRequest || len(h.revokedEvents()) != 1 {
		t.Fatalf("revoked by request: %+v, %d auth.revoked events (the route queues none)", g, len(h.revokedEvents()))
	}
}
