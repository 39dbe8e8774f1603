package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// The tests of this file pin behaviour that mutation testing found
// unchecked: the stale-retry bounds, the figures of step.completed, the
// numbering of events, call ids, the cut of tool.failed messages, the
// operator's log lines and the errors that must reach the queue.

// staleStore answers the next stale commits turn.ErrStale. With moved,
// each of them is real: just before it, another writer moves the instance
// on by a pause or a resume (version bumped, work version and status
// kept), so the commit is stale over a changed version; without, the
// store says stale over an unchanged one (a conditional write lost for a
// reason the engine cannot see).
type staleStore struct {
	turn.Store
	mu    sync.Mutex
	stale int
	moved bool
}

func (s *staleStore) Commit(ctx context.Context, c turn.Commit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stale == 0 {
		return s.Store.Commit(ctx, c)
	}
	s.stale--
	if !s.moved {
		return turn.ErrStale
	}
	st, err := s.Store.Load(ctx, c.Instance.Key)
	if err != nil {
		return err
	}
	moved := st.Instance
	moved.Version++
	if err := s.Store.Commit(ctx, turn.Commit{Expect: st.Instance.Version, Instance: moved}); err != nil {
		return err
	}
	return s.Store.Commit(ctx, c) // stale: the version moved under it
}

// TestStaleRetriesAreBounded: a commit that finds the instance moved is
// tried again — by the Handle (reload and decide again, maxStaleRetries
// more times) and, when only a pause or a resume moved it, by the commit
// itself over the new version (as often again) — and never more: one
// failure past the bound is the caller's ErrStale, with nothing started.
func TestStaleRetriesAreBounded(t *testing.T) {
	perHandle := maxStaleRetries + 1
	for _, tc := range []struct {
		name  string
		moved bool
		stale int
		ok    bool
	}{
		{"stale over an unchanged version, at the bound", false, perHandle - 1, true},
		{"stale over an unchanged version, past the bound", false, perHandle, false},
		{"moved by pauses and resumes, at the bound", true, perHandle*perHandle - 1, true},
		{"moved by pauses and resumes, past the bound", true, perHandle * perHandle, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, say("first"), say("second"))
			f.send(t, "ev-0", "hello") // the instance exists, with a work version
			ss := &staleStore{Store: f.store, stale: tc.stale, moved: tc.moved}
			f.e.Store = ss
			err := f.e.Handle(context.Background(), f.event("ev-1", `{"type":"user.input","text":"again"}`))
			st := f.state(t)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("Handle after %d stale commits: %v", tc.stale, err)
			case tc.ok && (lastTurn(st).Final != "second" || lastTurn(st).Status != turn.TurnCompleted):
				t.Fatalf("turn %+v", lastTurn(st))
			case !tc.ok && !errors.Is(err, turn.ErrStale):
				t.Fatalf("Handle after %d stale commits: %v, want ErrStale", tc.stale, err)
			case !tc.ok && (st.HasProcessed("ev-1") || f.model.count() != 1):
				t.Fatalf("a turn started past the bound (%d model calls)", f.model.count())
			}
		})
	}
}

// TestLifecycleStaleRetriesAreBounded: Pause reloads and tries again
// after a stale commit, maxStaleRetries more times, then gives up.
func TestLifecycleStaleRetriesAreBounded(t *testing.T) {
	for _, tc := range []struct {
		stale int
		ok    bool
	}{{1, true}, {maxStaleRetries, true}, {maxStaleRetries + 1, false}} {
		t.Run(fmt.Sprint(tc.stale, " stale"), func(t *testing.T) {
			f := newFixture(t, say("hi"))
			f.send(t, "ev-0", "hello")
			f.e.Store = &staleStore{Store: f.store, stale: tc.stale}
			err := f.e.Pause(context.Background(), f.key)
			status := f.state(t).Instance.Status
			if tc.ok && (err != nil || status != turn.Paused) || !tc.ok && (!errors.Is(err, turn.ErrStale) || status != turn.Active) {
				t.Fatalf("Pause: %v, status %s", err, status)
			}
		})
	}
}

// failAt fails the worker's commits numbered in fail (from 1, counted
// from when it is put in place) with errStore, once each.
type failAt struct {
	turn.Store
	mu   sync.Mutex
	n    int
	fail map[int]bool
}

func (s *failAt) Commit(ctx context.Context, c turn.Commit) error {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	if s.fail[n] {
		return errStore
	}
	return s.Store.Commit(ctx, c)
}

