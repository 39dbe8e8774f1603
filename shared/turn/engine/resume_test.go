package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/turnfile"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// consentTools: each tool named in sessions needs its own consent (its
// session id) until granted; the others answer at once. It records the
// Idempotency-Key of every run.
type consentTools struct {
	fakeTools
	mu       sync.Mutex
	sessions map[string]string // tool → auth session id
	granted  map[string]bool   // session → granted
	keys     map[string][]string
	parked   map[string]int // session → times a call parked on it
}

func newConsentTools(sessions map[string]string) *consentTools {
	// The embedded fake's own consent (whoami's as-1) is not this one's.
	return &consentTools{fakeTools: fakeTools{granted: true}, sessions: sessions, granted: map[string]bool{}, keys: map[string][]string{}, parked: map[string]int{}}
}

func (c *consentTools) grant(session string) { c.mu.Lock(); c.granted[session] = true; c.mu.Unlock() }

func (c *consentTools) Invoke(ctx context.Context, in Invocation) Outcome {
	c.mu.Lock()
	if s, ok := c.sessions[in.Call.Tool]; ok && !c.granted[s] {
		c.parked[s]++
		c.mu.Unlock()
		return Outcome{Kind: OutcomeAuthorizationRequired, AuthSession: s, AuthorizationURL: "https://idp.example/auth?session=" + s}
	}
	c.keys[in.Call.Tool] = append(c.keys[in.Call.Tool], in.IdempotencyKey)
	c.mu.Unlock()
	return c.fakeTools.Invoke(ctx, in)
}

