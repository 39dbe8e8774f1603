package lambdaentry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// sqsFixture is testdata/sqs-fifo-batch.json (a real SQS FIFO batch's
// shape) after a JSON round trip.
func sqsFixture(t *testing.T) events.SQSEvent {
	t.Helper()
	raw, err := os.ReadFile("testdata/sqs-fifo-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	again, _ := json.Marshal(ev)
	var back events.SQSEvent
	if err := json.Unmarshal(again, &back); err != nil || len(back.Records) != 1 || back.Records[0].Attributes["MessageGroupId"] != "default/chat-1/assistant" || back.Records[0].EventSource != "aws:sqs" {
		t.Fatalf("fixture round trip: %v", err)
	}
	return ev
}

// batchOf is a batch of records "<group>/<n>": the fixture's record with
// that message id, group and an event of id "<group>/<n>" as its body.
func batchOf(t *testing.T, ids ...string) events.SQSEvent {
	t.Helper()
	tmpl := sqsFixture(t).Records[0]
	var out events.SQSEvent
	for _, id := range ids {
		r := tmpl
		r.MessageId = id
		r.Attributes = map[string]string{"MessageGroupId": strings.Split(id, "/")[0]}
		body, _ := json.Marshal(domain.Event{ID: id, InstanceKey: "k", AgentName: "a", Input: "hi"})
		r.Body = string(body)
		out.Records = append(out.Records, r)
	}
	return out
}

func failures(r events.SQSEventResponse) []string {
	out := []string{}
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

// recorder handles events by a rule and records the order it saw them in.
type recorder struct {
	mu   sync.Mutex
	seen []string
	rule func(id string) error
}

func (r *recorder) handle(_ context.Context, ev domain.Event) error {
	r.mu.Lock()
	r.seen = append(r.seen, ev.ID)
	r.mu.Unlock()
	if r.rule != nil {
		return r.rule(ev.ID)
	}
	return nil
}

func (r *recorder) inGroup(g string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, id := range r.seen {
		if strings.HasPrefix(id, g+"/") {
			out = append(out, id)
		}
	}
	return out
}

func TestSQSBatchReturnsAFailureAndTheRestOfItsGroupOnly(t *testing.T) {
	rec := &recorder{rule: func(id string) error {
		if id == "a/2" {
			return errors.New("store unavailable")
		}
		return nil
	}}
	b := sqsBatch{handle: rec.handle, log: slog.New(slog.DiscardHandler)}
	resp := b.run(context.Background(), batchOf(t, "a/1", "b/1", "a/2", "b/2", "a/3", "c/1"))
	if got := failures(resp); !slices.Equal(got, []string{"a/2", "a/3"}) {
		t.Fatalf("failures %v, want a/2 and the later a/3", got)
	}
	if got := rec.inGroup("a"); !slices.Equal(got, []string{"a/1", "a/2"}) {
		t.Fatalf("group a ran %v: a/3 must not run after a/2 failed", got)
	}
	if got := rec.inGroup("b"); !slices.Equal(got, []string{"b/1", "b/2"}) {
		t.Fatalf("group b ran %v, want b/1 then b/2", got)
	}
	// The response is what Lambda reads: an empty list, never null.
	ok := b.run(context.Background(), batchOf(t, "c/2"))
	raw, _ := json.Marshal(ok)
	if string(raw) != `{"batchItemFailures":[]}` {
		t.Fatalf("all-done response %s", raw)
	}
}

func TestSQSBatchRunsGroupsInParallel(t *testing.T) {
	// Group a's first event waits until group b's has started: run one
	// group after the other, the batch would wait out the timeout.
	bStarted := make(chan struct{})
	var once sync.Once
	rec := &recorder{rule: func(id string) error {
		switch id {
		case "b/1":
			once.Do(func() { close(bStarted) })
		case "a/1":
			select {
			case <-bStarted:
			case <-time.After(5 * time.Second):
				return errors.New("group b did not start while group a ran")
			}
		}
		return nil
	}}
	b := sqsBatch{handle: rec.handle, log: slog.New(slog.DiscardHandler)}
	if got := failures(b.run(context.Background(), batchOf(t, "a/1", "a/2", "b/1"))); len(got) != 0 {
		t.Fatalf("failures %v", got)
	}
	if got := rec.inGroup("a"); !slices.Equal(got, []string{"a/1", "a/2"}) {
		t.Fatalf("group a ran %v", got)
	}
}

func TestSQSBatchFailsCorruptBodiesPanicsAndLateStarts(t *testing.T) {
	rec := &recorder{rule: func(id string) error {
		if id == "p/1" {
			panic("boom: " + id)
		}
		return nil
	}}
	b := sqsBatch{handle: rec.handle, log: slog.New(slog.DiscardHandler)}
	batch := batchOf(t, "x/1", "x/2", "p/1", "p/2", "ok/1")
	batch.Records[0].Body = `{"not":"an event"}`
	if got := failures(b.run(context.Background(), batch)); !slices.Equal(got, []string{"x/1", "x/2", "p/1", "p/2"}) {
		t.Fatalf("failures %v", got)
	}
	if got := rec.inGroup("ok"); len(got) != 1 {
		t.Fatalf("the healthy group ran %v", got)
	}
	// With less than minLeft of the invocation left nothing starts.
	rec2 := &recorder{}
	b2 := sqsBatch{handle: rec2.handle, log: slog.New(slog.DiscardHandler), minLeft: time.Minute}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got := failures(b2.run(ctx, batchOf(t, "a/1", "b/1"))); len(got) != 2 {
		t.Fatalf("failures %v, want both", got)
	}
	if len(rec2.seen) != 0 {
		t.Fatalf("started %v with too little time left", rec2.seen)
	}
}

// turnBundle writes a bundle with one swarm whose agent's model is the
// scripted model at url.
func turnBundle(t *testing.T, url string) string {
	t.Helper()
	dir := t.TempDir()
	raw, err := os.ReadFile("testdata/bundle/app.yaml")
	if err != nil {
		t.Fatal(err)
	}
	turns := fmt.Sprintf(`apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: scripted}
spec: {provider: openai, model: scripted, endpoint: %s/v1}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec: {modelRef: Model/scripted, systemPrompt: "You answer."}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: default}
spec: {agents: [Agent/assistant], entrypoint: Agent/assistant}
`, url)
	for name, body := range map[string]string{"app.yaml": string(raw), "turns.yaml": turns} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestTurnFunctionRunsSQSBatchesOnce(t *testing.T) {
	functionEnv(t)
	m, err := scripted.New(scripted.Script{Turns: []scripted.Turn{{UserContains: "hello", Text: "hi there"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	url, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	t.Setenv(config.Bundle, turnBundle(t, url))
	f, err := build(context.Background(), os.Getenv, TurnEvents, "turn", slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	batch := sqsFixture(t)
	ev := domain.Event{ID: "ev-1", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: "chat-1", AgentName: "assistant",
		Input: `{"type":"user.input","text":"hello"}`, Metadata: map[string]string{"eventType": "user.input"}}
	body, _ := json.Marshal(ev)
	batch.Records[0].Body = string(body)
	raw, _ := json.Marshal(batch)
	for delivery := 1; delivery <= 2; delivery++ {
		out, err := f.Invoke(context.Background(), raw)
		if err != nil {
			t.Fatal(err)
		}
		if resp, ok := out.(events.SQSEventResponse); !ok || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d: %#v", delivery, out)
		}
	}
	st, err := f.app.Turns.Inspect(context.Background(), turn.InstanceKey{Swarm: "default", Key: "chat-1", Agent: "assistant"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Turns) != 1 {
		t.Fatalf("%d turns after a duplicate delivery, want 1", len(st.Turns))
	}
	for _, tn := range st.Turns {
		if tn.Status != turn.TurnCompleted || tn.Final != "hi there" {
			t.Fatalf("turn %s: %s %q", tn.ID, tn.Status, tn.Final)
		}
	}
	if n := len(m.Requests()); n != 1 {
		t.Fatalf("the model was called %d times, want once", n)
	}

	// Its function URL serves the turn's event stream, and nothing else.
	var turnID string
	for id := range st.Turns {
		turnID = id
	}
	urlEvent := func(path string) json.RawMessage {
		raw, err := os.ReadFile(urlFixture)
		if err != nil {
			t.Fatal(err)
		}
		var ev map[string]any
		_ = json.Unmarshal(raw, &ev)
		ev["rawPath"], ev["rawQueryString"], ev["queryStringParameters"] = path, "", nil
		ev["requestContext"].(map[string]any)["http"].(map[string]any)["path"] = path
		out, _ := json.Marshal(ev)
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := f.Invoke(ctx, urlEvent("/v1/instances/default/chat-1/assistant/turns/"+turnID+"/events"))
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(*events.LambdaFunctionURLStreamingResponse)
	streamed, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "text/event-stream" ||
		!strings.Contains(string(streamed), "event: turn.started\n") || !strings.Contains(string(streamed), "event: turn.completed\n") {
		t.Fatalf("stream: %d %v\n%s", resp.StatusCode, resp.Headers, streamed)
	}
	out, err = f.Invoke(ctx, urlEvent("/v1/oauth/pending"))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(*events.LambdaFunctionURLStreamingResponse); resp.StatusCode != 404 {
		t.Fatalf("a runtime route on the turn function's URL: %d", resp.StatusCode)
	}
}

func TestTurnFunctionRefusesWhatItCannotRun(t *testing.T) {
	functionEnv(t)
	if _, err := build(context.Background(), os.Getenv, TurnEvents, "turn", slog.New(slog.DiscardHandler), Options{}); err == nil || !strings.Contains(err.Error(), "no Swarm") {
		t.Fatalf("a bundle without a swarm: %v", err)
	}
	// An SQS batch at an HTTP function is an error, not a 404.
	f, err := build(context.Background(), os.Getenv, RuntimeRoutes, "gettoken", slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(sqsFixture(t))
	if _, err := f.Invoke(context.Background(), raw); err == nil || !strings.Contains(err.Error(), "runs no turns") {
		t.Fatalf("err = %v", err)
	}
}