// TestStoreErrorsReachTheQueue: a store that fails a write mid-turn makes
// Handle fail (the queue redelivers), whichever write it is; the
// redelivery carries the turn on and a call is never run twice.
func TestStoreErrorsReachTheQueue(t *testing.T) {
	// The commits of a turn calling echo: 1 turn started, 2 the model's
	// answer, 3 echo started, 4 echo's result, 5 the step's end, ...
	for _, tc := range []struct {
		name     string
		fail     []int
		outcome  string // echo's result in the end
		echoRuns int
	}{
		{"marking the call started", []int{3}, `"tool":"echo"`, 1},
		{"its result", []int{4}, CodeOutcomeUnknown, 1},
		// The redelivery finds echo started, outcome unknown: its answer
		// to that is a write too.
		{"its result, then the outcome-unknown answer", []int{4, 5}, CodeOutcomeUnknown, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, callTools("echo"), say("done"))
			fa := &failAt{Store: f.store, fail: map[int]bool{}}
			for _, n := range tc.fail {
				fa.fail[n] = true
			}
			f.e.Store = fa
			ev := f.event("ev-1", `{"type":"user.input","text":"go"}`)
			for i := range tc.fail {
				if err := f.e.Handle(context.Background(), ev); !errors.Is(err, errStore) {
					t.Fatalf("delivery %d: %v, want the store's error", i+1, err)
				}
			}
			if err := f.e.Handle(context.Background(), ev); err != nil {
				t.Fatalf("last delivery: %v", err)
			}
			st := f.state(t)
			if tr := lastTurn(st); tr.Status != turn.TurnCompleted || tr.Final != "done" {
				t.Fatalf("turn %+v", tr)
			}
			if got := resultOf(st, "call-0-echo"); !strings.Contains(got, tc.outcome) || f.tools.ran("echo") != tc.echoRuns {
				t.Fatalf("echo ran %d times, result %s", f.tools.ran("echo"), got)
			}
		})
	}
}

// TestMetadataDoesNotOverrideTheInputType: an event's input says what it
// is; its metadata's eventType does not turn a user's message into
// something else.
func TestMetadataDoesNotOverrideTheInputType(t *testing.T) {
	f := newFixture(t, say("hello alice"))
	ev := f.event("ev-1", `{"type":"user.input","text":"hi"}`)
	ev.Metadata = map[string]string{"eventType": EventAuthGranted, "authSessionId": "as-1"}
	if err := f.e.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if tr := lastTurn(f.state(t)); tr.InputType != EventUserInput || tr.Final != "hello alice" {
		t.Fatalf("turn %+v", tr)
	}
}

// TestTraceID: a turn continues the trace its event carries; without one
// it gets its own, derived from the event (a redelivery names the same).
func TestTraceID(t *testing.T) {
	const carried = "4bf92f3577b34da6a3ce929d0e0e4736"
	f := newFixture(t, say("one"), say("two"))
	ev := f.event("ev-1", `{"type":"user.input","text":"hi"}`)
	ev.Metadata = map[string]string{"traceId": carried}
	if err := f.e.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if got := lastTurn(f.state(t)).TraceID; got != carried {
		t.Fatalf("trace id %q, want the event's %q", got, carried)
	}
	f.send(t, "ev-2", "again")
	got := lastTurn(f.state(t)).TraceID
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(got) || got == carried || got != traceID(f.event("ev-2", "")) {
		t.Fatalf("derived trace id %q", got)
	}
}

// TestNumbering: a turn's events are numbered 0, 1, 2, … (TurnEvents
// after n reads those after the nth) and the instance's message events
// one after another from NextSeq; watchers are told only commits that
// have events.
func TestNumbering(t *testing.T) {
	f := newFixture(t, say("hi"), callTools("echo", "whoami"))
	var told [][]turn.TurnEvent
	f.e.Notify = func(_ context.Context, _ turn.Turn, evs []turn.TurnEvent) { told = append(told, evs) }
	f.send(t, "ev-0", "hello")
	f.send(t, "ev-1", "who am I?") // parks on whoami: the turn's messages stay events
	st := f.state(t)
	tr := lastTurn(st)
	if tr.Status != turn.TurnParked {
		t.Fatalf("turn %s", tr.Status)
	}
	_, all, err := f.e.TurnEvents(context.Background(), f.key, tr.ID, -1)
	if err != nil || len(all) < 5 {
		t.Fatalf("TurnEvents: %d events, %v", len(all), err)
	}
	for i, e := range all {
		if e.Seq != int64(i) {
			t.Fatalf("event %d (%s) has seq %d", i, e.Type, e.Seq)
		}
	}
	if _, after, _ := f.e.TurnEvents(context.Background(), f.key, tr.ID, 2); len(after) != len(all)-3 || after[0].Seq != 3 {
		t.Fatalf("events after 2: %+v", after)
	}
	if len(st.Events) != 2 {
		t.Fatalf("%d message events", len(st.Events))
	}
	for i, e := range st.Events {
		if e.Seq != st.Events[0].Seq+int64(i) {
			t.Fatalf("message events numbered %d, %d", st.Events[0].Seq, e.Seq)
		}
	}
	if last := st.Events[len(st.Events)-1].Seq; st.Instance.NextSeq != last+1 || st.Events[0].Seq < 2 {
		t.Fatalf("NextSeq %d after message %d (first of the turn %d)", st.Instance.NextSeq, last, st.Events[0].Seq)
	}
	for i, evs := range told {
		if len(evs) == 0 {
			t.Fatalf("watchers were told commit %d without events", i)
		}
	}
}