func (c *consentTools) Catalog(context.Context, turn.Turn) ([]Tool, error) {
	var out []Tool
	for _, name := range []string{"echo", "lookup", "whoami", "calendar"} {
		out = append(out, Tool{Spec: model.ToolSpec{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, Idempotent: name == "lookup"})
	}
	return out, nil
}

func (f *fixture) grantSession(t *testing.T, eventID, session string) {
	t.Helper()
	ev := f.event(eventID, `{"type":"auth.granted"}`)
	ev.Metadata = map[string]string{"eventType": "auth.granted", "authSessionId": session}
	if err := f.e.Handle(context.Background(), ev); err != nil {
		t.Fatalf("Handle %s: %v", eventID, err)
	}
}

// TestTwoConsentsInOneStep: a step calls two tools that each need their
// own consent; the turn parks on both. Each grant — delivered twice —
// runs exactly its session's call, once; the turn goes on only when both
// have their results.
func TestTwoConsentsInOneStep(t *testing.T) {
	f := newFixture(t, callTools("whoami", "calendar", "echo"), say("all connected"))
	tools := newConsentTools(map[string]string{"whoami": "as-w", "calendar": "as-c"})
	f.e.Tools = tools
	f.send(t, "ev-1", "connect both")
	tr := lastTurn(f.state(t))
	if tr.Status != turn.TurnParked || tools.ran("echo") != 1 {
		t.Fatalf("turn %s, echo ran %d", tr.Status, tools.ran("echo"))
	}
	tools.grant("as-w")
	f.grantSession(t, "g-w-1", "as-w")
	f.grantSession(t, "g-w-2", "as-w")
	st := f.state(t)
	if tr = lastTurn(st); tr.Status != turn.TurnParked || tools.ran("whoami") != 1 || tools.ran("calendar") != 0 || f.model.count() != 1 {
		t.Fatalf("after whoami's consent: turn %s, whoami %d, calendar %d, model calls %d", tr.Status, tools.ran("whoami"), tools.ran("calendar"), f.model.count())
	}
	tools.grant("as-c")
	f.grantSession(t, "g-c-1", "as-c")
	f.grantSession(t, "g-c-2", "as-c")
	st = f.state(t)
	tr = lastTurn(st)
	if tr.Status != turn.TurnCompleted || tr.Final != "all connected" || tools.ran("whoami") != 1 || tools.ran("calendar") != 1 || f.model.count() != 2 {
		t.Fatalf("after both: turn %s %q, whoami %d, calendar %d, model calls %d", tr.Status, tr.Final, tools.ran("whoami"), tools.ran("calendar"), f.model.count())
	}
	// The model read the three results in the order of its calls.
	req := f.model.calls[1].Messages
	var got []string
	for _, m := range req {
		for _, p := range m.Content {
			if p.Type == message.ToolResult {
				got = append(got, p.CallID)
			}
		}
	}
	if strings.Join(got, ",") != "call-0-whoami,call-1-calendar,call-2-echo" {
		t.Fatalf("results in the order %v", got)
	}
}

// TestLateGrantForAnEarlierSession: the turn parked on whoami's consent
// (as-w1), the user never finished it, the consent was asked again in a
// later turn (as-w2)... here: a later step parks on a newer session while
// a grant for the older one arrives late. Only the call parked on the
// granted session runs, once; the late grant runs nothing.
func TestLateGrantForAnEarlierSession(t *testing.T) {
	f := newFixture(t, callTools("whoami"), say("could not connect"), callTools("calendar"), say("calendar connected"))
	tools := newConsentTools(map[string]string{"whoami": "as-old", "calendar": "as-new"})
	f.e.Tools = tools
	f.send(t, "ev-1", "who am I?")
	expired := f.event("exp-old", `{"type":"auth.expired"}`)
	expired.Metadata = map[string]string{"authSessionId": "as-old"}
	if err := f.e.Handle(context.Background(), expired); err != nil {
		t.Fatal(err)
	}
	f.send(t, "ev-2", "my calendar then")
	if tr := lastTurn(f.state(t)); tr.Status != turn.TurnParked {
		t.Fatalf("second turn %s", tr.Status)
	}
	// The old session's grant arrives late, twice.
	tools.grant("as-old")
	f.grantSession(t, "g-old-1", "as-old")
	f.grantSession(t, "g-old-2", "as-old")
	if tr := lastTurn(f.state(t)); tr.Status != turn.TurnParked || tools.ran("whoami") != 0 || tools.ran("calendar") != 0 {
		t.Fatalf("the late grant ran something: turn %s, whoami %d, calendar %d", tr.Status, tools.ran("whoami"), tools.ran("calendar"))
	}
	tools.grant("as-new")
	f.grantSession(t, "g-new", "as-new")
	f.grantSession(t, "g-new", "as-new")
	if tr := lastTurn(f.state(t)); tr.Status != turn.TurnCompleted || tr.Final != "calendar connected" || tools.ran("calendar") != 1 || tools.ran("whoami") != 0 {
		t.Fatalf("turn %s %q, calendar %d, whoami %d", tr.Status, tr.Final, tools.ran("calendar"), tools.ran("whoami"))
	}
}

// flakyStore fails the worker's commits from the nth on: all of them
// (killed) or the nth only (a transient store error).
type flakyStore struct {
	turn.Store
	n         int64
	transient bool
	seen      atomic.Int64
}

var errStore = errors.New("store unavailable")

func (s *flakyStore) Commit(ctx context.Context, c turn.Commit) error {
	n := s.seen.Add(1)
	if n == s.n || n > s.n && !s.transient {
		return errStore
	}
	return s.Store.Commit(ctx, c)
}

// TestLosingAnyCommitOfAParkingStep: a step calls [a tool that needs
// consent, another tool]; each commit of it in turn is lost — the worker
// killed there, or the store failing that one write — and the queue
// redelivers the event. The turn always ends parked with its consent
// link out (never failed history_invalid), and the consent then finishes
// it (issue 16, item 9).
func TestLosingAnyCommitOfAParkingStep(t *testing.T) {
	// The model answers by what it is sent, so a redelivery that asks
	// again (the answer's commit was lost) gets the same calls.
	script := func() []func(model.Request) model.Response {
		answer := func(req model.Request) model.Response {
			if last := req.Messages[len(req.Messages)-1]; last.Role == message.Tool {
				return say("you are alice")(req)
			}
			return callTools("whoami", "echo")(req)
		}
		return []func(model.Request) model.Response{answer, answer, answer, answer}
	}
	clean := newFixture(t, script()...)
	counter := &flakyStore{Store: clean.store, n: 1 << 40}
	clean.e.Store = counter
	clean.send(t, "ev-1", "who am I?")
	parkCommits := int(counter.seen.Load())
	if tr := lastTurn(clean.state(t)); tr.Status != turn.TurnParked || parkCommits < 5 {
		t.Fatalf("clean run: %s after %d commits", tr.Status, parkCommits)
	}
	for _, transient := range []bool{false, true} {
		for n := 2; n <= parkCommits; n++ {
			t.Run(fmt.Sprintf("transient=%v/commit %d", transient, n), func(t *testing.T) {
				f := newFixture(t, script()...)
				flaky := &flakyStore{Store: f.store, n: int64(n), transient: transient}
				worker := &Engine{Store: flaky, Config: f.e.Config, Tools: f.tools, Queue: f.e.Queue}
				ev := f.event("ev-1", `{"type":"user.input","text":"who am I?"}`)
				if err := worker.Handle(context.Background(), ev); !errors.Is(err, errStore) {
					t.Fatalf("the first delivery: %v", err)
				}
				// Redelivered: to a fresh worker, or to the same one.
				next := f.e
				if transient {
					next = worker
				}
				if err := next.Handle(context.Background(), ev); err != nil {
					t.Fatalf("the redelivery: %v", err)
				}
				st := f.state(t)
				tr := lastTurn(st)
				if tr.Status == turn.TurnCompleted && strings.Contains(history(st), "tool:result:call-0-whoami") &&
					strings.Contains(resultOf(st, "call-0-whoami"), CodeOutcomeUnknown) && !strings.Contains(eventTypes(st, tr.ID), turn.EvTurnParked) {
					// The lost commit was whoami's own park: it was started,
					// and whoami is not idempotent, so its outcome is unknown
					// (no link went out). The turn still ends cleanly.
					return
				}
				if tr.Status != turn.TurnParked {
					t.Fatalf("after the redelivery the turn is %s (%+v), want parked: %s", tr.Status, tr.Error, history(st))
				}
				if !strings.Contains(eventTypes(st, tr.ID), turn.EvTurnParked) {
					t.Fatalf("no consent link: %s", eventTypes(st, tr.ID))
				}
				f.tools.mu.Lock()
				f.tools.granted = true
				f.tools.mu.Unlock()
				f.granted(t, "g-1")
				f.granted(t, "g-1")
				st = f.state(t)
				if tr = lastTurn(st); tr.Status != turn.TurnCompleted || tr.Final != "you are alice" || f.tools.ran("whoami") != 1 || f.tools.ran("echo") > 1 {
					t.Fatalf("after the consent: %s %q (%+v), whoami %d, echo %d", tr.Status, tr.Final, tr.Error, f.tools.ran("whoami"), f.tools.ran("echo"))
				}
				if bad := message.CheckToolPairs(mustFold(st)); len(bad) != 0 {
					t.Fatalf("history %+v", bad)
				}
			})
		}
	}
}

// resultOf is the output of the tool_result for callID in the history.
func resultOf(st turn.State, callID string) string {
	for _, m := range mustFold(st) {
		for _, p := range m.Content {
			if p.Type == message.ToolResult && p.CallID == callID {
				return string(p.Output)
			}
		}
	}
	return ""
}

// TestIdempotentReRunsNonIdempotentDoesNot: the worker dies after a call
// is marked started and before its result is stored. The redelivered
// event re-runs an idempotent tool with the same Idempotency-Key; a
// non-idempotent one is answered E_TOOL_OUTCOME_UNKNOWN and never runs
// again.
func TestIdempotentReRunsNonIdempotentDoesNot(t *testing.T) {
	for _, tc := range []struct {
		tool       string
		runs       int
		outcomeErr bool
	}{
		{tool: "lookup", runs: 2, outcomeErr: false},
		{tool: "echo", runs: 1, outcomeErr: true},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			f := newFixture(t, callTools(tc.tool), say("done"))
			tools := newConsentTools(nil)
			f.e.Tools = tools
			// Commits: 1 start, 2 the answer, 3 the call started, 4 its
			// result: lose the 4th, as a killed worker does.
			flaky := &flakyStore{Store: f.store, n: 4}
			worker := &Engine{Store: flaky, Config: f.e.Config, Tools: tools}
			ev := f.event("ev-1", `{"type":"user.input","text":"go"}`)
			if err := worker.Handle(context.Background(), ev); !errors.Is(err, errStore) {
				t.Fatalf("first delivery: %v", err)
			}
			if err := f.e.Handle(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			st := f.state(t)
			tr := lastTurn(st)
			if tr.Status != turn.TurnCompleted || tools.ran(tc.tool) != tc.runs {
				t.Fatalf("turn %s, %s ran %d times, want %d", tr.Status, tc.tool, tools.ran(tc.tool), tc.runs)
			}
			keys := tools.keys[tc.tool]
			want := idempotencyKey(tr.ID, "call-0-"+tc.tool)
			for _, k := range keys {
				if k != want {
					t.Fatalf("Idempotency-Key %q, want %q (one per call, the same on every run)", k, want)
				}
			}
			result := resultOf(st, "call-0-"+tc.tool)
			if strings.Contains(result, CodeOutcomeUnknown) != tc.outcomeErr {
				t.Fatalf("the model was given %s", result)
			}
		})
	}
}

