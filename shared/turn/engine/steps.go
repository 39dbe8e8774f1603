package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/observe/logging"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// runTurn runs the active turn's steps until it ends, parks or hands
// over, then starts the next backlogged event, if any.
func (r *run) runTurn(ctx context.Context, id string) error {
	// Every line logged during the turn — the tools', the hooks', the
	// OAuth core's — carries its trace id.
	ctx = logging.WithTraceID(ctx, r.st.Turns[id].TraceID)
	for {
		t := r.st.Turns[id]
		switch {
		case t.Status.Ended():
			return r.next(ctx)
		case t.Status == turn.TurnParked:
			return nil // the consent picks it up
		case r.st.Instance.Status != turn.Active && !r.inStep:
			// Paused: a step this run is in finishes first (below); none
			// starts, and no call of a step left by another run does.
			// The resume's wake-up carries the turn on.
			return nil
		}
		calls := r.stepCalls(t)
		switch {
		case t.StepAnswered && pendingCalls(calls):
			r.inStep = true
			if err := r.runCalls(ctx, t, calls); err != nil {
				return err
			}
		case t.StepAnswered && parkedCalls(calls):
			// Every call that could run has its result; those left wait
			// for consent. Whoever gets here parks the turn — also a run
			// carrying on after the one that ran the calls lost this
			// commit to a crash, an error or a pause (issue 16).
			if err := r.parkTurn(ctx, t); err != nil {
				return err
			}
			r.inStep = false
		case t.StepAnswered:
			if err := r.endStep(ctx, t, calls); err != nil {
				return err
			}
			r.inStep = false
		default:
			// Hand over only after a step of this invocation: a fresh one
			// always makes progress, so a turn never hands over without
			// one (nor queues the same continuation id twice, which the
			// queue would drop as a duplicate and leave the turn stalled).
			if r.stepped && r.short(ctx) {
				return r.handOver(ctx, t)
			}
			if err := r.step(ctx, t); err != nil {
				return err
			}
			r.stepped, r.inStep = true, true
		}
	}
}

// stepCalls are the current step's calls, in the model's order.
func (r *run) stepCalls(t turn.Turn) []turn.Call {
	var out []turn.Call
	for _, cl := range r.st.Calls {
		if cl.TurnID == t.ID && cl.Step == t.Steps {
			out = append(out, cl)
		}
	}
	sortCalls(out)
	return out
}

// turnCalls are all the calls of the turn still in the state.
func (r *run) turnCalls(t turn.Turn) []turn.Call {
	var out []turn.Call
	for _, cl := range r.st.Calls {
		if cl.TurnID == t.ID {
			out = append(out, cl)
		}
	}
	sortCalls(out)
	return out
}

// sortCalls orders calls by step, then by their position in the model's
// answer (Index; calls stored before Index existed all have 0 and keep
// the order of their last update, then of their id).
func sortCalls(cs []turn.Call) {
	sort.SliceStable(cs, func(i, j int) bool {
		a, b := cs[i], cs[j]
		switch {
		case a.Step != b.Step:
			return a.Step < b.Step
		case a.Index != b.Index:
			return a.Index < b.Index
		case !a.UpdatedAt.Equal(b.UpdatedAt):
			return a.UpdatedAt.Before(b.UpdatedAt)
		}
		return a.ID < b.ID
	})
}

func pendingCalls(cs []turn.Call) bool {
	for _, cl := range cs {
		if cl.State == turn.CallPlanned || cl.State == turn.CallStarted || cl.State == turn.CallResuming {
			return true
		}
	}
	return false
}

func parkedCalls(cs []turn.Call) bool {
	for _, cl := range cs {
		if cl.State == turn.CallParked {
			return true
		}
	}
	return false
}

// short reports whether the invocation has too little time for a step.
func (r *run) short(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	reserve := r.e.Reserve
	if reserve == 0 {
		reserve = 30 * time.Second
	}
	return ok && time.Until(dl) < reserve
}

