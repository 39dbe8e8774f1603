// Package turn is agentauth's turn engine model: agent instances, their
// turns and tool calls, the conversation's base and events, and the Store
// port that persists them. Every state change is one Commit, fenced by the
// instance's version, so each commit is a checkpoint: a crash between two
// commits loses nothing committed and repeats nothing that has an outcome.
//
// This package is pure: no I/O but through its ports, no clock but the
// one it is given. It never stores or emits a secret: tokens stay in the
// OAuth store; consent links carry no token.
package turn

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// InstanceKey names an agent instance: one conversation of one agent of
// one swarm. Its events are handled in order, one turn at a time.
type InstanceKey struct {
	Swarm string `json:"swarm"`
	Key   string `json:"instanceKey"`
	Agent string `json:"agent"`
}

// String is the key's printable form, "<swarm>/<instanceKey>/<agent>": the
// FIFO message group and the store's partition.
func (k InstanceKey) String() string { return k.Swarm + "/" + k.Key + "/" + k.Agent }

// maxKeyPart bounds each part of a key (an instanceKey is often a chat's
// thread id; 200 bytes is far above any we know).
const maxKeyPart = 200

// Validate refuses empty parts, parts holding '/', '\' or control
// characters (the printable form must split back), parts that are not
// UTF-8, and over-long parts.
func (k InstanceKey) Validate() error {
	for _, p := range []struct{ name, v string }{{"swarm", k.Swarm}, {"instanceKey", k.Key}, {"agent", k.Agent}} {
		switch {
		case p.v == "":
			return fmt.Errorf("%w: %s is empty", domain.ErrInvalidID, p.name)
		case len(p.v) > maxKeyPart:
			return fmt.Errorf("%w: %s is longer than %d bytes", domain.ErrInvalidID, p.name, maxKeyPart)
		case strings.ContainsAny(p.v, "/\\") || strings.IndexFunc(p.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
			return fmt.Errorf("%w: %s holds '/', '\\' or a control character", domain.ErrInvalidID, p.name)
		case !utf8.ValidString(p.v):
			// Stored so, it would be listed with U+FFFD and could not be
			// addressed again.
			return fmt.Errorf("%w: %s is not valid UTF-8", domain.ErrInvalidID, p.name)
		}
	}
	return nil
}

// InstanceStatus is whether an instance takes new turns.
type InstanceStatus string

// Instance statuses.
const (
	Active     InstanceStatus = "active"
	Paused     InstanceStatus = "paused"
	Terminated InstanceStatus = "terminated"
)

// Instance is an agent instance's record, the fence of every commit.
type Instance struct {
	Key    InstanceKey    `json:"key"`
	Status InstanceStatus `json:"status"`
	// ActiveTurn holds the instance ("" when idle): any other event
	// meanwhile waits in the backlog.
	ActiveTurn string `json:"activeTurn,omitempty"`
	// NextSeq numbers the instance's message events.
	NextSeq   int64     `json:"nextSeq"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Version increases by one with every commit: the fence.
	Version int64 `json:"version"`
	// WorkVersion is the Version of the last commit that was not a pause
	// or a resume. A step in flight whose commit finds the version moved
	// but WorkVersion unchanged knows only the instance's status changed
	// under it: it commits again over the new version, so a pause never
	// throws a stored answer or a tool's result away (0: not known, as for
	// records written before the field existed; no such retry).
	WorkVersion int64 `json:"workVersion,omitempty"`
	// BundleRevision is the bundle revision of the instance's last step
	// (its step.config), so the first step on a new revision says so
	// (swarmBundle.revisionChanged), in a later turn too.
	BundleRevision string `json:"bundleRevision,omitempty"`
}

// TurnStatus is a turn's state.
type TurnStatus string

// Turn statuses.
const (
	TurnRunning     TurnStatus = "running"
	TurnParked      TurnStatus = "parked"
	TurnCompleted   TurnStatus = "completed"
	TurnFailed      TurnStatus = "failed"
	TurnInterrupted TurnStatus = "interrupted"
)

// Ended reports whether the status is final.
func (s TurnStatus) Ended() bool {
	return s == TurnCompleted || s == TurnFailed || s == TurnInterrupted
}

// Turn handles one input event. Origin and Auth come from it and never
// change.
type Turn struct {
	ID           string          `json:"id"`
	Instance     InstanceKey     `json:"instance"`
	InputEventID string          `json:"inputEventId"`
	InputType    string          `json:"inputType"`
	Origin       map[string]any  `json:"origin,omitempty"`
	Auth         domain.TurnAuth `json:"auth"`
	TraceID      string          `json:"traceId"`
	Status       TurnStatus      `json:"status"`
	// Steps counts started steps; Step is the one in progress (its model
	// answer stored once StepAnswered).
	Steps        int  `json:"steps"`
	StepAnswered bool `json:"stepAnswered,omitempty"`
	// BundleRevision is the revision the current step runs on (the Safe
	// Point: fixed at step.config, never changed mid-step).
	BundleRevision string `json:"bundleRevision,omitempty"`
	// Catalog is the current step's tool catalog (after step.tools), and
	// Idempotent the names in it that may run again after a crash: the
	// step's calls are checked against them, also when they resume.
	Catalog    []string `json:"catalog,omitempty"`
	Idempotent []string `json:"idempotent,omitempty"`
	// Peers are the agents the step could delegate to.
	Peers     []string    `json:"peers,omitempty"`
	Usage     model.Usage `json:"usage"`
	ToolCalls int         `json:"toolCalls"`
	Errors    int         `json:"errors"`
	// Error says why a failed turn failed (a code and a safe message).
	Error     *Failure   `json:"error,omitempty"`
	StartedAt time.Time  `json:"startedAt"`
	EndedAt   *time.Time `json:"endedAt,omitempty"`
	// NextEvent numbers the turn's events (the SSE ids).
	NextEvent int64 `json:"nextEvent"`
	// Final is the last answer's text, for the origin.
	Final string `json:"final,omitempty"`
}

// Failure is a structured, secret-free error.
type Failure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// CallState is where a tool call is: planned → started → ok | error |
// parked → resuming → ok | error.
type CallState string

// Call states.
const (
	CallPlanned  CallState = "planned"
	CallStarted  CallState = "started"
	CallOK       CallState = "ok"
	CallError    CallState = "error"
	CallParked   CallState = "parked" // waits for the user's consent
	CallResuming CallState = "resuming"
)

// Done reports whether the call's result is known (and in the history).
func (s CallState) Done() bool { return s == CallOK || s == CallError }

// Call is one tool call the model made.
type Call struct {
	// ID is the model's call id (unique within the turn).
	ID     string `json:"id"`
	TurnID string `json:"turnId"`
	Step   int    `json:"step"`
	// Index is the call's position in the model's answer: results go
	// back to the model in this order.
	Index int             `json:"index,omitempty"`
	Tool  string          `json:"tool"`
	Args  json.RawMessage `json:"args"`
	State CallState       `json:"state"`
	// Result is the tool result given to the model, once known.
	Result json.RawMessage `json:"result,omitempty"`
	// AuthSession is the consent a parked call waits for.
	AuthSession string `json:"authSession,omitempty"`
	// Starts counts runs (a resumed call runs again).
	Starts int `json:"starts"`
	// StartedAt is when the call first started, committed with its first
	// started state and kept when it runs again (after a crash, or resumed
	// after a consent), so its tool.completed / tool.failed latencyMs
	// measures from its first start, any wait included. Zero: the call
	// never started (refused before it ran), or was started by an engine
	// before the field existed.
	StartedAt time.Time `json:"startedAt,omitzero"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Key is the call's key within the instance.
func (c Call) Key() string { return c.TurnID + "/" + c.ID }

// TurnEvent is what a turn emitted, replayed to watchers by Seq. It holds
// no secret.
type TurnEvent struct {
	TurnID string          `json:"turnId"`
	Seq    int64           `json:"seq"`
	Type   string          `json:"type"`
	At     time.Time       `json:"at"`
	Data   json.RawMessage `json:"data,omitempty"`
}

// Turn event types.
const (
	EvTurnStarted      = "turn.started"
	EvStepStarted      = "step.started"
	EvStepCompleted    = "step.completed"
	EvToolCalled       = "tool.called"
	EvToolCompleted    = "tool.completed"
	EvToolFailed       = "tool.failed"
	EvTurnParked       = "turn.parked"
	EvTurnResumed      = "turn.resumed"
	EvTurnCompleted    = "turn.completed"
	EvTurnFailed       = "turn.failed"
	EvTurnInterrupted  = "turn.interrupted"
	EvStepLimitReached = "turn.stepLimitReached"
	EvMessageWarning   = "message.warning"
	// A changeset commit's outcome (swarmBundle.commitChangeset), in the
	// commit that records the call's result.
	EvChangesetCommitted = "changeset.committed"
	EvChangesetRejected  = "changeset.rejected"
	EvChangesetConflict  = "changeset.conflict"
	EvChangesetFailed    = "changeset.failed"
	// EvRevisionChanged: the step runs on another bundle revision than
	// the turn's previous step (a changeset landed).
	EvRevisionChanged = "swarmBundle.revisionChanged"
)