// TestPauseResumeTwiceDrainsTheBacklog: pause, resume, pause again with a
// message backlogged, resume: the backlog drains, in order.
func TestPauseResumeTwiceDrainsTheBacklog(t *testing.T) {
	f := newFixture(t, say("one"), say("two"), say("three"))
	ctx := context.Background()
	f.send(t, "ev-1", "first")
	for i, msg := range []string{"second", "third"} {
		if err := f.e.Pause(ctx, f.key); err != nil {
			t.Fatal(err)
		}
		f.send(t, fmt.Sprint("ev-", i+2), msg)
		if st := f.state(t); len(st.Backlog) != 1 || st.Instance.Status != turn.Paused {
			t.Fatalf("paused %d: backlog %d, status %s", i+1, len(st.Backlog), st.Instance.Status)
		}
		if err := f.e.Resume(ctx, f.key); err != nil {
			t.Fatal(err)
		}
		f.drain(t)
	}
	st := f.state(t)
	if h := history(st); h != "user:first | assistant:one | user:second | assistant:two | user:third | assistant:three" || len(st.Backlog) != 0 {
		t.Fatalf("history %s, backlog %d", h, len(st.Backlog))
	}
}

// TestResultsInCallOrder: when maxToolCallsPerStep refuses a call, the
// model still reads every result in the order it made the calls
// (issue 16, item 4).
func TestResultsInCallOrder(t *testing.T) {
	f := newFixture(t, callTools("echo", "lookup", "echo"), say("done"))
	f.e.Config = fixedConfig{Agent{Model: f.model, MaxSteps: 8, MaxToolCallsPerStep: 2}}
	f.send(t, "ev-1", "three calls")
	var got []string
	for _, m := range f.model.calls[1].Messages {
		for _, p := range m.Content {
			if p.Type == message.ToolResult {
				got = append(got, p.CallID)
			}
		}
	}
	if strings.Join(got, ",") != "call-0-echo,call-1-lookup,call-2-echo" {
		t.Fatalf("results in the order %v", got)
	}
	if !strings.Contains(string(f.model.calls[1].Messages[len(f.model.calls[1].Messages)-1].Content[0].Output), CodeTooManyCalls) {
		t.Fatalf("the refused call's result: %+v", f.model.calls[1].Messages)
	}
}

