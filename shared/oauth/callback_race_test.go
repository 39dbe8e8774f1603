package oauth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// TestConcurrentCallbackCopies: copies of one valid callback arriving at
// once (a double click, a browser retry, an attacker replaying the URL)
// must keep the user's consent. The provider revokes a code's tokens when
// the code is redeemed twice, so before the claim every trial lost the
// grant; now exactly one copy reaches the provider.
func TestConcurrentCallbackCopies(t *testing.T) {
	for _, copies := range []int{2, 20} {
		t.Run(fmt.Sprint(copies, " copies"), func(t *testing.T) {
			h := newHarness(t)
			res := h.request("global")
			code, state := h.p.approve(res.AuthorizationURL, "team")
			app := h.bundle.OAuthApps["global"]
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				ok       int
				reasons  = map[string]int{}
				start    = make(chan struct{})
				outcomes []CallbackOutcome
			)
			for range copies {
				wg.Go(func() {
					<-start
					out, err := h.m.HandleCallback(context.Background(), app, map[string][]string{"code": {code}, "state": {state}})
					mu.Lock()
					defer mu.Unlock()
					var ce *CallbackError
					switch {
					case err == nil:
						ok++
						outcomes = append(outcomes, out)
					case errors.As(err, &ce):
						reasons[ce.Reason]++
					default:
						t.Errorf("untyped error: %v", err)
					}
				})
			}
			close(start)
			wg.Wait()
			if ok != 1 || reasons[ReasonSessionAlreadyUsed] != copies-1 {
				t.Fatalf("%d succeeded, failures %v; want 1 and %d session_already_used", ok, reasons, copies-1)
			}
			h.p.mu.Lock()
			exchanges := h.p.codeExchanges
			h.p.mu.Unlock()
			if exchanges != 1 {
				t.Fatalf("the code went to the provider %d times, want once", exchanges)
			}
			if n := len(h.queue.list()); n != 1 {
				t.Fatalf("%d auth.granted events, want 1", n)
			}
			ready := h.request("global")
			if ready.Status != StatusReady || !h.p.live(ready.AccessToken.Reveal()) {
				t.Fatalf("after the race: %+v (token live at the provider: %v)", ready, ready.Status == StatusReady && h.p.live(ready.AccessToken.Reveal()))
			}
		})
	}
}

// failingComplete fails CompleteSession, after writing the grant when
// grantLands is set — a full disk between the file store's two writes.
type failingComplete struct {
	domain.Store
	grantLands bool
}

func (f *failingComplete) CompleteSession(ctx context.Context, id string, at time.Time, g domain.Grant) (domain.Session, domain.Grant, error) {
	if f.grantLands {
		if _, err := f.Store.PutGrant(ctx, g, 0); err != nil {
			return domain.Session{}, domain.Grant{}, err
		}
	}
	return domain.Session{}, domain.Grant{}, errors.New("write session: no space left on device")
}

func TestCallbackWhenCompletionFails(t *testing.T) {
	for _, tc := range []struct {
		name       string
		grantLands bool
	}{
		{"grant stored, session not marked: the consent is kept and the sweep completes the session", true},
		{"nothing stored: the page says so and the tokens go back", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			m := h.newManager(&failingComplete{Store: h.store, grantLands: tc.grantLands})
			res := h.request("global")
			code, state := h.p.approve(res.AuthorizationURL, "team")
			_, err := m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], map[string][]string{"code": {code}, "state": {state}})
			sess, gerr := h.store.GetSession(context.Background(), res.AuthSessionID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			h.p.mu.Lock()
			revoked := len(h.p.revoked)
			h.p.mu.Unlock()
			if !tc.grantLands {
				var ce *CallbackError
				if !errors.As(err, &ce) || ce.Reason != ReasonInternal {
					t.Fatalf("callback: %v, want internal_error", err)
				}
				if _, err := h.store.GetGrant(context.Background(), GrantID(appRef("global"), "demo:team:T1")); !errors.Is(err, domain.ErrNotFound) {
					t.Fatalf("a grant is stored: %v", err)
				}
				if sess.Status != domain.SessionFailed || revoked != 2 || len(h.queue.list()) != 0 {
					t.Fatalf("session %s, %d revocations, %d events; want failed, 2, 0", sess.Status, revoked, len(h.queue.list()))
				}
				return
			}
			if err != nil {
				t.Fatalf("the grant is stored but the callback says %v", err)
			}
			if sess.Status != domain.SessionExchanging || revoked != 0 || len(h.queue.list()) != 1 {
				t.Fatalf("session %s, %d revocations, %d events; want exchanging, 0, 1", sess.Status, revoked, len(h.queue.list()))
			}
			if r := h.request("global"); r.Status != StatusReady {
				t.Fatalf("the kept grant is not ready: %+v", r)
			}
			// The sweep leaves an exchange in flight alone, then completes
			// the session once the callback is surely gone.
			rep, err := h.m.CleanupExpiredSessions(context.Background())
			if err != nil || rep.Recovered != 0 {
				t.Fatalf("early sweep: %+v %v", rep, err)
			}
			h.clock.Advance(sess.ExpiresAt.Sub(h.clock.Now()) + exchangeGrace + time.Second)
			rep, err = h.m.CleanupExpiredSessions(context.Background())
			if err != nil || rep.Recovered != 1 {
				t.Fatalf("sweep: %+v %v", rep, err)
			}
			sess, _ = h.store.GetSession(context.Background(), res.AuthSessionID)
			if sess.Status != domain.SessionCompleted || sess.EventPending {
				t.Fatalf("after the sweep: %s eventPending %v", sess.Status, sess.EventPending)
			}
		})
	}
}

// TestSweepFailsAnAbandonedExchange: a callback that died after claiming
// its session and before storing anything leaves it exchanging; the sweep
// fails it (no grant, no event) instead of keeping it forever.
func TestSweepFailsAnAbandonedExchange(t *testing.T) {
	h := newHarness(t)
	res := h.request("global")
	s, err := h.store.GetSession(context.Background(), res.AuthSessionID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.m.claim(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.m.SessionStatus(context.Background(), res.AuthSessionID, 0); st.Status != domain.SessionExchanging {
		t.Fatalf("status %s", st.Status)
	}
	h.clock.Advance(s.ExpiresAt.Sub(h.clock.Now()) + exchangeGrace + time.Second)
	rep, err := h.m.CleanupExpiredSessions(context.Background())
	if err != nil || rep.Recovered != 1 || rep.Expired != 0 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	s, _ = h.store.GetSession(context.Background(), res.AuthSessionID)
	if s.Status != domain.SessionFailed || s.StatusReason != ReasonExchangeInterrupted || len(h.queue.list()) != 0 {
		t.Fatalf("session %s %q, %d events", s.Status, s.StatusReason, len(h.queue.list()))
	}
}