// TestToolFailedMessageCut: the message of tool.failed is cut to
// eventMessageLimit bytes on a rune boundary, and one that fits is kept
// whole.
func TestToolFailedMessageCut(t *testing.T) {
	for _, tc := range []struct{ name, msg, want string }{
		{"exactly the limit", strings.Repeat("a", eventMessageLimit), strings.Repeat("a", eventMessageLimit)},
		{"one byte over", strings.Repeat("a", eventMessageLimit+1), strings.Repeat("a", eventMessageLimit) + "…"},
		// The limit falls inside an é: the cut moves back before it.
		{"the limit inside a rune", "a" + strings.Repeat("é", 200), "a" + strings.Repeat("é", (eventMessageLimit-1)/2) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, callTools("echo"), say("done"))
			f.e.Tools = &failingTools{msg: tc.msg}
			f.send(t, "ev-1", "go")
			st := f.state(t)
			for _, e := range st.TurnEvents[lastTurn(st).ID] {
				if e.Type != turn.EvToolFailed {
					continue
				}
				var d struct{ Code, Message string }
				if err := json.Unmarshal(e.Data, &d); err != nil {
					t.Fatal(err)
				}
				if d.Code != "E_TOOL_UPSTREAM" || d.Message != tc.want || !utf8.ValidString(d.Message) {
					t.Fatalf("tool.failed %s: message of %d bytes, want %d", d.Code, len(d.Message), len(tc.want))
				}
				return
			}
			t.Fatal("no tool.failed event")
		})
	}
}

// TestResultsTellTheModelWhatFailed: a failed call's tool_result reaches
// the model marked as an error; a successful one is not.
func TestResultsTellTheModelWhatFailed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tools   Tools
		isError bool
	}{
		{"ok", &fakeTools{}, false},
		{"failed", &failingTools{msg: "upstream down"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, callTools("echo"), say("done"))
			f.e.Tools = tc.tools
			f.send(t, "ev-1", "go")
			if f.model.count() != 2 {
				t.Fatalf("%d model calls", f.model.count())
			}
			msgs := f.model.calls[1].Messages
			res := msgs[len(msgs)-1]
			if len(res.Content) != 1 || res.Content[0].Type != message.ToolResult || res.Content[0].IsError != tc.isError {
				t.Fatalf("the model was given %+v", res)
			}
		})
	}
}

// clock is a test clock: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestStepCompletedFigures: step.completed carries what metrics need of
// the step — its calls, the failed ones, the model's usage of that step
// and the latency since the step began.
func TestStepCompletedFigures(t *testing.T) {
	usage := model.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150}
	threeCalls := func(model.Request) model.Response {
		return model.Response{Message: message.Message{Role: message.Assistant, Content: []message.Part{
			{Type: message.ToolUse, CallID: "c-ok", Name: "echo", Input: json.RawMessage(`{}`)},
			{Type: message.ToolUse, CallID: "c-bad", Name: "broken", Input: json.RawMessage(`{}`)},
			{Type: message.ToolUse, CallID: "c-ok2", Name: "lookup", Input: json.RawMessage(`{}`)},
		}}, Finish: model.FinishToolUse, Usage: usage}
	}
	f := newFixture(t, threeCalls, say("done"))
	clk := &clock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	f.e.Now = clk.now
	f.e.Tools = &brokenTools{}
	f.e.Hooks.LLMCallMiddleware = []func(LLMCall) LLMCall{func(next LLMCall) LLMCall {
		return func(ctx context.Context, req model.Request) (model.Response, error) {
			clk.advance(1500 * time.Millisecond) // the model thinks for 1.5 s
			return next(ctx, req)
		}
	}}
	f.send(t, "ev-1", "go")
	st := f.state(t)
	type figures struct {
		Step      int
		ToolCalls int
		Errors    int
		Usage     *model.Usage
		LatencyMs *float64
	}
	var got []figures
	for _, e := range st.TurnEvents[lastTurn(st).ID] {
		if e.Type == turn.EvStepCompleted {
			var fg figures
			if err := json.Unmarshal(e.Data, &fg); err != nil {
				t.Fatal(err)
			}
			got = append(got, fg)
		}
	}
	if len(got) != 2 {
		t.Fatalf("%d step.completed events", len(got))
	}
	first, second := got[0], got[1]
	if first.Step != 1 || first.ToolCalls != 3 || first.Errors != 1 || first.Usage == nil || *first.Usage != usage ||
		first.LatencyMs == nil || *first.LatencyMs != 1500 {
		t.Fatalf("step 1 figures %+v (usage %v, latency %v)", first, first.Usage, first.LatencyMs)
	}
	if second.Step != 2 || second.ToolCalls != 0 || second.Errors != 0 || second.Usage == nil || second.Usage.TotalTokens != 15 {
		t.Fatalf("step 2 figures %+v", second)
	}
}