// TestAFailedTurnAnswersEveryCall: a turn that fails with a call still
// waiting (here: parked, in a state an engine before issue 16 could
// leave: the step ended around it) gives that call a result, so the
// instance's next turn has a valid history.
func TestAFailedTurnAnswersEveryCall(t *testing.T) {
	f := newFixture(t, callTools("whoami", "echo"), say("next turn works"))
	f.send(t, "ev-1", "who am I?")
	st := f.state(t)
	tr := lastTurn(st)
	// Forge the lost-park state: the step closed with whoami parked.
	tt := tr
	tt.Status, tt.StepAnswered = turn.TurnRunning, false
	inst := st.Instance
	inst.Version++
	if err := f.store.Commit(context.Background(), turn.Commit{Expect: st.Instance.Version, Instance: inst, Turn: &tt}); err != nil {
		t.Fatal(err)
	}
	f.send(t, "ev-cont", "carry on") // backlogged behind the running turn…
	cont := f.event("cont-1", `{"type":"turn.continue"}`)
	if err := f.e.Handle(context.Background(), cont); err != nil { // …and a continuation carries the turn on
		t.Fatal(err)
	}
	st = f.state(t)
	if got := st.Turns[tr.ID]; got.Status != turn.TurnFailed || got.Error == nil || got.Error.Code != "history_invalid" {
		t.Fatalf("the forged turn: %s %+v", got.Status, got.Error)
	}
	if bad := message.CheckToolPairs(mustFold(st)); len(bad) != 0 {
		t.Fatalf("the failed turn left the history invalid: %+v", bad)
	}
	if next := lastTurn(st); next.ID == tr.ID || next.Status != turn.TurnCompleted || next.Final != "next turn works" {
		t.Fatalf("the next turn: %s %q (%+v)", next.Status, next.Final, next.Error)
	}
	_ = domain.Event{}
	_ = turnfile.New
}