// handOver queues a continuation of the turn (dedup id per step, so a
// retried hand-over queues it once) and returns.
func (r *run) handOver(ctx context.Context, t turn.Turn) error {
	if r.e.Queue == nil {
		return errors.New("engine: out of time and no queue to hand the turn over")
	}
	ev := domain.Event{ID: fmt.Sprintf("cont:%s:%d", t.ID, t.Steps), SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: r.key.Swarm},
		InstanceKey: r.key.Key, AgentName: r.key.Agent, Input: `{"type":"` + EventContinuation + `"}`, Auth: t.Auth, Origin: t.Origin,
		Metadata: map[string]string{MetaTurnID: t.ID, "traceId": t.TraceID}, EnqueuedAt: r.e.now()}
	r.e.log().InfoContext(ctx, "turn handed over", "turnId", t.ID, "traceId", t.TraceID, "step", t.Steps)
	return r.e.Queue.Enqueue(ctx, ev)
}

// step runs the pipeline up to the model's answer and commits it (with
// its tool calls planned) before any tool runs: a crash after this never
// calls the model for this step again.
func (r *run) step(ctx context.Context, t turn.Turn) error {
	log := r.e.log().With("turnId", t.ID, "traceId", t.TraceID, "step", t.Steps+1)
	sc := &StepContext{Turn: t, Step: t.Steps + 1, Key: r.key}
	began, started := r.e.now(), time.Now()
	fail := func(code string, err error) error {
		log.ErrorContext(ctx, "step failed", "code", code, "err", err)
		return r.failTurn(ctx, t, code, err.Error())
	}
	if err := r.e.Hooks.run(ctx, r.e.Hooks.StepPre, sc); err != nil {
		return fail("step_pre_failed", err)
	}
	// step.config: the Safe Point.
	agent, rev, err := r.e.Config.Agent(ctx, r.key)
	if err != nil {
		return fail("config_failed", err)
	}
	sc.Agent, sc.Revision = agent, rev
	maxSteps := agent.MaxSteps
	if maxSteps <= 0 {
		maxSteps = defaultMaxSteps
	}
	if t.Steps >= maxSteps {
		return r.stepLimit(ctx, t, maxSteps)
	}
	// step.tools, at the revision step.config loaded.
	at := t
	at.BundleRevision = rev
	if sc.Tools, err = r.e.Tools.Catalog(ctx, at); err != nil {
		return fail("catalog_failed", err)
	}
	if len(agent.Peers) > 0 {
		sc.Tools = append(sc.Tools, delegateTool(agent.Peers))
	}
	if err := r.e.Hooks.run(ctx, r.e.Hooks.StepTools, sc); err != nil {
		return fail("step_tools_failed", err)
	}
	// step.blocks
	if r.e.Pending != nil {
		block, err := r.e.Pending.PendingBlock(ctx, r.key)
		if err != nil {
			log.WarnContext(ctx, "auth.pending block unavailable", "err", err)
		} else if len(block) > 0 {
			sc.Blocks = append(sc.Blocks, Block{Type: "auth.pending", Data: block})
		}
	}
	if prev := r.st.Instance.BundleRevision; prev != "" && prev != rev && r.e.Revisions != nil {
		data, ok, err := r.e.Revisions.Changed(ctx, r.key, prev, rev)
		switch {
		case err != nil:
			log.WarnContext(ctx, "swarmBundle.revisionChanged block unavailable", "previousRef", prev, "newRef", rev, "err", err)
		case ok:
			sc.RevisionChanged = data
			sc.Blocks = append(sc.Blocks, Block{Type: turn.EvRevisionChanged, Data: data})
		}
	}
	if err := r.e.Hooks.run(ctx, r.e.Hooks.StepBlocks, sc); err != nil {
		return fail("step_blocks_failed", err)
	}
	// step.llmInput: Base + SUM(Events), the system prompt, the blocks.
	msgs, warns := message.Fold(r.st.Base, r.st.Events)
	sc.Messages = llmInput(agent.SystemPrompt, msgs, sc.Blocks)
	if err := r.e.Hooks.run(ctx, r.e.Hooks.LLMInput, sc); err != nil {
		return fail("llm_input_failed", err)
	}
	if bad := message.CheckToolPairs(sc.Messages); len(bad) > 0 {
		return fail("history_invalid", fmt.Errorf("%s: %s", bad[0].Code, bad[0].Detail))
	}
	// step.llmCall, through the middleware.
	specs := make([]model.ToolSpec, len(sc.Tools))
	offered := make(map[string]bool, len(sc.Tools))
	for i, tl := range sc.Tools {
		specs[i] = tl.Spec
		offered[tl.Spec.Name] = true
	}
	// Calls of tools this step does not offer (refused, or from a step
	// whose catalog was wider) reach the model as text: Bedrock Converse
	// refuses toolUse blocks without a toolConfig that defines them, and
	// a history every provider accepts is one without such blocks. The
	// stored conversation keeps them as they were.
	req := model.Request{Messages: message.ToolsAsText(sc.Messages, func(name string) bool { return offered[name] }), Tools: specs}
	// The model call's own duration, on the engine's clock like every
	// figure of the events: the middleware and the adapter's retries
	// included, the steps before it not.
	called := r.e.now()
	resp, err := r.e.Hooks.wrapLLM(agent.Model.Call)(ctx, req)
	if err != nil {
		return fail("model_failed", err)
	}
	modelTook := r.e.now().Sub(called)
	sc.Response = &resp
	return r.commitAnswer(ctx, t, sc, warns, began, time.Since(started), modelTook)
}

