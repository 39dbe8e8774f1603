// Package engine runs agent turns: it takes one queued event for an agent
// instance and runs the turn's steps — step.config, step.tools,
// step.blocks, step.llmInput, step.llmCall, the tool calls, step.post —
// committing every state change to the turn.Store before the next one
// starts. A tool whose token needs the user's consent parks its call; the
// auth.granted event resumes exactly that call, once.
//
// The engine is pure logic over ports (store, models, tools, auth.pending,
// queue, clock): it does no I/O of its own, reads no environment, and never
// puts a token in a message, an event or a log line — tools get tokens
// from the OAuth core inside the tool plane, never through the engine.
package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// Agent is what step.config resolves for an instance's agent from the
// active bundle revision.
type Agent struct {
	Model model.Model
	// ModelName is the name of the bundle's Model resource behind Model,
	// for the step.started event ("": not said, and the event has no
	// model).
	ModelName    string
	SystemPrompt string
	// MaxSteps ends a turn with turn.stepLimitReached (the Swarm's
	// policy.maxStepsPerTurn unless the Agent overrides it).
	MaxSteps int
	// MaxToolCallsPerStep: calls beyond it get an error result.
	MaxToolCallsPerStep int
	ToolTimeout         time.Duration
	// Peers are the other agents of the swarm: with any, the agent gets
	// the agents.delegate tool.
	Peers []string
}

// Config resolves the agent of an instance at the active bundle revision
// (the Safe Point: called once per step, at step.config).
type Config interface {
	Agent(ctx context.Context, key turn.InstanceKey) (Agent, string, error)
}

// Tool is one tool of a step's catalog.
type Tool struct {
	Spec model.ToolSpec
	// Idempotent tools are run again when a crash left their outcome
	// unknown; others answer E_TOOL_OUTCOME_UNKNOWN.
	Idempotent bool
}

// Invocation is one tool call the engine asks the tool plane to run.
type Invocation struct {
	Turn turn.Turn
	Call turn.Call
	// Catalog is the step's tool names: a call outside it is refused.
	Catalog []string
	// Resume names this call for the auth session a consent would start,
	// so auth.granted comes back to exactly it.
	Resume domain.ResumeInfo
	// IdempotencyKey is stable across re-runs of this call (http tools
	// send it as Idempotency-Key).
	IdempotencyKey string
}

// Outcome kinds.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
	// OutcomeAuthorizationRequired: the tool needs the user's consent
	// first; the call parks.
	OutcomeAuthorizationRequired = "authorization_required"
)

// Outcome is what a tool call produced.
type Outcome struct {
	Kind string
	// Result is the tool result for the model (the tool hooks' JSON).
	Result json.RawMessage
	// AuthSession and AuthorizationURL, with OutcomeAuthorizationRequired.
	AuthSession      string
	AuthorizationURL string
	// Events are turn events the call reports (a changeset commit's
	// outcome), recorded in the commit of its result: exactly once with
	// it, never without it.
	Events []Event
}

// Revisions describes a change of the bundle revision an instance runs
// on, for the swarmBundle.revisionChanged block of the first step that
// runs on the new one; ok false: no block (the swarm does not want it).
type Revisions interface {
	Changed(ctx context.Context, key turn.InstanceKey, from, to string) (data json.RawMessage, ok bool, err error)
}

// Event is a turn event a tool call reports.
type Event struct {
	Type string
	Data any
}

// Tools is the tool plane as a turn sees it.
type Tools interface {
	// Catalog is the step's tools: the agent's tool selection ∩ what the
	// turn's principal may see.
	Catalog(ctx context.Context, t turn.Turn) ([]Tool, error)
	// Invoke runs one call through the tool hooks (catalog, scopes, rate
	// limit, audit). A tool error is an OutcomeError, never a Go error.
	Invoke(ctx context.Context, in Invocation) Outcome
}

// Pending gives the auth.pending context block of an instance (its
// pending consents, no secret), for step.blocks.
type Pending interface {
	PendingBlock(ctx context.Context, key turn.InstanceKey) (json.RawMessage, error)
}

// Events types the engine reads from a queued event's input.
const (
	EventUserInput    = "user.input"
	EventAuthGranted  = "auth.granted"
	EventAuthExpired  = "auth.expired"
	EventContinuation = "turn.continue"
	EventWakeup       = "system.wakeup"
	// EventAuthRevoked: a grant a call used was revoked (its provider no
	// longer honours it); the call parked on a new consent, named by the
	// event's authSessionId, whose auth.granted resumes it.
	EventAuthRevoked = "auth.revoked"
)

// Resume metadata keys: a parked call's auth session carries them in its
// resume target, and auth.granted / auth.expired bring them back.
const (
	MetaTurnID = "turnId"
	MetaCallID = "callId"
	MetaStep   = "step"
	// MetaWake marks a lifecycle wake-up (resume): it carries work on and
	// adds no message.
	MetaWake = "wake"
)