// brokenTools: echo answers, broken fails.
type brokenTools struct{ fakeTools }

func (b *brokenTools) Catalog(ctx context.Context, t turn.Turn) ([]Tool, error) {
	tools, _ := b.fakeTools.Catalog(ctx, t)
	return append(tools, Tool{Spec: model.ToolSpec{Name: "broken", InputSchema: json.RawMessage(`{"type":"object"}`)}}), nil
}

func (b *brokenTools) Invoke(ctx context.Context, in Invocation) Outcome {
	if in.Call.Tool == "broken" {
		return Outcome{Kind: OutcomeError, Result: errorResult("E_TOOL_UPSTREAM", "broken")}
	}
	return b.fakeTools.Invoke(ctx, in)
}

// TestAFailedTurnCountsItsError: a turn whose model fails ends failed
// with one error, in the turn and in turn.failed.
func TestAFailedTurnCountsItsError(t *testing.T) {
	f := newFixture(t) // the model has no answer: it fails
	f.send(t, "ev-1", "go")
	st := f.state(t)
	tr := lastTurn(st)
	evs := st.TurnEvents[tr.ID]
	var d struct{ Errors int }
	_ = json.Unmarshal(evs[len(evs)-1].Data, &d)
	if tr.Status != turn.TurnFailed || tr.Errors != 1 || tr.Error == nil || tr.Error.Code != "model_failed" || evs[len(evs)-1].Type != turn.EvTurnFailed || d.Errors != 1 {
		t.Fatalf("turn %s, %d errors (event: %d), %+v", tr.Status, tr.Errors, d.Errors, tr.Error)
	}
}

// TestHooksSeeTheStepNumber: every pipeline point sees the step it runs
// in, counted from 1.
func TestHooksSeeTheStepNumber(t *testing.T) {
	f := newFixture(t, callTools("echo"), say("done"))
	var seen []string
	record := func(point string) Mutator {
		return func(_ context.Context, sc *StepContext) error {
			seen = append(seen, fmt.Sprint(point, sc.Step))
			return nil
		}
	}
	f.e.Hooks = Hooks{StepPre: []Mutator{record("pre")}, StepPost: []Mutator{record("post")}}
	f.send(t, "ev-1", "go")
	if got := strings.Join(seen, ","); got != "pre1,post1,pre2,post2" {
		t.Fatalf("hooks saw %s", got)
	}
}

// logLines collects JSON log lines.
type logLines struct {
	mu    sync.Mutex
	lines []map[string]any
}

func (l *logLines) Write(p []byte) (int, error) {
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(p), &m); err != nil {
		return 0, err
	}
	l.mu.Lock()
	l.lines = append(l.lines, m)
	l.mu.Unlock()
	return len(p), nil
}

func (l *logLines) logger() *slog.Logger { return slog.New(slog.NewJSONHandler(l, nil)) }

