package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/observe/logging"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
)

// Engine runs turns. Build it once per process; Handle is safe for
// concurrent use on different instances (one instance's events are
// serialised by the queue's message group, and by the store's fence).
type Engine struct {
	Store   turn.Store
	Config  Config
	Tools   Tools
	Pending Pending // nil: no auth.pending block
	// Revisions describes a change of bundle revision between steps (nil:
	// no swarmBundle.revisionChanged block).
	Revisions Revisions
	// Queue receives continuations when the invocation's time runs short.
	Queue domain.EventQueue
	Hooks Hooks
	Log   *slog.Logger
	Now   func() time.Time
	// Reserve is the time a step needs; with less left before ctx's
	// deadline the turn hands over with a continuation (default 30 s).
	Reserve time.Duration
	// Notify, when set, is told each committed turn event (after the
	// commit: what it is told has happened), with the turn as committed —
	// origin delivery, metrics, live streams. It must not block for long
	// and never fails the turn.
	Notify func(ctx context.Context, t turn.Turn, events []turn.TurnEvent)
}

// Error codes of tool results the engine writes itself.
const (
	CodeOutcomeUnknown        = "E_TOOL_OUTCOME_UNKNOWN"
	CodeAuthorizationExpired  = "authorization_expired"
	CodeTooManyCalls          = "E_TOOL_TOO_MANY_CALLS"
	CodeTurnFailed            = "turn_failed"
	CodeStepLimitReached      = "step_limit_reached"
	maxStaleRetries           = 5
	defaultMaxSteps           = 32
	defaultMaxToolCallsInStep = 16
)

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now().UTC()
	}
	return time.Now().UTC()
}

func (e *Engine) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.New(slog.DiscardHandler)
}

// input is what Handle reads of a queued event's Input.
type input struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
}

func parseInput(ev domain.Event) input {
	var in input
	err := json.Unmarshal([]byte(ev.Input), &in)
	if err == nil && in.Type == "" {
		// An object without a type takes the one its metadata names.
		in.Type = ev.Metadata["eventType"]
	}
	if err != nil || in.Type == "" {
		// A bare string is a user's message.
		return input{Type: EventUserInput, Text: ev.Input}
	}
	return in
}

// KeyOf is the instance an event is for.
func KeyOf(ev domain.Event) turn.InstanceKey {
	return turn.InstanceKey{Swarm: ev.SwarmRef.Name, Key: ev.InstanceKey, Agent: ev.AgentName}
}

// Handle processes one queued event: a duplicate is a no-op; an event
// for a busy or paused instance waits in its backlog; auth.granted
// resumes the call that parked on the consent; anything else starts a
// turn. It returns when the turn ends, parks, or hands over.
func (e *Engine) Handle(ctx context.Context, ev domain.Event) error {
	key := KeyOf(ev)
	if err := key.Validate(); err != nil {
		return fmt.Errorf("engine: event %s: %w", ev.ID, err)
	}
	for attempt := 0; ; attempt++ {
		err := e.handle(ctx, key, ev, attempt > 0)
		if !errors.Is(err, turn.ErrStale) || attempt >= maxStaleRetries {
			return err
		}
		// Another worker moved the instance: read again and decide again.
	}
}