// TestToolFailedSaysWhat: a failed call's tool.failed event carries the
// error's code and its message, cut short on a rune boundary (issue 18,
// item 3: only the scripted model's reply revealed it).
func TestToolFailedSaysWhat(t *testing.T) {
	f := newFixture(t, callTools("echo", "ghost"), say("done"))
	long := strings.Repeat("é", 400)
	f.e.Tools = &failingTools{msg: long}
	f.send(t, "ev-1", "go")
	st := f.state(t)
	var failed []map[string]any
	for _, e := range st.TurnEvents[lastTurn(st).ID] {
		if e.Type == turn.EvToolFailed {
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			failed = append(failed, d)
		}
	}
	if len(failed) != 2 {
		t.Fatalf("tool.failed events: %v", failed)
	}
	for _, d := range failed {
		msg, _ := d["message"].(string)
		if d["code"] != "E_TOOL_UPSTREAM" || !strings.HasPrefix(msg, "é") || len(msg) > eventMessageLimit+len("…") || !utf8.ValidString(msg) || !strings.HasSuffix(msg, "…") {
			t.Fatalf("tool.failed data %v (message %d bytes)", d, len(msg))
		}
	}
}

// failingTools fails every call with msg.
type failingTools struct {
	fakeTools
	msg string
}

func (f *failingTools) Invoke(context.Context, Invocation) Outcome {
	return Outcome{Kind: OutcomeError, Result: errorResult("E_TOOL_UPSTREAM", f.msg)}
}