// llmInput is Base + SUM(Events) with the system slot filled — by a
// system_message event when one set it, else the agent's prompt — and the
// context blocks last, as a note (never stored: rebuilt each step).
func llmInput(system string, msgs []message.Message, blocks []Block) []message.Message {
	out := make([]message.Message, 0, len(msgs)+2)
	if len(msgs) > 0 && msgs[0].Role == message.System {
		out = append(out, msgs...)
	} else {
		if system != "" {
			out = append(out, message.Message{ID: "system", Role: message.System, Content: []message.Part{{Type: message.Text, Text: system}}})
		}
		out = append(out, msgs...)
	}
	if len(blocks) > 0 {
		text := message.BlocksNote
		for _, b := range blocks {
			text += "\n" + b.Type + ": " + string(b.Data)
		}
		out = append(out, message.Message{ID: "blocks", Role: message.User, Content: []message.Part{{Type: message.Text, Text: text}}})
	}
	return out
}

// commitAnswer stores the model's answer, plans its tool calls and counts
// the step's usage, in one commit.
func (r *run) commitAnswer(ctx context.Context, t turn.Turn, sc *StepContext, warns []message.Warning, began time.Time, took, modelTook time.Duration) error {
	resp := sc.Response
	step := t.Steps + 1
	ans := resp.Message
	ans.ID = fmt.Sprintf("%s-step%d", t.ID, step)
	ans.Role = message.Assistant
	ans.Content = r.uniqueCallIDs(t, step, ans.Content)
	uses := ans.ToolUses()
	limit := sc.Agent.MaxToolCallsPerStep
	if limit <= 0 {
		limit = defaultMaxToolCallsInStep
	}
	err := r.commit(ctx, func(c *turn.Commit) {
		tt := t
		tt.Steps, tt.StepAnswered, tt.BundleRevision = step, true, sc.Revision
		tt.Catalog, tt.Idempotent, tt.Peers = nil, nil, sc.Agent.Peers
		for _, tl := range sc.Tools {
			tt.Catalog = append(tt.Catalog, tl.Spec.Name)
			if tl.Idempotent {
				tt.Idempotent = append(tt.Idempotent, tl.Spec.Name)
			}
		}
		tt.Usage = tt.Usage.Add(resp.Usage)
		// startedAt (step.pre) and the step's usage, for step.completed's
		// figures; the model call's, for timelines.
		r.emit(c, &tt, turn.EvStepStarted, stepStarted(step, sc, began, modelTook))
		if sc.RevisionChanged != nil {
			r.emit(c, &tt, turn.EvRevisionChanged, sc.RevisionChanged)
		}
		c.Instance.BundleRevision = sc.Revision
		for _, w := range warns {
			r.emit(c, &tt, turn.EvMessageWarning, w)
		}
		r.message(c, message.LLMMessage, &ans)
		if text := ans.TextOf(); text != "" {
			tt.Final = text
		}
		for i, u := range uses {
			cl := turn.Call{ID: u.CallID, TurnID: t.ID, Step: step, Index: i, Tool: u.Name, Args: u.Input, State: turn.CallPlanned,
				UpdatedAt: r.e.now()}
			if i >= limit {
				cl.State, cl.Result = turn.CallError, errorResult(CodeTooManyCalls, fmt.Sprintf("at most %d tool calls per step; this one did not run", limit))
				c.Calls = append(c.Calls, cl)
				r.callDone(c, &tt, cl)
				continue
			}
			tt.ToolCalls++
			c.Calls = append(c.Calls, cl)
			r.emit(c, &tt, turn.EvToolCalled, toolCalled(cl))
		}
		c.Turn = &tt
	})
	if err != nil {
		return err
	}
	r.e.log().InfoContext(ctx, "model answered", "turnId", t.ID, "traceId", t.TraceID, "step", step, "finish", string(resp.Finish),
		"toolCalls", len(uses), "latencyMs", took.Milliseconds(), "promptTokens", resp.Usage.PromptTokens, "completionTokens", resp.Usage.CompletionTokens)
	return nil
}

