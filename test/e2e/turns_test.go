package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/filequeue"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// turnsBundle: the tools bundle plus a Model on the scripted model (a
// fixed script, not a language model), an Agent that may use whoami, and
// the default Swarm.
func turnsBundle(p *e2ekit.Provider, modelURL string) string {
	return toolsBundle(p, "http://127.0.0.1:1") + fmt.Sprintf(`---
apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: scripted}
spec: {provider: openai, model: scripted, endpoint: %q}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec:
  modelRef: Model/scripted
  systemPrompt: Answer briefly.
  tools: {explicitToolIds: ["demo:whoami"]}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: default}
spec: {agents: [Agent/assistant], entrypoint: Agent/assistant}
`, modelURL)
}

// turnEvents returns a turn's events after seq.
func (s *server) turnEvents(t *testing.T, instance, turnID string) []map[string]any {
	t.Helper()
	code, out := s.call(t, "GET", "/v1/instances/default/"+instance+"/assistant/turns/"+turnID+"/events", nil)
	if code != 200 {
		t.Fatalf("turn events: %d %v", code, out)
	}
	var evs []map[string]any
	for _, e := range out["data"].([]any) {
		evs = append(evs, e.(map[string]any))
	}
	return evs
}

// waitFor polls the instance until one of its turns emitted an event of
// type typ and returns that turn's id and the event.
func (s *server) waitFor(ctx context.Context, t *testing.T, instance, typ string) (string, map[string]any) {
	t.Helper()
	for ctx.Err() == nil {
		code, out := s.call(t, "GET", "/v1/instances/default/"+instance+"/assistant", nil)
		if code == 200 {
			for _, tr := range out["recentTurns"].([]any) {
				id := tr.(map[string]any)["id"].(string)
				for _, e := range s.turnEvents(t, instance, id) {
					if e["type"] == typ {
						return id, e
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no %s on instance %s", typ, instance)
	return "", nil
}

// TestTurnParksForConsentAndResumes is the README's turn walkthrough, on
// the real binary: a message → the agent (driven by the scripted model)
// calls the whoami http tool → the call parks with a consent link →
// consent in Chromium → the same call resumes and the agent answers,
// without a second message. Duplicate auth.granted deliveries run the tool
// no second time; a message sent while parked waits and runs after.
func TestTurnParksForConsentAndResumes(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	sm, err := scripted.New(scripted.DemoScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	modelURL, err := sm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{Clients: []e2ekit.Client{{
		ClientID: clientID, ClientSecret: clientSecret,
		RedirectURIs: []string{base + "/oauth/callback/e2e-user"},
		GrantTypes:   []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken},
	}}})
	home := t.TempDir()
	srv := startServer(t, port, home, map[string]string{"turns.yaml": turnsBundle(p, modelURL+"/v1")}, "E2E_CLIENT_SECRET="+clientSecret)
	browser := e2ekit.StartBrowser(t)

	const instance = "thread-1"
	post := func(id, text string) {
		t.Helper()
		code, out := srv.call(t, "POST", "/v1/instances/default/"+instance+"/events", map[string]any{
			"id": id, "text": text,
			"auth": map[string]any{"actor": map[string]string{"type": "user", "id": "alice"},
				"subjects": map[string]string{"user": "demo:user:alice"},
				"claims":   map[string]any{"sub": "alice", "scope": "profile.read"}},
		})
		if code != 202 {
			t.Fatalf("post: %d %v", code, out)
		}
	}
	post("msg-1", "who am I?")
	turnID, parked := srv.waitFor(ctx, t, instance, "turn.parked")
	link := parked["data"].(map[string]any)["authorizationUrl"].(string)
	if !strings.HasPrefix(link, p.AuthorizationURL) {
		t.Fatalf("consent link %s", link)
	}
	// A message while parked waits for the turn.
	post("msg-2", "are you still there?")

	if _, err := browser.Authorize(ctx, link, "alice"); err != nil {
		t.Fatalf("consent: %v", err)
	}
	_, done := srv.waitFor(ctx, t, instance, "turn.completed")
	final, _ := done["data"].(map[string]any)["final"].(string)
	if !strings.Contains(final, "Alice") {
		t.Fatalf("the agent's answer: %q", final)
	}
	var types []string
	for _, e := range srv.turnEvents(t, instance, turnID) {
		types = append(types, e["type"].(string))
	}
	got := strings.Join(types, ",")
	if strings.Count(got, "tool.called") != 1 || !strings.Contains(got, "turn.parked") || !strings.Contains(got, "turn.resumed") || strings.Count(got, "tool.completed") != 1 {
		t.Fatalf("events of the turn: %s", got)
	}

	// auth.granted delivered again — after the queue's dedup window too:
	// new ids, the same session — finds nothing parked.
	q, err := filequeue.New(filepath.Join(home, "queue"))
	if err != nil {
		t.Fatal(err)
	}
	session := parked["data"].(map[string]any)["authSessionId"].(string)
	for i := range 5 {
		ev := domain.Event{ID: fmt.Sprintf("%s-again-%d", session, i), SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"},
			InstanceKey: instance, AgentName: "assistant", Input: `{"type":"auth.granted"}`,
			Metadata: map[string]string{"eventType": "auth.granted", "authSessionId": session}}
		if err := q.Enqueue(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		left, _ := q.List(ctx)
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	types = types[:0]
	for _, e := range srv.turnEvents(t, instance, turnID) {
		types = append(types, e["type"].(string))
	}
	if again := strings.Join(types, ","); again != got {
		t.Fatalf("duplicate auth.granted changed the turn:\n%s\n%s", got, again)
	}
	// The message sent while parked ran afterwards, in its own turn.
	code, out := srv.call(t, "GET", "/v1/instances/default/"+instance+"/assistant", nil)
	if code != 200 || len(out["recentTurns"].([]any)) != 2 {
		t.Fatalf("instance: %d %v", code, out)
	}
	raw, _ := json.Marshal(out)
	srv.record("inspect", raw)

	// Pause holds new events; resume runs them, in order.
	if code, out := srv.call(t, "POST", "/v1/instances/default/"+instance+"/assistant/pause", nil); code != 200 || out["status"] != "paused" {
		t.Fatalf("pause: %d %v", code, out)
	}
	post("msg-3", "first while paused")
	post("msg-4", "second while paused")
	time.Sleep(time.Second) // the worker polls every 200 ms: it would have started a turn by now
	if code, out := srv.call(t, "GET", "/v1/instances/default/"+instance+"/assistant", nil); code != 200 || out["backlog"] != float64(2) || len(out["recentTurns"].([]any)) != 2 {
		t.Fatalf("paused: %d backlog %v, %d turns", code, out["backlog"], len(out["recentTurns"].([]any)))
	}
	if code, out := srv.call(t, "POST", "/v1/instances/default/"+instance+"/assistant/resume", nil); code != 200 || out["status"] != "active" {
		t.Fatalf("resume: %d %v", code, out)
	}
	for ctx.Err() == nil {
		_, out = srv.call(t, "GET", "/v1/instances/default/"+instance+"/assistant", nil)
		if out["backlog"] == float64(0) && out["activeTurn"] == nil && len(out["recentTurns"].([]any)) == 4 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// By start time, the two held messages ran last, in the order sent.
	turns := out["recentTurns"].([]any)
	sort.Slice(turns, func(i, j int) bool {
		return turns[i].(map[string]any)["startedAt"].(string) < turns[j].(map[string]any)["startedAt"].(string)
	})
	var inputs []string
	for _, tr := range turns {
		evs := srv.turnEvents(t, instance, tr.(map[string]any)["id"].(string))
		// Posted ids are scoped to the instance: "<id>@<instance>".
		id, _, _ := strings.Cut(evs[0]["data"].(map[string]any)["eventId"].(string), "@")
		inputs = append(inputs, id)
	}
	if got := strings.Join(inputs, ","); !strings.HasSuffix(got, "in:msg-3,in:msg-4") {
		t.Fatalf("turns ran for %s", got)
	}

	// Leak scan: the token the turn's tool used (read back through the
	// runtime route, as a tool would get it) appears in no file of the
	// home, no log, no turn event or answer, and nothing the model was
	// sent.
	ready := srv.token(t, tokenReq{App: "e2e-user", User: "demo:user:alice", Instance: instance})
	if ready["status"] != "ready" {
		t.Fatalf("the grant the turn stored: %v", ready)
	}
	secret := ready["accessToken"].(string)
	var evs []byte
	for _, tr := range out["recentTurns"].([]any) {
		b, _ := json.Marshal(srv.turnEvents(t, instance, tr.(map[string]any)["id"].(string)))
		evs = append(evs, b...)
	}
	reqs, _ := json.Marshal(sm.Requests())
	srv.stop()
	leak := func(where string, data []byte) {
		if len(secret) >= 16 && strings.Contains(string(data), secret) {
			t.Errorf("the access token appears in %s", where)
		}
	}
	filepath.Walk(home, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			b, _ := os.ReadFile(path)
			leak(path, b)
		}
		return nil
	})
	leak("server stdout (JSON logs)", []byte(srv.Stdout.String()))
	leak("server stderr", []byte(srv.Stderr.String()))
	leak("turn events", evs)
	leak("what the scripted model was sent", reqs)
	for _, r := range srv.responses {
		if r.what != "ready" {
			leak("response of "+r.what, r.body)
		}
	}
	if !strings.Contains(srv.Stdout.String(), `"traceId"`) || !strings.Contains(srv.Stdout.String(), "turn ended") {
		t.Error("the server's logs do not show the turn with its trace id")
	}
}