func (e *Engine) handle(ctx context.Context, key turn.InstanceKey, ev domain.Event, again bool) error {
	st, err := e.Store.Load(ctx, key)
	switch {
	case errors.Is(err, domain.ErrNotFound) && again:
		// It was there when this event was first read: deleted since (an
		// operator's delete during the step). The event does not bring
		// it back.
		e.log().InfoContext(ctx, "instance deleted while its event was handled: event dropped", "eventId", ev.ID, "instance", key.String())
		return nil
	case errors.Is(err, domain.ErrNotFound) && !startsAnInstance(parseInput(ev), ev):
		// Consent news, a hand-over or a wake-up for an instance that is
		// not there (deleted: its consent expired later, say) has nothing
		// to act on, and must not bring the instance back.
		e.log().InfoContext(ctx, "event for an instance that does not exist dropped", "eventId", ev.ID, "instance", key.String())
		return nil
	case errors.Is(err, domain.ErrNotFound):
		st = turn.NewState()
	case err != nil:
		return err
	}
	r := &run{e: e, key: key, st: st}
	if st.HasProcessed(ev.ID) {
		// A redelivery. When a worker died mid-turn, the turn is still
		// running with no one at it: carry it on from its last commit.
		if t, ok := st.Turns[st.Instance.ActiveTurn]; ok && t.Status == turn.TurnRunning && st.Instance.Status == turn.Active {
			e.log().InfoContext(ctx, "continuing an interrupted turn", "eventId", ev.ID, "turnId", t.ID, "traceId", t.TraceID)
			return r.runTurn(ctx, t.ID)
		}
		e.log().InfoContext(ctx, "duplicate event ignored", "eventId", ev.ID, "instance", key.String())
		return nil
	}
	in := parseInput(ev)
	switch {
	case st.Instance.Status == turn.Terminated:
		e.log().WarnContext(ctx, "event for a terminated instance recorded, not run", "eventId", ev.ID, "instance", key.String())
		if in.Type == EventDelegate {
			// The delegating agent waits for a result: tell it the task
			// will not run, or its call stays "pending" for ever.
			if err := r.refuseDelegation(ctx, ev); err != nil {
				return err
			}
		}
		return r.commit(ctx, func(c *turn.Commit) { c.Processed = ev.ID })
	case in.Type == EventAuthGranted || in.Type == EventAuthExpired:
		return r.authEvent(ctx, ev, in)
	case in.Type == EventAuthRevoked:
		// It says why a call asks for consent again; the call itself
		// waits parked on that consent, and its auth.granted or
		// auth.expired moves it. Recorded: no turn starts, nothing waits
		// in the backlog, a parked call stays parked.
		return r.commit(ctx, func(c *turn.Commit) { c.Processed = ev.ID })
	case in.Type == EventContinuation || in.Type == EventWakeup && ev.Metadata[MetaWake] != "":
		// A hand-over, or a lifecycle wake-up (resume): carry on the
		// instance's work — its turn, else its backlog. Never a message.
		if err := r.commit(ctx, func(c *turn.Commit) { c.Processed = ev.ID }); err != nil {
			return err
		}
		if st.Instance.Status != turn.Active {
			return nil
		}
		if id := r.st.Instance.ActiveTurn; id != "" {
			return r.runTurn(ctx, id)
		}
		return r.next(ctx)
	case st.Instance.Status == turn.Paused || st.Instance.ActiveTurn != "":
		return r.commit(ctx, func(c *turn.Commit) {
			c.BacklogPush = []domain.Event{ev}
			c.Processed = ev.ID
		})
	}
	return r.start(ctx, ev, in, 0)
}

// startsAnInstance reports whether ev may create its instance: a message
// or any event a connector posts may; the engine's own news about work in
// an instance (consent granted, expired or revoked; a hand-over; a
// lifecycle wake-up) needs the instance it is about.
func startsAnInstance(in input, ev domain.Event) bool {
	switch in.Type {
	case EventAuthGranted, EventAuthExpired, EventAuthRevoked, EventContinuation:
		return false
	case EventWakeup:
		return ev.Metadata[MetaWake] == ""
	}
	return true
}

// run is one Handle's working state: the instance as last committed.
type run struct {
	e   *Engine
	key turn.InstanceKey
	st  turn.State
	// stepped: this Handle has run a step (it may hand over now).
	stepped bool
	// inStep: this Handle is in the middle of a step — it has the step's
	// model answer or is running its calls. A pause lets it finish the
	// step (its calls run, their results are stored) and stops the turn
	// at the step's end, the next step boundary.
	inStep bool
}

// commit builds a commit over the current state with mut, writes it and
// applies it to the state. The instance record's version, work version,
// UpdatedAt and key are set here.
//
// When the commit finds the instance moved on only by a pause or a resume
// (the version moved, the work version did not), nothing this run read
// has changed but the status: it reloads and commits again over the new
// version, keeping the new status. That is what lets a step in flight
// finish under a pause — its model answer and its tools' results are
// stored, never thrown away and asked for or run again (issue 16). Any
// other writer in between (terminate, a delete, another worker) makes it
// ErrStale as before: the caller reloads and decides again.
func (r *run) commit(ctx context.Context, mut func(*turn.Commit)) error {
	return r.write(ctx, false, mut)
}

// setStatus commits a pause or a resume: it keeps the work version, so a
// step in flight commits over it.
func (r *run) setStatus(ctx context.Context, status turn.InstanceStatus) error {
	return r.write(ctx, true, func(c *turn.Commit) { c.Instance.Status = status })
}

func (r *run) write(ctx context.Context, lifecycle bool, mut func(*turn.Commit)) error {
	for attempt := 0; ; attempt++ {
		err := r.try(ctx, lifecycle, mut)
		if !errors.Is(err, turn.ErrStale) || lifecycle || attempt >= maxStaleRetries {
			return err
		}
		st, lerr := r.e.Store.Load(ctx, r.key)
		if lerr != nil || !onlyStatusMoved(r.st.Instance, st.Instance) {
			return err
		}
		r.e.log().InfoContext(ctx, "instance paused or resumed under a step in flight: committing over it",
			"instance", r.key.String(), "status", string(st.Instance.Status), "version", st.Instance.Version)
		r.st = st
	}
}