// stepStarted is step.started's data: the step, its revision, when it
// began and its model call — which Model (the bundle's name, and the
// provider's id the adapter called), why the model stopped, its duration
// and its usage. Never any of the conversation.
func stepStarted(step int, sc *StepContext, began time.Time, modelTook time.Duration) map[string]any {
	resp := sc.Response
	data := map[string]any{"step": step, "bundleRevision": sc.Revision, "startedAt": began, "usage": resp.Usage,
		"modelLatencyMs": millis(modelTook)}
	if sc.Agent.ModelName != "" {
		data["model"] = sc.Agent.ModelName
	}
	if resp.ModelID != "" {
		data["modelId"] = resp.ModelID
	}
	if resp.Finish != "" {
		data["finishReason"] = string(resp.Finish)
	}
	return data
}

// toolCalled is tool.called's data. The arguments appear only as the
// tool audit's argsHash (toolhooks.ArgsHash, with no known secrets: the
// engine resolves none, and the tool plane's audit record of the same
// call passes none either, so both carry the same hash); arguments that
// are not I-JSON hash as "", as in the audit record.
func toolCalled(cl turn.Call) map[string]any {
	hash, _ := toolhooks.ArgsHash(cl.Args, nil)
	return map[string]any{"callId": cl.ID, "tool": cl.Tool, "step": cl.Step, "argsHash": hash}
}

// millis is a duration in milliseconds to the microsecond, as the events'
// figures are.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// uniqueCallIDs gives every tool call of the answer an id no other call
// of the turn has: models may reuse ids across steps, and both the call
// records and the providers' tool_use/tool_result pairing need them
// unique. A fresh id keeps the providers' alphabet ([a-zA-Z0-9_-]).
func (r *run) uniqueCallIDs(t turn.Turn, step int, parts []message.Part) []message.Part {
	seen := map[string]bool{}
	for _, cl := range r.st.Calls {
		if cl.TurnID == t.ID {
			seen[cl.ID] = true
		}
	}
	out := make([]message.Part, len(parts))
	for i, p := range parts {
		if p.Type == message.ToolUse && (p.CallID == "" || seen[p.CallID] || len(p.CallID) > 64) {
			// A fresh id no call of the turn has — the model's own ids
			// may look like ours.
			p.CallID = fmt.Sprintf("call_s%d_%d", step, i)
			for n := 2; seen[p.CallID]; n++ {
				p.CallID = fmt.Sprintf("call_s%d_%d_%d", step, i, n)
			}
		}
		if p.Type == message.ToolUse {
			seen[p.CallID] = true
		}
		out[i] = p
	}
	return out
}