// TestNewsForADeletedInstanceDoesNotBringItBack: consent news (granted,
// expired, revoked), a hand-over or a resume's wake-up for an instance
// that was deleted is dropped; the instance stays deleted (the soak found
// deleted instances coming back when their consents expired).
func TestNewsForADeletedInstanceDoesNotBringItBack(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		meta        map[string]string
	}{
		{"auth.granted", `{"type":"auth.granted"}`, map[string]string{"eventType": "auth.granted", "authSessionId": "as-1"}},
		{"auth.expired", `{"type":"auth.expired"}`, map[string]string{"authSessionId": "as-1"}},
		{"auth.revoked", `{"type":"auth.revoked"}`, map[string]string{"eventType": "auth.revoked", "authSessionId": "as-2"}},
		{"continuation", `{"type":"turn.continue"}`, map[string]string{MetaTurnID: "turn-x"}},
		{"wake-up", `{"type":"system.wakeup"}`, map[string]string{MetaWake: "resume"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, callTools("whoami"), say("never"))
			f.send(t, "ev-1", "who am I?")
			if err := f.e.Delete(context.Background(), f.key); err != nil {
				t.Fatal(err)
			}
			ev := f.event("late-"+tc.name, tc.input)
			ev.Metadata = tc.meta
			if err := f.e.Handle(context.Background(), ev); err != nil {
				t.Fatal(err)
			}
			if _, err := f.store.Load(context.Background(), f.key); !errors.Is(err, domain.ErrNotFound) {
				t.Fatalf("the deleted instance came back: %v", err)
			}
		})
	}
	// A message still starts a new conversation on the key.
	f := newFixture(t, say("hello again"))
	f.send(t, "ev-new", "hi")
	if tr := lastTurn(f.state(t)); tr.Final != "hello again" {
		t.Fatalf("a message on a fresh key: %+v", tr)
	}
}

// TestReplacementCallIDsNeverCollide: a model answer whose ids look like
// the engine's replacements (["call_s1_1", ""], or one id twice) still
// gets one id per call: every call runs once and the history pairs each.
func TestReplacementCallIDsNeverCollide(t *testing.T) {
	for _, ids := range [][]string{{"call_s1_1", ""}, {"call_s1_1", "call_s1_1"}, {"", "call_s1_0"}} {
		answer := func(model.Request) model.Response {
			var parts []message.Part
			for _, id := range ids {
				parts = append(parts, message.Part{Type: message.ToolUse, CallID: id, Name: "echo", Input: json.RawMessage(`{}`)})
			}
			return model.Response{Message: message.Message{Role: message.Assistant, Content: parts}, Finish: model.FinishToolUse}
		}
		f := newFixture(t, answer, say("done"))
		f.send(t, "ev-1", "go")
		st := f.state(t)
		if tr := lastTurn(st); tr.Status != turn.TurnCompleted || f.tools.ran("echo") != 2 {
			t.Fatalf("%q: turn %s, echo ran %d times", ids, tr.Status, f.tools.ran("echo"))
		}
		if bad := message.CheckToolPairs(mustFold(st)); len(bad) != 0 || strings.Count(history(st), "use:echo") != 2 {
			t.Fatalf("%q: history %s %+v", ids, history(st), bad)
		}
	}
}

// TestTypeFromMetadata: an event whose JSON names no type takes the one
// its metadata names (eventType); the input's own type wins over it.
func TestTypeFromMetadata(t *testing.T) {
	ev := domain.Event{Input: `{"grantId":"g"}`, Metadata: map[string]string{"eventType": EventAuthGranted}}
	if in := parseInput(ev); in.Type != EventAuthGranted {
		t.Fatalf("from metadata: %+v", in)
	}
	ev.Input = `{"type":"user.input","text":"hi"}`
	if in := parseInput(ev); in.Type != EventUserInput || in.Text != "hi" {
		t.Fatalf("own type: %+v", in)
	}
	if in := parseInput(domain.Event{Input: `{"text":"hi"}`}); in.Type != EventUserInput || in.Text != `{"text":"hi"}` {
		t.Fatalf("no type anywhere: %+v", in)
	}
}