// onlyStatusMoved reports whether now differs from was by pauses and
// resumes only.
func onlyStatusMoved(was, now turn.Instance) bool {
	return was.WorkVersion != 0 && now.WorkVersion == was.WorkVersion && now.Version > was.Version && now.Status != turn.Terminated
}

func (r *run) try(ctx context.Context, lifecycle bool, mut func(*turn.Commit)) error {
	inst := r.st.Instance
	if inst.Version == 0 {
		inst = turn.Instance{Key: r.key, Status: turn.Active, CreatedAt: r.e.now()}
	}
	inst.Version++
	if !lifecycle {
		inst.WorkVersion = inst.Version
	}
	inst.UpdatedAt = r.e.now()
	c := turn.Commit{Expect: r.st.Instance.Version, Instance: inst}
	mut(&c)
	if err := r.e.Store.Commit(ctx, c); err != nil {
		return err
	}
	next, err := turn.Apply(r.st, c)
	if err != nil {
		return fmt.Errorf("engine: a committed change does not apply: %w", err)
	}
	r.st = next
	if r.e.Notify != nil && c.Turn != nil && len(c.Events) > 0 {
		r.e.Notify(logging.WithTraceID(ctx, c.Turn.TraceID), *c.Turn, c.Events)
	}
	return nil
}

// emit appends a turn event to c for t (t is the commit's turn copy).
func (r *run) emit(c *turn.Commit, t *turn.Turn, typ string, data any) {
	var raw json.RawMessage
	if data != nil {
		raw, _ = json.Marshal(data)
	}
	c.Events = append(c.Events, turn.TurnEvent{TurnID: t.ID, Seq: t.NextEvent, Type: typ, At: r.e.now(), Data: raw})
	t.NextEvent++
}

// message appends a message event to c (its Seq from the instance).
func (r *run) message(c *turn.Commit, typ message.EventType, m *message.Message) {
	c.Messages = append(c.Messages, message.Event{Seq: c.Instance.NextSeq, Type: typ, Message: m})
	c.Instance.NextSeq++
}

// turnID derives a turn's id from the event that starts it, so a start
// retried after a crash names the same turn.
func turnID(eventID string) string {
	sum := sha256.Sum256([]byte("turn\x00" + eventID))
	return "turn-" + hex.EncodeToString(sum[:10])
}

// start begins a turn for ev (popping it from the backlog when pop is 1)
// and runs it.
func (r *run) start(ctx context.Context, ev domain.Event, in input, pop int) error {
	t := turn.Turn{
		ID: turnID(ev.ID), Instance: r.key, InputEventID: ev.ID, InputType: in.Type,
		Origin: ev.Origin, Auth: ev.Auth, TraceID: traceID(ev), Status: turn.TurnRunning, StartedAt: r.e.now(),
	}
	err := r.commit(ctx, func(c *turn.Commit) {
		c.Instance.ActiveTurn = t.ID
		c.BacklogPop = pop
		if pop == 0 {
			c.Processed = ev.ID
		}
		if (in.Type == EventUserInput || in.Type == EventDelegate) && in.Text != "" || in.Type != EventUserInput && in.Type != EventDelegate && in.Type != EventWakeup {
			text := in.Text
			if in.Type != EventUserInput && in.Type != EventDelegate {
				text = ev.Input // other event kinds reach the model as their JSON
			}
			r.message(c, message.LLMMessage, &message.Message{ID: t.ID + "-input", Role: message.User,
				Content: []message.Part{{Type: message.Text, Text: text}}})
		}
		r.emit(c, &t, turn.EvTurnStarted, map[string]any{"inputType": in.Type, "eventId": ev.ID, "traceId": t.TraceID})
		c.Turn = &t
	})
	if err != nil {
		return err
	}
	r.e.log().InfoContext(ctx, "turn started", "turnId", t.ID, "traceId", t.TraceID, "instance", r.key.String(), "inputType", in.Type)
	return r.runTurn(ctx, t.ID)
}

// traceID continues the event's trace when it carries one.
func traceID(ev domain.Event) string {
	if id := ev.Metadata["traceId"]; id != "" {
		return id
	}
	sum := sha256.Sum256([]byte("trace\x00" + ev.ID))
	return hex.EncodeToString(sum[:16])
}