// runCalls runs the step's pending calls one after another; each is
// marked started (committed) before it runs, and its outcome committed
// after. A call left started by a crash re-runs only if its tool is
// idempotent.
func (r *run) runCalls(ctx context.Context, t turn.Turn, calls []turn.Call) error {
	for _, cl := range calls {
		switch cl.State {
		case turn.CallPlanned, turn.CallResuming, turn.CallStarted:
		default:
			continue
		}
		if cl.State == turn.CallStarted && !slices.Contains(t.Idempotent, cl.Tool) {
			// Started before a crash, outcome unknown, not safe to repeat.
			cl.State, cl.Result = turn.CallError, errorResult(CodeOutcomeUnknown, "the tool was started but its outcome is unknown (the worker stopped); it was not run again because it is not idempotent")
			if err := r.outcome(ctx, cl); err != nil {
				return err
			}
			continue
		}
		cl.State, cl.Starts, cl.UpdatedAt = turn.CallStarted, cl.Starts+1, r.e.now()
		if cl.StartedAt.IsZero() {
			cl.StartedAt = cl.UpdatedAt
		}
		if err := r.commit(ctx, func(c *turn.Commit) { c.Calls = []turn.Call{cl} }); err != nil {
			return err
		}
		tt := r.st.Turns[t.ID]
		in := Invocation{Turn: tt, Call: cl, Catalog: append([]string{}, tt.Catalog...), IdempotencyKey: idempotencyKey(tt.ID, cl.ID),
			Resume: domain.ResumeInfo{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: r.key.Swarm}, InstanceKey: r.key.Key, AgentName: r.key.Agent,
				Origin: tt.Origin, Auth: tt.Auth, TurnID: tt.ID, Step: cl.Step, CallID: cl.ID}}
		invoke := r.e.Tools.Invoke
		if cl.Tool == DelegateTool && slices.Contains(tt.Catalog, DelegateTool) {
			invoke = func(ctx context.Context, in Invocation) Outcome { return r.delegate(ctx, in.Turn, in.Call, tt.Peers) }
		}
		out := r.e.Hooks.wrapTool(invoke)(ctx, in)
		switch out.Kind {
		case OutcomeAuthorizationRequired:
			cl.State, cl.AuthSession = turn.CallParked, out.AuthSession
			if err := r.park(ctx, cl, out); err != nil {
				return err
			}
			continue
		case OutcomeOK:
			cl.State = turn.CallOK
		default:
			cl.State = turn.CallError
		}
		cl.Result = out.Result
		if err := r.outcome(ctx, cl, out.Events...); err != nil {
			return err
		}
	}
	return nil
}

// parkTurn holds the turn for the consents its step's parked calls wait
// for (their links are out since each call parked).
func (r *run) parkTurn(ctx context.Context, t turn.Turn) error {
	return r.commit(ctx, func(c *turn.Commit) {
		tt := r.st.Turns[t.ID]
		tt.Status = turn.TurnParked
		c.Turn = &tt
	})
}

// idempotencyKey is stable for a call across re-runs and processes: a
// hash of (turn, call), so whatever a model put in its call id, the key is
// a short visible-ASCII header value.
func idempotencyKey(turnID, callID string) string {
	sum := sha256.Sum256([]byte(turnID + "\x00" + callID))
	return "agentauth-" + hex.EncodeToString(sum[:16])
}

