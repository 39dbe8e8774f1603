package oauth

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/filestore"
	"github.com/agentauth/agentauth/shared/observe/logging"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncBuffer collects log output from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type harness struct {
	t       *testing.T
	p       *fakeProvider
	home    string
	store   *filestore.Store
	keyring *aesseal.Keyring
	queue   *memQueue
	bundle  *bundle.Bundle
	m       *Manager
	clock   *clock
	logs    *syncBuffer
}

func testBundle(t testing.TB, providerURL string) *bundle.Bundle {
	t.Helper()
	app := func(name, mode, flow, extra string) string {
		s := `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: ` + name + `}
spec:
  provider: demo
  flow: ` + flow + `
  subjectMode: ` + mode + `
  client:
    clientId: {value: client-1}
    clientSecret: {value: secret-1}
  endpoints:
    authorizationUrl: ` + providerURL + `/authorize
    tokenUrl: ` + providerURL + `/token
    revokeUrl: ` + providerURL + `/revoke
    userInfoUrl: ` + providerURL + `/userinfo
    deviceAuthorizationUrl: ` + providerURL + `/device
  scopes: [read, write]
`
		if flow == "authorizationCode" {
			s += "  redirect: {callbackPath: /oauth/callback/" + name + "}\n"
		}
		return s + extra
	}
	docs := []string{
		app("global", "global", "authorizationCode", "  options: {prompt: consent, access_type: offline, max_age: 5}\n"),
		app("user", "user", "authorizationCode", "  subjectVerification: {template: \"demo:user:{sub}\"}\n"),
		app("device", "global", "deviceCode", ""),
	}
	b, err := bundle.Parse([]bundle.File{{Name: "apps.yaml", Data: []byte(strings.Join(docs, "---\n"))}}, bundle.Options{})
	if err != nil {
		t.Fatalf("test bundle: %v", err)
	}
	return b
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, p: newFakeProvider(t), home: t.TempDir(), queue: &memQueue{}, logs: &syncBuffer{},
		clock: &clock{t: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)}}
	var err error
	if h.store, err = filestore.New(h.home); err != nil {
		t.Fatal(err)
	}
	if h.keyring, _, err = aesseal.Ensure(h.home, "", false); err != nil {
		t.Fatal(err)
	}
	h.bundle = testBundle(t, h.p.URL())
	h.m = h.newManager(h.store)
	return h
}

func (h *harness) newManager(store domain.Store) *Manager {
	h.t.Helper()
	m, err := New(Config{
		Bundle: h.bundle, Store: store, Sealer: h.keyring, Queue: h.queue,
		StateKeys: h.keyring.DerivedKeys("state"), BaseURL: "http://127.0.0.1:8080",
		Logger: logging.New(h.logs, slog.LevelDebug), Now: h.clock.Now,
		ProviderTimeout: 2 * time.Second,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { _ = m.Close(context.Background()) })
	return m
}

func auth(global, user string) domain.TurnAuth {
	return domain.TurnAuth{Subjects: &domain.Subjects{Global: global, User: user}}
}

func appRef(name string) domain.ObjectRef { return domain.ObjectRef{Kind: "OAuthApp", Name: name} }

var testResume = &domain.ResumeInfo{
	SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: "1700000000.000100", AgentName: "planner",
	Origin: map[string]any{"connector": "slack-main", "channel": "C123"},
	Auth:   auth("demo:team:T1", "demo:user:alice"),
}

// request asks for a token of app as (global, user).
func (h *harness) request(app string, mut ...func(*TokenRequest)) Result {
	h.t.Helper()
	req := TokenRequest{AppRef: appRef(app), Auth: auth("demo:team:T1", "demo:user:alice"), Resume: testResume}
	for _, f := range mut {
		f(&req)
	}
	return h.m.GetAccessToken(context.Background(), req)
}

// consent runs the flow to a stored grant and returns the ready result.
func (h *harness) consent(app, sub string) Result {
	h.t.Helper()
	res := h.request(app)
	if res.Status != StatusAuthorizationRequired {
		h.t.Fatalf("want authorization_required, got %+v", res)
	}
	code, state := h.p.approve(res.AuthorizationURL, sub)
	if _, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps[app], map[string][]string{"code": {code}, "state": {state}}); err != nil {
		h.t.Fatalf("callback: %v", err)
	}
	res = h.request(app)
	if res.Status != StatusReady {
		h.t.Fatalf("after consent want ready, got %+v", res)
	}
	return res
}
