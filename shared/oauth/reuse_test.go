package oauth

import (
	"context"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/filestore"
)

// sessionCount is how many sessions the store holds.
func (h *harness) sessionCount() int {
	h.t.Helper()
	list, bad, err := h.store.ListSessions(context.Background())
	if err != nil || len(bad) > 0 {
		h.t.Fatalf("ListSessions: %v %v", err, bad)
	}
	return len(list)
}

// A request repeated before the user has consented gets the pending
// session of the first, link and all, instead of a new session each time
// (issue 9.11).
func TestRepeatedRequestReusesThePendingSession(t *testing.T) {
	h := newHarness(t)
	first := h.request("global")
	if first.Status != StatusAuthorizationRequired {
		t.Fatalf("first request: %+v", first)
	}
	h.clock.Advance(time.Minute)
	again := h.request("global", func(r *TokenRequest) {
		r.Scopes = []string{"write", "read", "write"} // the app's scopes as a set
		resume := *testResume
		resume.Origin = map[string]any{"connector": "slack-main", "channel": "C999"} // not part of the target
		r.Resume = &resume
	})
	if again.AuthSessionID != first.AuthSessionID || again.AuthorizationURL != first.AuthorizationURL ||
		!again.SessionExpiresAt.Equal(first.SessionExpiresAt) || again.Message != first.Message || again.Status != first.Status {
		t.Fatalf("repeated request\n got %+v\nwant %+v", again, first)
	}
	if n := h.sessionCount(); n != 1 {
		t.Fatalf("%d sessions after a repeated request, want 1", n)
	}
	// The link handed out again works.
	code, state := h.p.approve(again.AuthorizationURL, "team")
	if _, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], url.Values{"code": {code}, "state": {state}}); err != nil {
		t.Fatalf("callback through the reused link: %v", err)
	}
	if r := h.request("global"); r.Status != StatusReady {
		t.Fatalf("after consent: %+v", r)
	}
}

// Each part of the reuse key asks for another consent or wakes another
// agent: a request that differs in one gets a session of its own.
func TestReuseKeyParts(t *testing.T) {
	resume := func(f func(r *domain.ResumeInfo)) func(*TokenRequest) {
		return func(req *TokenRequest) {
			r := *testResume
			f(&r)
			req.Resume = &r
		}
	}
	for _, tc := range []struct {
		name string
		app  string
		mut  func(*TokenRequest)
	}{
		{"fewer scopes", "global", func(r *TokenRequest) { r.Scopes = []string{"read"} }},
		{"another subject", "global", func(r *TokenRequest) { r.Auth = auth("demo:team:T2", "demo:user:alice") }},
		{"another app", "user", nil},
		{"another swarm", "global", resume(func(r *domain.ResumeInfo) { r.SwarmRef.Name = "other" })},
		{"another instance", "global", resume(func(r *domain.ResumeInfo) { r.InstanceKey = "1700000000.000200" })},
		{"another agent", "global", resume(func(r *domain.ResumeInfo) { r.AgentName = "coder" })},
		{"no resume target", "global", func(r *TokenRequest) { r.Resume = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			first := h.request("global")
			var muts []func(*TokenRequest)
			if tc.mut != nil {
				muts = append(muts, tc.mut)
			}
			other := h.request(tc.app, muts...)
			if other.Status != StatusAuthorizationRequired || other.AuthSessionID == first.AuthSessionID {
				t.Fatalf("got %+v, want a session other than %s", other, first.AuthSessionID)
			}
			// And that request, repeated, reuses its own.
			if again := h.request(tc.app, muts...); again.AuthSessionID != other.AuthSessionID {
				t.Fatalf("repeated: %s, want %s", again.AuthSessionID, other.AuthSessionID)
			}
		})
	}
}

// A pending session is reused while it has more than
// domain.SessionReuseMargin left, and not once it has left pending.
func TestReuseEnds(t *testing.T) {
	t.Run("margin", func(t *testing.T) {
		h := newHarness(t)
		first := h.request("global")
		h.clock.Advance(DefaultSessionTTL - domain.SessionReuseMargin - time.Second)
		if r := h.request("global"); r.AuthSessionID != first.AuthSessionID {
			t.Fatal("not reused with more than the margin left")
		}
		h.clock.Advance(time.Second)
		next := h.request("global")
		if next.AuthSessionID == first.AuthSessionID || next.Status != StatusAuthorizationRequired {
			t.Fatalf("reused with only the margin left: %+v", next)
		}
		if !next.SessionExpiresAt.After(first.SessionExpiresAt) {
			t.Fatal("the new session does not outlive the old one")
		}
		if r := h.request("global"); r.AuthSessionID != next.AuthSessionID {
			t.Fatal("the new session is not reused in turn")
		}
	})
	t.Run("the user refused", func(t *testing.T) {
		h := newHarness(t)
		first := h.request("global")
		u, _ := url.Parse(first.AuthorizationURL)
		_, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"],
			url.Values{"error": {"access_denied"}, "state": {u.Query().Get("state")}})
		if err == nil {
			t.Fatal("a refused consent completed")
		}
		if r := h.request("global"); r.AuthSessionID == first.AuthSessionID {
			t.Fatal("a failed session was handed out again")
		}
	})
	t.Run("the sweep expired it", func(t *testing.T) {
		h := newHarness(t)
		first := h.request("global")
		s, err := h.store.GetSession(context.Background(), first.AuthSessionID)
		if err != nil {
			t.Fatal(err)
		}
		s.Status = domain.SessionExpired
		if _, err := h.store.UpdateSession(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		if r := h.request("global"); r.AuthSessionID == first.AuthSessionID {
			t.Fatal("an expired session was handed out again")
		}
	})
	t.Run("its link cannot be rebuilt", func(t *testing.T) {
		h := newHarness(t)
		first := h.request("global")
		h.spoilState(first.AuthSessionID, h.request("user").AuthSessionID)
		next := h.request("global")
		if next.Status != StatusAuthorizationRequired || next.AuthSessionID == first.AuthSessionID {
			t.Fatalf("got %+v, want a new session", next)
		}
		if s, _ := h.store.GetSession(context.Background(), first.AuthSessionID); s.Status != domain.SessionFailed {
			t.Fatalf("the unusable session is %s, want failed", s.Status)
		}
	})
}