// outcome commits a call's known result: the call, its tool_result
// message, its event, and the events the call reported.
func (r *run) outcome(ctx context.Context, cl turn.Call, events ...Event) error {
	cl.UpdatedAt = r.e.now()
	err := r.commit(ctx, func(c *turn.Commit) {
		tt := r.st.Turns[cl.TurnID]
		c.Calls = []turn.Call{cl}
		r.callDone(c, &tt, cl)
		for _, ev := range events {
			r.emit(c, &tt, ev.Type, ev.Data)
		}
		c.Turn = &tt
	})
	if err == nil && cl.State == turn.CallError {
		t := r.st.Turns[cl.TurnID]
		code, msg := errorOf(cl.Result)
		r.e.log().WarnContext(ctx, "tool call failed", "turnId", t.ID, "traceId", t.TraceID, "callId", cl.ID, "tool", cl.Tool,
			"step", cl.Step, "code", code, "message", msg)
	}
	return err
}

// park records a call waiting for the user's consent and tells watchers
// at once, with the link (the provider's authorization URL: no secret).
func (r *run) park(ctx context.Context, cl turn.Call, out Outcome) error {
	cl.UpdatedAt = r.e.now()
	err := r.commit(ctx, func(c *turn.Commit) {
		tt := r.st.Turns[cl.TurnID]
		c.Calls = []turn.Call{cl}
		r.emit(c, &tt, turn.EvTurnParked, map[string]any{"callId": cl.ID, "tool": cl.Tool, "authSessionId": out.AuthSession, "authorizationUrl": out.AuthorizationURL})
		c.Turn = &tt
	})
	if err == nil {
		t := r.st.Turns[cl.TurnID]
		r.e.log().InfoContext(ctx, "tool call parked for consent", "turnId", t.ID, "traceId", t.TraceID, "callId", cl.ID, "tool", cl.Tool, "authSessionId", out.AuthSession)
	}
	return err
}

// endStep runs step.post and decides: more steps while the model called
// tools, else the turn completes.
func (r *run) endStep(ctx context.Context, t turn.Turn, calls []turn.Call) error {
	sc := &StepContext{Turn: t, Step: t.Steps, Key: r.key}
	if err := r.e.Hooks.run(ctx, r.e.Hooks.StepPost, sc); err != nil {
		return r.failTurn(ctx, t, "step_post_failed", err.Error())
	}
	more := len(calls) > 0
	if !more {
		if err := r.returnDelegation(ctx, t, turn.TurnCompleted, nil); err != nil {
			return err
		}
	}
	return r.commit(ctx, func(c *turn.Commit) {
		tt := t
		tt.StepAnswered = false
		r.stepResults(c, tt, calls)
		r.emit(c, &tt, turn.EvStepCompleted, r.stepFigures(t, calls))
		if !more {
			r.finish(c, &tt, turn.TurnCompleted, nil)
		}
		c.Turn = &tt
	})
}

// stepFigures are step.completed's data, what watchers (metrics) need of
// the step: its calls, those that failed, and — from its step.started
// event, when the state still has it — its model usage and its latency
// since step.pre (waits for consent included).
func (r *run) stepFigures(t turn.Turn, calls []turn.Call) map[string]any {
	failed := 0
	for _, cl := range calls {
		if cl.State == turn.CallError {
			failed++
		}
	}
	data := map[string]any{"step": t.Steps, "toolCalls": len(calls), "errors": failed}
	evs := r.st.TurnEvents[t.ID]
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type != turn.EvStepStarted {
			continue
		}
		var s struct {
			Step      int         `json:"step"`
			StartedAt time.Time   `json:"startedAt"`
			Usage     model.Usage `json:"usage"`
		}
		if json.Unmarshal(evs[i].Data, &s) == nil && s.Step == t.Steps {
			data["usage"] = s.Usage
			if !s.StartedAt.IsZero() {
				data["latencyMs"] = millis(r.e.now().Sub(s.StartedAt))
			}
		}
		break
	}
	return data
}