func (l *logLines) find(msg string) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, m := range l.lines {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestOperatorLogLines: the operator's log says which step failed, which
// call failed and why, and which call waits for which consent — each line
// with its turn's trace id; a call that succeeded is not logged as failed.
func TestOperatorLogLines(t *testing.T) {
	t.Run("a failed step", func(t *testing.T) {
		f := newFixture(t, callTools("echo")) // step 2's model call fails
		logs := &logLines{}
		f.e.Log = logs.logger()
		f.send(t, "ev-1", "go")
		lines := logs.find("step failed")
		tr := lastTurn(f.state(t))
		if len(lines) != 1 || lines[0]["step"] != 2.0 || lines[0]["code"] != "model_failed" || lines[0]["traceId"] != tr.TraceID {
			t.Fatalf("step failed lines %v", lines)
		}
	})
	t.Run("a failed call and a successful one", func(t *testing.T) {
		f := newFixture(t, func(model.Request) model.Response {
			return model.Response{Message: message.Message{Role: message.Assistant, Content: []message.Part{
				{Type: message.ToolUse, CallID: "c-ok", Name: "echo", Input: json.RawMessage(`{}`)},
				{Type: message.ToolUse, CallID: "c-bad", Name: "broken", Input: json.RawMessage(`{}`)},
			}}, Finish: model.FinishToolUse}
		}, say("done"))
		f.e.Tools = &brokenTools{}
		logs := &logLines{}
		f.e.Log = logs.logger()
		f.send(t, "ev-1", "go")
		lines := logs.find("tool call failed")
		if len(lines) != 1 || lines[0]["callId"] != "c-bad" || lines[0]["code"] != "E_TOOL_UPSTREAM" || lines[0]["message"] != "broken" ||
			lines[0]["traceId"] != lastTurn(f.state(t)).TraceID {
			t.Fatalf("tool call failed lines %v", lines)
		}
	})
	t.Run("a parked call", func(t *testing.T) {
		f := newFixture(t, callTools("whoami"))
		logs := &logLines{}
		f.e.Log = logs.logger()
		f.send(t, "ev-1", "who am I?")
		lines := logs.find("tool call parked for consent")
		if len(lines) != 1 || lines[0]["callId"] != "call-0-whoami" || lines[0]["authSessionId"] != "as-1" || lines[0]["traceId"] != lastTurn(f.state(t)).TraceID {
			t.Fatalf("parked lines %v", lines)
		}
	})
}

// TestDefaultReserve: with no Reserve set, a step needs 30 s: an
// invocation with less left hands the turn over after its step; one with
// more runs the turn to its end.
func TestDefaultReserve(t *testing.T) {
	for _, tc := range []struct {
		left     time.Duration
		handOver bool
	}{{10 * time.Second, true}, {10 * time.Minute, false}} {
		t.Run(tc.left.String(), func(t *testing.T) {
			f := newFixture(t, callTools("echo"), say("done"))
			ctx, cancel := context.WithTimeout(context.Background(), tc.left)
			defer cancel()
			if err := f.e.Handle(ctx, f.event("ev-1", `{"type":"user.input","text":"go"}`)); err != nil {
				t.Fatal(err)
			}
			q := f.e.Queue.(*memQueue)
			tr := lastTurn(f.state(t))
			handedOver := len(q.evs) == 1 && strings.HasPrefix(q.evs[0].ID, "cont:") && tr.Status == turn.TurnRunning && tr.Steps == 1
			completed := len(q.evs) == 0 && tr.Status == turn.TurnCompleted
			if tc.handOver && !handedOver || !tc.handOver && !completed {
				t.Fatalf("turn %s after %d steps, queued %d", tr.Status, tr.Steps, len(q.evs))
			}
		})
	}
}

// rawCalls answers with tool calls of the given ids, all of echo.
func rawCalls(ids ...string) func(model.Request) model.Response {
	return func(model.Request) model.Response {
		var parts []message.Part
		for _, id := range ids {
			parts = append(parts, message.Part{Type: message.ToolUse, CallID: id, Name: "echo", Input: json.RawMessage(`{}`)})
		}
		return model.Response{Message: message.Message{Role: message.Assistant, Content: parts}, Finish: model.FinishToolUse}
	}
}

// idTools records the call ids it is given.
type idTools struct {
	fakeTools
	mu  sync.Mutex
	ids []string
}

func (i *idTools) Invoke(ctx context.Context, in Invocation) Outcome {
	i.mu.Lock()
	i.ids = append(i.ids, in.Call.ID)
	i.mu.Unlock()
	return i.fakeTools.Invoke(ctx, in)
}

// TestCallIDsAreUniqueAndShort: a call id the model gives is kept when it
// is new in the turn and at most 64 bytes; an empty, repeated (in the
// same answer or an earlier step) or longer one is replaced by a fresh
// call_s<step>_<index>, and every call pairs with its result.
func TestCallIDsAreUniqueAndShort(t *testing.T) {
	id64, id65 := strings.Repeat("x", 64), strings.Repeat("y", 65)
	for _, tc := range []struct {
		name   string
		script []func(model.Request) model.Response
		want   string
	}{
		{"64 bytes", []func(model.Request) model.Response{rawCalls(id64)}, id64},
		{"65 bytes", []func(model.Request) model.Response{rawCalls(id65)}, "call_s1_0"},
		{"empty", []func(model.Request) model.Response{rawCalls("")}, "call_s1_0"},
		{"twice in one answer", []func(model.Request) model.Response{rawCalls("a", "a", "b")}, "a,call_s1_1,b"},
		{"again in a later step", []func(model.Request) model.Response{rawCalls("a"), rawCalls("a", "b")}, "a,call_s2_0,b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, append(tc.script, say("done"))...)
			tools := &idTools{}
			f.e.Tools = tools
			f.send(t, "ev-1", "go")
			st := f.state(t)
			if got := strings.Join(tools.ids, ","); got != tc.want || lastTurn(st).Status != turn.TurnCompleted {
				t.Fatalf("calls ran as %s, want %s (turn %s)", got, tc.want, lastTurn(st).Status)
			}
			if bad := message.CheckToolPairs(mustFold(st)); len(bad) != 0 {
				t.Fatalf("history %+v", bad)
			}
		})
	}
}

// startsTools records each run's Starts of whoami.
type startsTools struct {
	fakeTools
	starts []int
}

func (s *startsTools) Invoke(ctx context.Context, in Invocation) Outcome {
	if in.Call.Tool == "whoami" {
		s.starts = append(s.starts, in.Call.Starts)
	}
	return s.fakeTools.Invoke(ctx, in)
}