// A pending device session is reused with its prompt, and the provider is
// asked for one device code.
func TestDeviceSessionReused(t *testing.T) {
	h := newHarness(t)
	h.p.deviceExpiresIn = 600
	h.p.deviceScript = slices.Repeat([]string{"authorization_pending"}, 100)
	first := h.request("device")
	again := h.request("device")
	if first.DeviceCode == nil || again.AuthSessionID != first.AuthSessionID || again.AuthorizationURL != first.AuthorizationURL ||
		again.Message != first.Message || *again.DeviceCode != *first.DeviceCode {
		t.Fatalf("repeated device request\n got %+v\nwant %+v", again, first)
	}
	h.p.mu.Lock()
	auths := h.p.deviceAuths
	h.p.mu.Unlock()
	if auths != 1 {
		t.Fatalf("%d device authorization requests, want 1", auths)
	}
}

// Concurrent requests for one consent share one session, in one process
// and across two (two managers on two stores over one home, as two local
// processes or two Lambdas share a table), and every answer's link works.
func TestConcurrentRequestsShareOneSession(t *testing.T) {
	const n = 20
	for _, tc := range []struct {
		name     string
		managers func(h *harness) []*Manager
	}{
		{"one manager", func(h *harness) []*Manager { return []*Manager{h.m} }},
		{"two managers on two stores", func(h *harness) []*Manager {
			other, err := filestore.New(h.home)
			if err != nil {
				h.t.Fatal(err)
			}
			return []*Manager{h.m, h.newManager(other)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			ms := tc.managers(h)
			results := make([]Result, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					results[i] = ms[i%len(ms)].GetAccessToken(context.Background(),
						TokenRequest{AppRef: appRef("global"), Auth: auth("demo:team:T1", "demo:user:alice"), Resume: testResume})
				})
			}
			close(start)
			wg.Wait()
			sessions := h.sessionCount()
			t.Logf("%d concurrent requests made %d session(s)", n, sessions)
			if sessions != 1 {
				t.Fatalf("%d concurrent requests made %d sessions, want 1", n, sessions)
			}
			for i, r := range results {
				if r.Status != StatusAuthorizationRequired || r.AuthSessionID != results[0].AuthSessionID || r.AuthorizationURL != results[0].AuthorizationURL {
					t.Fatalf("answer %d: %+v, want the session of answer 0 (%s)", i, r, results[0].AuthSessionID)
				}
			}
			code, state := h.p.approve(results[n-1].AuthorizationURL, "team")
			if _, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], url.Values{"code": {code}, "state": {state}}); err != nil {
				t.Fatalf("callback through a shared link: %v", err)
			}
		})
	}
}

// callStore counts the store calls a request makes.
type callStore struct {
	domain.Store
	mu    sync.Mutex
	calls []string
}

func (s *callStore) add(op string) {
	s.mu.Lock()
	s.calls = append(s.calls, op)
	s.mu.Unlock()
}

func (s *callStore) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	return out
}

func (s *callStore) GetGrant(ctx context.Context, id string) (domain.Grant, error) {
	s.add("GetGrant")
	return s.Store.GetGrant(ctx, id)
}

func (s *callStore) FindPendingSession(ctx context.Context, key string, at time.Time) (domain.Session, error) {
	s.add("FindPendingSession")
	return s.Store.FindPendingSession(ctx, key, at)
}

func (s *callStore) CreateSession(ctx context.Context, sess domain.Session) error {
	s.add("CreateSession")
	return s.Store.CreateSession(ctx, sess)
}

func (s *callStore) ListPendingSessions(ctx context.Context, target domain.ResumeTarget, at time.Time) ([]domain.Session, []error, error) {
	s.add("ListPendingSessions")
	return s.Store.ListPendingSessions(ctx, target, at)
}

func (s *callStore) ListSessions(ctx context.Context) ([]domain.Session, []error, error) {
	s.add("ListSessions")
	return s.Store.ListSessions(ctx)
}

// The store calls of a token request that starts a session, of one that
// reuses it, and of auth.pending; with dynamostore's cost of each call
// (TestIndexCalls there) they give the DynamoDB calls in docs/deploy.md.
func TestTokenRequestStoreCalls(t *testing.T) {
	h := newHarness(t)
	st := &callStore{Store: h.store}
	h.m = h.newManager(st)
	for _, tc := range []struct {
		name string
		run  func()
		want []string
	}{
		{"new session", func() { h.request("global") }, []string{"GetGrant", "FindPendingSession", "CreateSession"}},
		{"reused session", func() { h.request("global") }, []string{"GetGrant", "FindPendingSession"}},
		{"auth.pending", func() {
			_, _ = h.m.PendingBlock(context.Background(), testResume.Target())
		}, []string{"ListPendingSessions"}},
	} {
		tc.run()
		if got := st.take(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: store calls %v, want %v", tc.name, got, tc.want)
		}
	}
}
