package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// recordingStore keeps the JSON of every session record written through it,
// as an in-memory store would hold it.
type recordingStore struct {
	domain.Store
	mu      sync.Mutex
	written [][]byte
}

func (r *recordingStore) keep(s domain.Session) {
	b, _ := json.Marshal(s)
	r.mu.Lock()
	r.written = append(r.written, b)
	r.mu.Unlock()
}

func (r *recordingStore) CreateSession(ctx context.Context, s domain.Session) error {
	r.keep(s)
	return r.Store.CreateSession(ctx, s)
}

func (r *recordingStore) UpdateSession(ctx context.Context, s domain.Session) (domain.Session, error) {
	r.keep(s)
	return r.Store.UpdateSession(ctx, s)
}

func (r *recordingStore) CompleteSession(ctx context.Context, id string, at time.Time, g domain.Grant) (domain.Session, domain.Grant, error) {
	s, g, err := r.Store.CompleteSession(ctx, id, at, g)
	if err == nil {
		r.keep(s)
	}
	return s, g, err
}

func (r *recordingStore) bytes() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, w := range r.written {
		b.Write(w)
	}
	return b.String()
}

// The state is sealed at rest (spec 001 §5.3): no stored record may hold
// it in plaintext, the authorization URL included (issue 9.5).
func TestNoPlaintextStateAtRest(t *testing.T) {
	h := newHarness(t)
	rec := &recordingStore{Store: h.store}
	h.m = h.newManager(rec)
	res := h.request("global")
	u, err := url.Parse(res.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	state := u.Query().Get("state")
	if state == "" {
		t.Fatalf("the URL handed to the agent lacks the state: %s", res.AuthorizationURL)
	}
	// What the agent gets later (auth.pending) is the same usable link.
	block, err := h.m.PendingBlock(context.Background(), testResume.Target())
	if err != nil || len(block.Items) != 1 || block.Items[0].AuthorizationURL != res.AuthorizationURL {
		t.Fatalf("auth.pending %+v %v, want the link %s", block, err, res.AuthorizationURL)
	}
	code, st := h.p.approve(block.Items[0].AuthorizationURL, "team")
	if _, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], url.Values{"code": {code}, "state": {st}}); err != nil {
		t.Fatalf("callback through the auth.pending link: %v", err)
	}
	// The state in any encoding a record might hold it in.
	forms := []string{state, url.QueryEscape(state), strings.SplitN(state, ".", 2)[1]}
	raw := rec.bytes()
	if raw == "" {
		t.Fatal("nothing recorded")
	}
	for _, f := range forms {
		if strings.Contains(raw, f) {
			t.Fatalf("a session record written to the store holds the state in plaintext: %s", raw)
		}
	}
	files, _ := filepath.Glob(filepath.Join(h.home, "oauth", "sessions", "*"))
	if len(files) == 0 {
		t.Fatal("no session file")
	}
	for _, name := range files {
		b, _ := os.ReadFile(name)
		for _, f := range forms {
			if strings.Contains(string(b), f) {
				t.Fatalf("%s holds the state in plaintext", filepath.Base(name))
			}
		}
	}
}