// TestStartsCountsRuns: a call's Starts counts its runs: 1 the first
// time, 2 when the consent resumes it.
func TestStartsCountsRuns(t *testing.T) {
	f := newFixture(t, callTools("whoami"), say("you are alice"))
	tools := &startsTools{}
	f.e.Tools = tools
	f.send(t, "ev-1", "who am I?")
	tools.granted = true
	f.granted(t, "g-1")
	if fmt.Sprint(tools.starts) != "[1 2]" || lastTurn(f.state(t)).Final != "you are alice" {
		t.Fatalf("starts %v, turn %+v", tools.starts, lastTurn(f.state(t)))
	}
}

// failingQueue refuses every event.
type failingQueue struct{}

var errQueue = errors.New("queue unavailable")

func (failingQueue) Enqueue(context.Context, domain.Event) error { return errQueue }

// TestDelegationAnswers: agents.delegate answers pending with the
// delegation's event id when the task is queued, and E_TOOL_UNAVAILABLE
// when the queue refuses it; an empty task is refused before anything is
// queued.
func TestDelegationAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, input string
		queue       domain.EventQueue
		want        []string
		queued      int
	}{
		{"queued", "find the order", &memQueue{}, []string{`"status":"pending"`, `"delegationEventId":"delegate:`, `"agent":"helper"`}, 1},
		{"the queue refuses", "find the order", failingQueue{}, []string{"E_TOOL_UNAVAILABLE", "could not be queued"}, 0},
		{"an empty task", "", &memQueue{}, []string{"E_TOOL_INVALID_ARGS"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, delegateTo("helper", tc.input), say("ok"))
			f.key.Agent = "planner"
			f.e.Config = agentsConfig{"planner": {Model: f.model, Peers: []string{"helper"}}}
			f.e.Queue = tc.queue
			f.send(t, "ev-1", "go")
			msgs := f.model.calls[1].Messages
			got := string(msgs[len(msgs)-1].Content[0].Output)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Fatalf("the model was told %s, want %s", got, w)
				}
			}
			if q, ok := tc.queue.(*memQueue); ok && len(q.evs) != tc.queued {
				t.Fatalf("%d events queued", len(q.evs))
			}
		})
	}
}

// TestDelegationToATerminatedInstanceIsRecordedOnceAnswered: the refusal
// sent back for a task that reached a terminated instance is queued
// before the task is recorded as handled: a queue that refuses it fails
// Handle (the task is redelivered), one that takes it lets the task be
// recorded.
func TestDelegationToATerminatedInstanceIsRecordedOnceAnswered(t *testing.T) {
	for _, tc := range []struct {
		name  string
		queue domain.EventQueue
	}{{"the queue takes the refusal", &memQueue{}}, {"the queue refuses it", failingQueue{}}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, say("hi"))
			f.key.Agent = "helper"
			f.send(t, "h-1", "hello")
			if err := f.e.Terminate(context.Background(), f.key, "closed"); err != nil {
				t.Fatal(err)
			}
			f.e.Queue = tc.queue
			ev := f.event("delegate:turn-x:d1", `{"type":"agent.delegate","text":"find the order"}`)
			ev.Origin = map[string]any{originDelegatedFrom: "planner", originDelegationTurnID: "turn-x", originDelegationEventID: "delegate:turn-x:d1"}
			err := f.e.Handle(context.Background(), ev)
			processed := f.state(t).HasProcessed(ev.ID)
			if q, ok := tc.queue.(*memQueue); ok {
				if err != nil || !processed || len(q.evs) != 1 || q.evs[0].AgentName != "planner" || !strings.Contains(q.evs[0].Input, `"status":"interrupted"`) {
					t.Fatalf("Handle: %v, processed %v, queued %+v", err, processed, q.evs)
				}
				return
			}
			if !errors.Is(err, errQueue) || processed {
				t.Fatalf("Handle: %v, processed %v", err, processed)
			}
		})
	}
}

// TestWakeupStartsATurnWithoutAMessage: a system.wakeup that is not a
// lifecycle wake-up starts a turn with no message of its own: the model
// is given the system prompt alone.
func TestWakeupStartsATurnWithoutAMessage(t *testing.T) {
	f := newFixture(t, say("good morning"))
	if err := f.e.Handle(context.Background(), f.event("wake-1", `{"type":"system.wakeup"}`)); err != nil {
		t.Fatal(err)
	}
	if f.model.count() != 1 {
		t.Fatalf("%d model calls", f.model.count())
	}
	msgs := f.model.calls[0].Messages
	if len(msgs) != 1 || msgs[0].Role != message.System || msgs[0].TextOf() != "be brief" {
		t.Fatalf("the model was given %+v", msgs)
	}
	if tr := lastTurn(f.state(t)); tr.InputType != EventWakeup || tr.Final != "good morning" {
		t.Fatalf("turn %+v", tr)
	}
}

// pendingSource answers PendingBlock with block or err.
type pendingSource struct {
	block json.RawMessage
	err   error
}

func (p pendingSource) PendingBlock(context.Context, turn.InstanceKey) (json.RawMessage, error) {
	return p.block, p.err
}

