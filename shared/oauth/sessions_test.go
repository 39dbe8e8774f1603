package oauth

import (
	"context"
	"encoding/json"
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
	block, err := h.m.PendingBlock(context.Background(), testResume.InstanceKey, testResume.AgentName)
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
		block, err := h.m.PendingBlock(context.Background(), testResume.InstanceKey, testResume.AgentName)
		if err != nil || len(block.Items) != 1 || block.Items[0].AuthorizationURL != res.AuthorizationURL {
			t.Fatalf("auth.pending %+v %v, want the stored link unchanged", block, err)
		}
	})
	t.Run("state that does not open", func(t *testing.T) {
		h := newHarness(t)
		bad := h.request("global")
		good := h.request("user")
		s, _ := h.store.GetSession(context.Background(), bad.AuthSessionID)
		other, _ := h.store.GetSession(context.Background(), good.AuthSessionID)
		s.Flow.State = other.Flow.State // bound to another record: does not open
		if _, err := h.store.UpdateSession(context.Background(), s); err != nil {
			t.Fatal(err)
		}
		block, err := h.m.PendingBlock(context.Background(), testResume.InstanceKey, testResume.AgentName)
		if err != nil || len(block.Items) != 1 || block.Items[0].AuthSessionID != good.AuthSessionID {
			t.Fatalf("auth.pending %+v %v, want only the readable session", block, err)
		}
	})
}
