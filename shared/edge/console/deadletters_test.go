package console

import (
	"context"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

type memDeadLetters struct {
	mu       sync.Mutex
	letters  []domain.DeadLetter
	redriven []string
}

func (m *memDeadLetters) ListDeadLetters(_ context.Context, limit int) ([]domain.DeadLetter, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.letters[:min(limit, len(m.letters))], len(m.letters), nil
}

func (m *memDeadLetters) RedriveDeadLetter(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, d := range m.letters {
		if d.ID == id {
			m.letters = append(m.letters[:i], m.letters[i+1:]...)
			m.redriven = append(m.redriven, id)
			return nil
		}
	}
	return domain.ErrNotFound
}

func TestDeadLettersInspectAndRedrive(t *testing.T) {
	r := newRig(t)
	dl := &memDeadLetters{letters: []domain.DeadLetter{{ID: "1700000000-abcd.json", Error: "turn: the model answered HTTP 500 five times", Attempts: 5, At: time.Now(),
		Event: domain.Event{ID: "ev-1", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: "thread-1", AgentName: "planner",
			Input: `{"type":"user.message","text":"hello <b>there</b>"}`, EnqueuedAt: time.Now()}}}}
	r.c.cfg.DeadLetters = dl
	b := r.browser(t)
	b.signIn("admin", "/console/")
	if page := b.do("GET", "/console/", nil).Body.String(); !strings.Contains(page, "dead-lettered events") {
		t.Fatal("the overview does not count the dead letters")
	}
	list := b.do("GET", "/console/dead-letters", nil).Body.String()
	for _, want := range []string{"ev-1", "user.message", "HTTP 500 five times", `href="/console/instances/default/thread-1/planner"`} {
		if !strings.Contains(list, want) {
			t.Errorf("list: no %q", want)
		}
	}
	page := b.do("GET", "/console/dead-letters/1700000000-abcd.json", nil).Body.String()
	if !strings.Contains(page, "hello &lt;b&gt;there&lt;/b&gt;") || !strings.Contains(page, `id="dl-error">turn: the model answered`) {
		t.Fatalf("inspect: %s", page)
	}
	for _, p := range []string{"/console/dead-letters/nope.json", "/console/dead-letters/a%2Fb", "/console/dead-letters/" + strings.Repeat("x", 200)} {
		if rec := b.do("GET", p, nil); rec.Code != 404 {
			t.Errorf("%s: %d", p, rec.Code)
		}
	}
	csrf := csrfOf(t, page)
	if rec := b.do("POST", "/console/dead-letters/1700000000-abcd.json/redrive", url.Values{}); rec.Code != 403 || len(dl.redriven) != 0 {
		t.Fatalf("redrive without the token: %d %v", rec.Code, dl.redriven)
	}
	ta := r.browser(t)
	ta.signIn("acme-admin", "/console/")
	tcsrf := csrfOf(t, ta.do("GET", "/console/", nil).Body.String())
	if rec := ta.do("POST", "/console/dead-letters/1700000000-abcd.json/redrive", url.Values{"csrf": {tcsrf}}); rec.Code != 404 || len(dl.redriven) != 0 {
		t.Fatalf("redrive as a tenant admin: %d", rec.Code)
	}
	if rec := ta.do("GET", "/console/dead-letters", nil); rec.Code != 404 {
		t.Fatalf("list as a tenant admin: %d", rec.Code)
	}
	rec := b.do("POST", "/console/dead-letters/1700000000-abcd.json/redrive", url.Values{"csrf": {csrf}})
	if rec.Code != 303 || len(dl.redriven) != 1 {
		t.Fatalf("redrive: %d %v", rec.Code, dl.redriven)
	}
	if after := b.do("GET", rec.Header().Get("Location"), nil).Body.String(); !strings.Contains(after, "No dead letters") || !strings.Contains(after, "Done: redriven") {
		t.Fatalf("after: %s", after)
	}
	// Another operator redrove it meanwhile: not found, nothing done.
	if rec := b.do("POST", "/console/dead-letters/1700000000-abcd.json/redrive", url.Values{"csrf": {csrf}}); rec.Code != 404 {
		t.Fatalf("second redrive: %d", rec.Code)
	}
	if !strings.Contains(r.logs.String(), `"action":"redrive","operator":"admin"`) {
		t.Fatal("the redrive is not audited")
	}
}