// TestAuthPendingBlock: the pending consents reach the model as a context
// block after the conversation; none, or a source that fails, adds no
// block and the step goes on.
func TestAuthPendingBlock(t *testing.T) {
	const block = `{"pending":[{"oauthAppRef":"OAuthApp/demo","authorizationUrl":"https://idp.example/auth"}]}`
	for _, tc := range []struct {
		name    string
		pending Pending
		want    string // the last message the model is given
	}{
		{"a pending consent", pendingSource{block: json.RawMessage(block)}, "Context blocks (JSON):\nauth.pending: " + block},
		{"none", pendingSource{}, "hi"},
		{"the source fails", pendingSource{err: errors.New("oauth store down")}, "hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, say("hello"))
			f.e.Pending = tc.pending
			f.send(t, "ev-1", "hi")
			msgs := f.model.calls[0].Messages
			if got := msgs[len(msgs)-1].TextOf(); got != tc.want {
				t.Fatalf("the model was given %q last, want %q", got, tc.want)
			}
			if tr := lastTurn(f.state(t)); tr.Status != turn.TurnCompleted {
				t.Fatalf("turn %s", tr.Status)
			}
		})
	}
}

// seed writes an instance's state as an earlier engine left it, in one
// commit over an empty store.
func seed(t *testing.T, f *fixture, c turn.Commit) {
	t.Helper()
	c.Instance.Key, c.Instance.Version, c.Instance.WorkVersion = f.key, 1, 1
	if c.Instance.Status == "" {
		c.Instance.Status = turn.Active
	}
	if err := f.store.Commit(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// TestResultsWrittenByAnEarlierEngineAreNotWrittenTwice: an engine before
// issue 16 wrote each call's tool_result as the call finished; a turn it
// left mid-step ends its step without writing them again (no duplicate
// message, no message.warning).
func TestResultsWrittenByAnEarlierEngineAreNotWrittenTwice(t *testing.T) {
	f := newFixture(t, say("done"))
	now := time.Now().UTC()
	tr := turn.Turn{ID: "turn-old", Instance: f.key, InputEventID: "ev-0", InputType: EventUserInput, TraceID: "trace-old",
		Status: turn.TurnRunning, Steps: 1, StepAnswered: true, Catalog: []string{"echo"}, ToolCalls: 1, StartedAt: now, NextEvent: 1}
	result := json.RawMessage(`{"status":"ok","output":{"tool":"echo"}}`)
	seed(t, f, turn.Commit{
		Instance:  turn.Instance{ActiveTurn: tr.ID, NextSeq: 3},
		Turn:      &tr,
		Calls:     []turn.Call{{ID: "c1", TurnID: tr.ID, Step: 1, Tool: "echo", Args: json.RawMessage(`{}`), State: turn.CallOK, Result: result, Starts: 1, UpdatedAt: now}},
		Events:    []turn.TurnEvent{{TurnID: tr.ID, Seq: 0, Type: turn.EvTurnStarted, At: now}},
		Processed: "ev-0",
		Messages: []message.Event{
			{Seq: 0, Type: message.LLMMessage, Message: &message.Message{ID: tr.ID + "-input", Role: message.User, Content: []message.Part{{Type: message.Text, Text: "go"}}}},
			{Seq: 1, Type: message.LLMMessage, Message: &message.Message{ID: tr.ID + "-step1", Role: message.Assistant,
				Content: []message.Part{{Type: message.ToolUse, CallID: "c1", Name: "echo", Input: json.RawMessage(`{}`)}}}},
			{Seq: 2, Type: message.LLMMessage, Message: &message.Message{ID: tr.ID + "-result-c1", Role: message.Tool,
				Content: []message.Part{{Type: message.ToolResult, CallID: "c1", Output: result}}}},
		},
	})
	cont := f.event("cont:turn-old:1", `{"type":"turn.continue"}`)
	if err := f.e.Handle(context.Background(), cont); err != nil {
		t.Fatal(err)
	}
	st := f.state(t)
	if got := st.Turns[tr.ID]; got.Status != turn.TurnCompleted || got.Final != "done" {
		t.Fatalf("turn %+v", got)
	}
	if types := eventTypes(st, tr.ID); strings.Contains(types, turn.EvMessageWarning) {
		t.Fatalf("events %s", types)
	}
	results := 0
	for _, m := range f.model.calls[0].Messages {
		for _, p := range m.Content {
			if p.Type == message.ToolResult {
				results++
			}
		}
	}
	if results != 1 {
		t.Fatalf("the model was given %d results of one call", results)
	}
}

// TestBacklogDropsAuthEventsNothingWaitsFor: an auth.granted, auth.expired
// or continuation left in the backlog (an earlier engine queued them
// there) starts no turn when the backlog runs: it is dropped, and the
// next event runs.
func TestBacklogDropsAuthEventsNothingWaitsFor(t *testing.T) {
	f := newFixture(t, say("hello bob"))
	stale := []domain.Event{
		f.event("g-old", `{"type":"auth.granted","grantId":"grant-1"}`),
		f.event("x-old", `{"type":"auth.expired"}`),
		f.event("c-old", `{"type":"turn.continue"}`),
	}
	seed(t, f, turn.Commit{Instance: turn.Instance{Status: turn.Paused}, BacklogPush: append(stale, f.event("ev-2", `{"type":"user.input","text":"I am bob"}`))})
	f.e.Queue = nil // Resume runs the backlog itself
	if err := f.e.Resume(context.Background(), f.key); err != nil {
		t.Fatal(err)
	}
	st := f.state(t)
	if len(st.Backlog) != 0 || len(st.Turns) != 1 || lastTurn(st).InputEventID != "ev-2" || lastTurn(st).Final != "hello bob" {
		t.Fatalf("backlog %d, turns %d, last %+v", len(st.Backlog), len(st.Turns), lastTurn(st))
	}
}

// TestResultsOfCallsWithoutIndex: calls stored before Call.Index existed
// (all 0) give their results back in the order of their last update,
// then of their ids.
func TestResultsOfCallsWithoutIndex(t *testing.T) {
	f := newFixture(t, say("done"))
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tr := turn.Turn{ID: "turn-old", Instance: f.key, InputEventID: "ev-0", InputType: EventUserInput, TraceID: "trace-old",
		Status: turn.TurnRunning, Steps: 1, StepAnswered: true, Catalog: []string{"echo"}, ToolCalls: 3, StartedAt: t0, NextEvent: 1}
	result := json.RawMessage(`{"status":"ok","output":{}}`)
	var calls []turn.Call
	var uses []message.Part
	for _, c := range []struct {
		id string
		at time.Time
	}{{"c-z", t0.Add(-time.Second)}, {"c-a", t0}, {"c-b", t0}} {
		calls = append(calls, turn.Call{ID: c.id, TurnID: tr.ID, Step: 1, Tool: "echo", Args: json.RawMessage(`{}`), State: turn.CallOK, Result: result, Starts: 1, UpdatedAt: c.at})
		uses = append(uses, message.Part{Type: message.ToolUse, CallID: c.id, Name: "echo", Input: json.RawMessage(`{}`)})
	}
	seed(t, f, turn.Commit{
		Instance:  turn.Instance{ActiveTurn: tr.ID, NextSeq: 2},
		Turn:      &tr,
		Calls:     []turn.Call{calls[2], calls[1], calls[0]},
		Events:    []turn.TurnEvent{{TurnID: tr.ID, Seq: 0, Type: turn.EvTurnStarted, At: t0}},
		Processed: "ev-0",
		Messages: []message.Event{
			{Seq: 0, Type: message.LLMMessage, Message: &message.Message{ID: tr.ID + "-input", Role: message.User, Content: []message.Part{{Type: message.Text, Text: "go"}}}},
			{Seq: 1, Type: message.LLMMessage, Message: &message.Message{ID: tr.ID + "-step1", Role: message.Assistant, Content: uses}},
		},
	})
	if err := f.e.Handle(context.Background(), f.event("cont:turn-old:1", `{"type":"turn.continue"}`)); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, m := range f.model.calls[0].Messages {
		for _, p := range m.Content {
			if p.Type == message.ToolResult {
				order = append(order, p.CallID)
			}
		}
	}
	if got := strings.Join(order, ","); got != "c-z,c-a,c-b" {
		t.Fatalf("results in the order %s", got)
	}
}

// listFails is a store whose List fails.
type listFails struct{ turn.Store }

func (listFails) List(context.Context) ([]turn.Instance, []turn.Unreadable, error) {
	return nil, nil, errStore
}

// TestInspectAndList: Inspect reads an instance's state (a key that is
// not one is refused); List names the instances, and says what failed
// when the store cannot list them.
func TestInspectAndList(t *testing.T) {
	f := newFixture(t, say("hi"))
	f.send(t, "ev-1", "hello")
	st, err := f.e.Inspect(context.Background(), f.key)
	if err != nil || !st.HasProcessed("ev-1") || st.Instance.Version == 0 {
		t.Fatalf("Inspect: %v, version %d", err, st.Instance.Version)
	}
	if _, err := f.e.Inspect(context.Background(), turn.InstanceKey{Swarm: "default"}); err == nil {
		t.Fatal("Inspect of a key without agent or instance key succeeded")
	}
	list, _, err := f.e.List(context.Background())
	if err != nil || len(list) != 1 || list[0].Key != f.key {
		t.Fatalf("List: %v, %+v", err, list)
	}
	f.e.Store = listFails{f.store}
	if list, _, err := f.e.List(context.Background()); !errors.Is(err, errStore) || !strings.HasPrefix(err.Error(), "engine: list instances") || list != nil {
		t.Fatalf("List over a failing store: %v, %+v", err, list)
	}
}