// spoilState gives session id the sealed state of session donor: bound to
// another record, it no longer opens.
func (h *harness) spoilState(id, donor string) {
	h.t.Helper()
	s, err := h.store.GetSession(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	d, err := h.store.GetSession(context.Background(), donor)
	if err != nil {
		h.t.Fatal(err)
	}
	s.Flow.State = d.Flow.State
	if _, err := h.store.UpdateSession(context.Background(), s); err != nil {
		h.t.Fatal(err)
	}
}

func TestPendingLinkOfStoredSessions(t *testing.T) {
	t.Run("record of an older version with the state in its URL", func(t *testing.T) {
		h := newHarness(t)
		res := h.request("global")
		s, err := h.store.GetSession(context.Background(), res.AuthSessionID)
		if err != nil {
			t.Fatal(err)
		}
		s.AuthorizationURL = res.AuthorizationURL // as versions before issue 9.5 stored it
		if _, err := h.store.UpdateSession(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		block, err := h.m.PendingBlock(context.Background(), testResume.Target())
		if err != nil || len(block.Items) != 1 || block.Items[0].AuthorizationURL != res.AuthorizationURL {
			t.Fatalf("auth.pending %+v %v, want the stored link unchanged", block, err)
		}
	})
	t.Run("state that does not open", func(t *testing.T) {
		h := newHarness(t)
		bad := h.request("global")
		good := h.request("user")
		h.spoilState(bad.AuthSessionID, good.AuthSessionID)
		block, err := h.m.PendingBlock(context.Background(), testResume.Target())
		if err != nil || len(block.Items) != 1 || block.Items[0].AuthSessionID != good.AuthSessionID {
			t.Fatalf("auth.pending %+v %v, want only the readable session", block, err)
		}
	})
}

// indexOnlyStore refuses ListSessions, which reads every session (a Scan
// of the whole table in DynamoDB), and counts the index queries.
type indexOnlyStore struct {
	domain.Store
	mu    sync.Mutex
	calls map[string]int
}

func (s *indexOnlyStore) count(op string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == nil {
		s.calls = map[string]int{}
	}
	s.calls[op]++
}

func (s *indexOnlyStore) take() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.calls
	s.calls = nil
	return out
}

func (s *indexOnlyStore) ListSessions(context.Context) ([]domain.Session, []error, error) {
	s.count("ListSessions")
	return nil, nil, errors.New("ListSessions reads every session")
}

func (s *indexOnlyStore) ListPendingSessions(ctx context.Context, target domain.ResumeTarget, at time.Time) ([]domain.Session, []error, error) {
	s.count("ListPendingSessions")
	return s.Store.ListPendingSessions(ctx, target, at)
}

func (s *indexOnlyStore) ListSweepSessions(ctx context.Context, set domain.SweepSet, expiredBy time.Time) ([]domain.Session, []error, error) {
	s.count("ListSweepSessions:" + string(set))
	return s.Store.ListSweepSessions(ctx, set, expiredBy)
}

// auth.pending and the sweep read the store's index, never every session
// (issue 9.12): one index query per auth.pending, one per sweep set.
func TestPendingAndSweepReadTheIndex(t *testing.T) {
	h := newHarness(t)
	st := &indexOnlyStore{Store: h.store}
	h.m = h.newManager(st)
	ctx := context.Background()

	// An undelivered event, a pending session and one of another agent.
	h.queue.fail = true
	granted := h.request("global")
	code, state := h.p.approve(granted.AuthorizationURL, "team")
	if _, err := h.m.HandleCallback(ctx, h.bundle.OAuthApps["global"], url.Values{"code": {code}, "state": {state}}); err != nil {
		t.Fatal(err)
	}
	h.queue.fail = false
	pending := h.request("user")
	h.request("user", func(r *TokenRequest) { r.Resume = &domain.ResumeInfo{InstanceKey: "other", AgentName: "planner"} })
	st.take()

	block, err := h.m.PendingBlock(ctx, testResume.Target())
	if err != nil || len(block.Items) != 1 || block.Items[0].AuthSessionID != pending.AuthSessionID {
		t.Fatalf("auth.pending %+v %v", block, err)
	}
	if got, want := st.take(), map[string]int{"ListPendingSessions": 1}; !maps.Equal(got, want) {
		t.Fatalf("auth.pending read %v, want %v", got, want)
	}

	rep, err := h.m.CleanupExpiredSessions(ctx)
	if err != nil || rep != (CleanupReport{EventsDelivered: 1}) {
		t.Fatalf("sweep %+v %v", rep, err)
	}
	want := map[string]int{"ListSweepSessions:pending": 1, "ListSweepSessions:exchanging": 1, "ListSweepSessions:eventPending": 1, "ListSweepSessions:finished": 1}
	if got := st.take(); !maps.Equal(got, want) {
		t.Fatalf("the sweep read %v, want %v", got, want)
	}
	h.clock.Advance(DefaultSessionTTL)
	if rep, err = h.m.CleanupExpiredSessions(ctx); err != nil || rep != (CleanupReport{Expired: 2}) {
		t.Fatalf("sweep after expiry %+v %v", rep, err)
	}
	h.clock.Advance(SessionRetention)
	if rep, err = h.m.CleanupExpiredSessions(ctx); err != nil || rep != (CleanupReport{Deleted: 3}) {
		t.Fatalf("sweep after the retention %+v %v", rep, err)
	}
	if block, err = h.m.PendingBlock(ctx, testResume.Target()); err != nil || len(block.Items) != 0 {
		t.Fatalf("auth.pending after the sweep %+v %v", block, err)
	}
}

// An unreadable session file is counted once per sweep, although the
// file store reports it with each set it lists.
func TestSweepCountsAnUnreadableSessionOnce(t *testing.T) {
	h := newHarness(t)
	res := h.request("global")
	path := filepath.Join(h.home, "oauth", "sessions", res.AuthSessionID+".enc.json")
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := h.m.CleanupExpiredSessions(context.Background())
	if err != nil || rep.Unreadable != 1 {
		t.Fatalf("sweep %+v %v", rep, err)
	}
}

// TestSweepTellsAParkedCallItsConsentExpired: a session a turn's tool call
// parked on sends auth.expired to that call when it expires; others do not.
func TestSweepTellsAParkedCallItsConsentExpired(t *testing.T) {
	h := newHarness(t)
	parked := h.request("global", func(r *TokenRequest) {
		res := *testResume
		res.TurnID, res.Step, res.CallID = "turn-1", 2, "call-7"
		r.Resume = &res
	})
	plain := h.request("user")
	h.clock.Advance(DefaultSessionTTL + time.Second)
	rep, err := h.m.CleanupExpiredSessions(context.Background())
	if err != nil || rep.Expired != 2 {
		t.Fatalf("sweep %+v %v", rep, err)
	}
	var expired []domain.Event
	for _, e := range h.queue.list() {
		if strings.HasPrefix(e.ID, "expired:") {
			expired = append(expired, e)
		}
	}
	if len(expired) != 1 || expired[0].ID != "expired:"+parked.AuthSessionID || expired[0].Metadata["callId"] != "call-7" ||
		expired[0].Metadata["turnId"] != "turn-1" || expired[0].AgentName != "planner" || !strings.Contains(expired[0].Input, `"auth.expired"`) {
		t.Fatalf("auth.expired events %+v (plain session %s)", expired, plain.AuthSessionID)
	}
}

// looseStore answers ListPendingSessions with every pending session,
// whatever the target: a store index that keys too little, as both did
// before issue 17.
type looseStore struct{ domain.Store }

func (s looseStore) ListPendingSessions(ctx context.Context, _ domain.ResumeTarget, at time.Time) ([]domain.Session, []error, error) {
	all, bad, err := s.ListSessions(ctx)
	var out []domain.Session
	for _, sess := range all {
		if sess.Status == domain.SessionPending && sess.ExpiresAt.After(at) {
			out = append(out, sess)
		}
	}
	return out, bad, err
}

// auth.pending is per resume target, swarm included (issue 17): a swarm
// that shares the victim's instance key and Agent name gets none of the
// victim's consent links — not from the store, and not from a store that
// answers too much — and a target without its swarm is refused.
func TestPendingBlockIsPerSwarm(t *testing.T) {
	h := newHarness(t)
	in := func(swarm string) *domain.ResumeInfo {
		r := *testResume
		r.SwarmRef = domain.ObjectRef{Kind: "Swarm", Name: swarm}
		return &r
	}
	victim := h.request("global", func(r *TokenRequest) { r.Resume = in("victim") })
	mine := h.request("global", func(r *TokenRequest) {
		r.Resume, r.Auth = in("other"), auth("demo:team:T2", "demo:user:mallory")
	})
	if victim.Status != StatusAuthorizationRequired || mine.Status != StatusAuthorizationRequired {
		t.Fatalf("token requests: %+v, %+v", victim, mine)
	}
	for name, m := range map[string]*Manager{"store": h.m, "a store that answers too much": h.newManager(looseStore{h.store})} {
		t.Run(name, func(t *testing.T) {
			for swarm, want := range map[string]Result{"victim": victim, "other": mine} {
				block, err := m.PendingBlock(context.Background(), in(swarm).Target())
				if err != nil || len(block.Items) != 1 || block.Items[0].AuthSessionID != want.AuthSessionID {
					t.Fatalf("swarm %s: %+v %v, want only its own session %s", swarm, block, err, want.AuthSessionID)
				}
				raw, _ := json.Marshal(block)
				other := victim
				if swarm == "victim" {
					other = mine
				}
				if strings.Contains(string(raw), other.AuthSessionID) || strings.Contains(string(raw), other.AuthorizationURL) {
					t.Fatalf("swarm %s's block holds the other swarm's consent: %s", swarm, raw)
				}
			}
		})
	}
	noSwarm := testResume.Target()
	noSwarm.SwarmRef = domain.ObjectRef{}
	if block, err := h.m.PendingBlock(context.Background(), noSwarm); !errors.Is(err, domain.ErrInvalidID) || len(block.Items) != 0 {
		t.Fatalf("a target without its swarm: %+v %v, want ErrInvalidID", block, err)
	}
}

// TestCleanupKeepsFinishedSessionsForTheConfiguredRetention: with
// Config.SessionRetention set, the cleanup deletes a finished session
// that long after its expiry, not SessionRetention (24 h) after; at the
// default it keeps it.
func TestCleanupKeepsFinishedSessionsForTheConfiguredRetention(t *testing.T) {
	const retention = 5 * time.Minute
	for _, tc := range []struct {
		name      string
		retention time.Duration // 0: the default
		deleted   int           // by the cleanup just past retention after the expiry
	}{
		{"configured", retention, 1},
		{"default", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			m, err := New(Config{
				Bundle: h.bundle, Store: h.store, Sealer: h.keyring, Queue: h.queue,
				StateKeys: h.keyring.DerivedKeys("state"), BaseURL: "http://127.0.0.1:8080",
				Now: h.clock.Now, SessionRetention: tc.retention,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close(context.Background()) })
			h.m = m
			h.consent("global", "team") // one completed session
			ctx := context.Background()
			h.clock.Advance(DefaultSessionTTL + retention - time.Second)
			if rep, err := m.CleanupExpiredSessions(ctx); err != nil || rep.Deleted != 0 {
				t.Fatalf("cleanup a second before the retention ends: %+v %v", rep, err)
			}
			h.clock.Advance(2 * time.Second)
			rep, err := m.CleanupExpiredSessions(ctx)
			if err != nil || rep.Deleted != tc.deleted {
				t.Fatalf("cleanup past %s after the expiry: %+v %v, want %d deleted", retention, rep, err, tc.deleted)
			}
			left, _, err := h.store.ListSessions(ctx)
			if err != nil || len(left) != 1-tc.deleted {
				t.Fatalf("%d sessions left (%v), want %d", len(left), err, 1-tc.deleted)
			}
		})
	}
}