// stepLimit ends the turn at maxStepsPerTurn.
func (r *run) stepLimit(ctx context.Context, t turn.Turn, max int) error {
	if err := r.returnDelegation(ctx, t, turn.TurnCompleted, nil); err != nil {
		return err
	}
	return r.commit(ctx, func(c *turn.Commit) {
		tt := t
		r.emit(c, &tt, turn.EvStepLimitReached, map[string]int{"maxSteps": max, "actualSteps": t.Steps})
		r.finish(c, &tt, turn.TurnCompleted, nil)
		c.Turn = &tt
	})
}

// failTurn ends the turn as failed. Calls the model made stay answered:
// any call without a result gets one, so the history stays valid.
func (r *run) failTurn(ctx context.Context, t turn.Turn, code, msg string) error {
	if err := r.returnDelegation(ctx, r.st.Turns[t.ID], turn.TurnFailed, &turn.Failure{Code: code, Message: msg}); err != nil {
		return err
	}
	return r.commit(ctx, func(c *turn.Commit) {
		tt := r.st.Turns[t.ID]
		r.answerUnfinished(c, &tt, "the turn failed before this call finished")
		tt.Errors++
		r.finish(c, &tt, turn.TurnFailed, &turn.Failure{Code: code, Message: msg})
		c.Turn = &tt
	})
}

// answerUnfinished gives every call of the turn without a result one
// (msg, as turn_failed) and writes every result the conversation lacks,
// in call order: the turn is ending, and the history must pair every
// call with its result, or every later turn of the instance would fail
// history_invalid.
func (r *run) answerUnfinished(c *turn.Commit, t *turn.Turn, msg string) {
	calls := r.turnCalls(*t)
	for i, cl := range calls {
		if !cl.State.Done() {
			cl.State, cl.Result, cl.UpdatedAt = turn.CallError, errorResult(CodeTurnFailed, msg), r.e.now()
			calls[i] = cl
			c.Calls = append(c.Calls, cl)
			r.callDone(c, t, cl)
		}
	}
	r.stepResults(c, *t, calls)
}

// finish ends the turn in c: the instance is free, the conversation
// becomes the new base.
func (r *run) finish(c *turn.Commit, t *turn.Turn, status turn.TurnStatus, f *turn.Failure) {
	now := r.e.now()
	t.Status, t.EndedAt, t.Error = status, &now, f
	typ := turn.EvTurnCompleted
	data := map[string]any{"steps": t.Steps, "toolCalls": t.ToolCalls, "errors": t.Errors, "usage": t.Usage, "final": t.Final}
	switch status {
	case turn.TurnFailed:
		typ, data["error"] = turn.EvTurnFailed, f
	case turn.TurnInterrupted:
		typ, data["error"] = turn.EvTurnInterrupted, f
	}
	r.emit(c, t, typ, data)
	c.Instance.ActiveTurn = ""
	events := append(append([]message.Event(nil), r.st.Events...), c.Messages...)
	folded, _ := message.Fold(r.st.Base, events)
	c.Rebase, c.NewBase, c.Messages = true, folded, nil
	r.e.log().Info("turn ended", "turnId", t.ID, "traceId", t.TraceID, "status", string(status), "stepCount", t.Steps,
		"toolCallCount", t.ToolCalls, "errorCount", t.Errors, "promptTokens", t.Usage.PromptTokens, "completionTokens", t.Usage.CompletionTokens,
		"totalTokens", t.Usage.TotalTokens, "latencyMs", now.Sub(t.StartedAt).Milliseconds())
}

// next starts the backlog's first event once the instance is free.
func (r *run) next(ctx context.Context) error {
	if r.st.Instance.ActiveTurn != "" || r.st.Instance.Status != turn.Active || len(r.st.Backlog) == 0 {
		return nil
	}
	ev := r.st.Backlog[0]
	in := parseInput(ev)
	if in.Type == EventAuthGranted || in.Type == EventAuthExpired || in.Type == EventContinuation {
		// Nothing is parked on it any more: drop it from the backlog.
		if err := r.commit(ctx, func(c *turn.Commit) { c.BacklogPop = 1 }); err != nil {
			return err
		}
		return r.next(ctx)
	}
	return r.start(ctx, ev, in, 1)
}