// authEvent resumes the calls parked on the consent the event reports:
// auth.granted runs them again (switching parked → resuming in one
// conditional commit, so a duplicate finds nothing parked), auth.expired
// answers them authorization_expired.
func (r *run) authEvent(ctx context.Context, ev domain.Event, in input) error {
	session := ev.Metadata["authSessionId"]
	if session == "" {
		session = ev.ID
	}
	active := r.st.Instance.ActiveTurn
	t, ok := r.st.Turns[active]
	var parked []turn.Call
	if ok && t.Status == turn.TurnParked {
		for _, cl := range r.st.Calls {
			if cl.TurnID == active && cl.State == turn.CallParked && cl.AuthSession == session {
				parked = append(parked, cl)
			}
		}
	}
	if len(parked) == 0 {
		// Not for a parked call (the turn moved on, or a duplicate after
		// the dedup window): recorded, nothing runs.
		r.e.log().InfoContext(ctx, "auth event with no call parked on it", "eventId", ev.ID, "authSessionId", session, "instance", r.key.String())
		return r.commit(ctx, func(c *turn.Commit) { c.Processed = ev.ID })
	}
	// Also while paused: the consent is recorded at once (the call waits
	// resuming) and runs when the instance resumes.
	sortCalls(parked)
	err := r.commit(ctx, func(c *turn.Commit) {
		c.Processed = ev.ID
		tt := t
		tt.Status = turn.TurnRunning
		r.emit(c, &tt, turn.EvTurnResumed, map[string]any{"authSessionId": session, "event": in.Type})
		for _, cl := range parked {
			cl.UpdatedAt = r.e.now()
			if in.Type == EventAuthGranted {
				cl.State = turn.CallResuming
			} else {
				cl.State = turn.CallError
				cl.Result = errorResult(CodeAuthorizationExpired, "the user did not approve access in time; the tool did not run")
				r.callDone(c, &tt, cl)
			}
			c.Calls = append(c.Calls, cl)
		}
		c.Turn = &tt
	})
	if err != nil {
		return err
	}
	return r.runTurn(ctx, active)
}

// errorResult is a tool result the engine writes itself, in the tool
// hooks' shape.
func errorResult(code, msg string) json.RawMessage {
	b, _ := json.Marshal(map[string]any{"status": "error", "error": map[string]string{"code": code, "message": msg, "name": "TurnEngine"}})
	return b
}

// callDone records on the turn that cl has its result: its event
// (tool.completed or tool.failed) and the error count. The result reaches
// the conversation at the step's end (stepResults), so the model reads
// the results in the order of its calls, whichever finished first.
func (r *run) callDone(c *turn.Commit, t *turn.Turn, cl turn.Call) {
	data := map[string]any{"callId": cl.ID, "tool": cl.Tool, "step": cl.Step}
	if !cl.StartedAt.IsZero() {
		// From the call's first start to this result (cl.UpdatedAt, the
		// time its record is committed with): waits for consent and
		// re-runs after a crash included. A call that never started has
		// none.
		data["latencyMs"] = millis(cl.UpdatedAt.Sub(cl.StartedAt))
	}
	typ := turn.EvToolCompleted
	if cl.State == turn.CallError {
		typ = turn.EvToolFailed
		t.Errors++
		// What failed, for watchers and operators: the code and the
		// message the model is given (tool errors are scrubbed of
		// credentials where they are made), cut short.
		data["code"], data["message"] = errorOf(cl.Result)
	}
	r.emit(c, t, typ, data)
}

// eventMessageLimit bounds the error message a tool.failed event and its
// log line carry (the model gets the tool's own limit).
const eventMessageLimit = 300

// errorOf reads the code and the message of an error result in the tool
// hooks' shape ({"status":"error","error":{"code","message"}}), the
// message cut to eventMessageLimit bytes on a rune boundary.
func errorOf(result json.RawMessage) (code, msg string) {
	var r struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(result, &r) != nil {
		return "", ""
	}
	msg = r.Error.Message
	if len(msg) > eventMessageLimit {
		cut := eventMessageLimit
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return r.Error.Code, msg
}

// stepResults appends to c, in the order the model made the calls, the
// tool_result message of every call in calls that has its result and
// none in the conversation yet (an engine before issue 16 wrote them as
// each call finished: those are not written twice).
func (r *run) stepResults(c *turn.Commit, t turn.Turn, calls []turn.Call) {
	written := map[string]bool{}
	for _, ev := range r.st.Events {
		if ev.Message == nil || ev.Message.Role != message.Tool {
			continue
		}
		for _, p := range ev.Message.Content {
			if p.Type == message.ToolResult {
				written[p.CallID] = true
			}
		}
	}
	sorted := slices.Clone(calls)
	sortCalls(sorted)
	for _, cl := range sorted {
		if !cl.State.Done() || written[cl.ID] {
			continue
		}
		r.message(c, message.LLMMessage, &message.Message{ID: t.ID + "-result-" + cl.ID, Role: message.Tool,
			Content: []message.Part{{Type: message.ToolResult, CallID: cl.ID, Output: cl.Result, IsError: cl.State == turn.CallError}}})
	}
}
