package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// Handoff (the runtime model's §6): agents.delegate is a standard tool of
// every agent that has peers in its swarm. It is asynchronous: the call
// queues agent.delegate to the peer — same instance key, turn.auth
// unchanged, origin extended with where it came from — and answers at once
// {status: pending, delegationEventId}; when the peer's turn ends, the
// engine queues agent.delegationResult back, which the delegating agent
// gets as a new event.
const (
	DelegateTool            = "agents.delegate"
	EventDelegate           = "agent.delegate"
	EventDelegationResult   = "agent.delegationResult"
	originDelegatedFrom     = "delegatedFrom"
	originDelegationTurnID  = "delegationTurnId"
	originDelegationEventID = "delegationEventId"
)

// delegateTool is the built-in's catalog entry for an agent with peers.
func delegateTool(peers []string) Tool {
	schema, _ := json.Marshal(map[string]any{
		"type": "object", "additionalProperties": false, "required": []string{"agent", "input"},
		"properties": map[string]any{
			"agent": map[string]any{"type": "string", "enum": peers, "description": "the agent to hand the task to"},
			"input": map[string]any{"type": "string", "description": "the task, as a message to that agent"},
		},
	})
	return Tool{
		Spec: model.ToolSpec{Name: DelegateTool, InputSchema: schema,
			Description: "Hand a task to another agent of this swarm. It answers later: its result arrives as an agent.delegationResult message."},
		// Re-running after a crash queues the same event id: the queue
		// keeps one.
		Idempotent: true,
	}
}

// delegate runs an agents.delegate call.
func (r *run) delegate(ctx context.Context, t turn.Turn, cl turn.Call, peers []string) Outcome {
	var args struct {
		Agent string `json:"agent"`
		Input string `json:"input"`
	}
	if err := json.Unmarshal(cl.Args, &args); err != nil || args.Input == "" || !slices.Contains(peers, args.Agent) {
		return Outcome{Kind: OutcomeError, Result: errorResult("E_TOOL_INVALID_ARGS",
			fmt.Sprintf("agents.delegate needs {agent, input}: agent one of %v, input a non-empty task", peers))}
	}
	if r.e.Queue == nil {
		return Outcome{Kind: OutcomeError, Result: errorResult("E_TOOL_UNAVAILABLE", "delegation needs the event queue")}
	}
	id := "delegate:" + t.ID + ":" + cl.ID
	origin := maps.Clone(t.Origin)
	if origin == nil {
		origin = map[string]any{}
	}
	origin[originDelegatedFrom], origin[originDelegationTurnID], origin[originDelegationEventID] = r.key.Agent, t.ID, id
	input, _ := json.Marshal(map[string]string{"type": EventDelegate, "text": args.Input})
	ev := domain.Event{ID: id, SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: r.key.Swarm}, InstanceKey: r.key.Key, AgentName: args.Agent,
		Input: string(input), Origin: origin, Auth: t.Auth, Metadata: map[string]string{"eventType": EventDelegate, "traceId": t.TraceID},
		EnqueuedAt: r.e.now()}
	if err := r.e.Queue.Enqueue(ctx, ev); err != nil {
		r.e.log().WarnContext(ctx, "delegation not queued", "turnId", t.ID, "traceId", t.TraceID, "err", err)
		return Outcome{Kind: OutcomeError, Result: errorResult("E_TOOL_UNAVAILABLE", "the delegation could not be queued; try again")}
	}
	out, _ := json.Marshal(map[string]any{"status": "pending", "output": map[string]string{"delegationEventId": id, "agent": args.Agent}})
	return Outcome{Kind: OutcomeOK, Result: out}
}

// refuseDelegation answers an agent.delegate that reached a terminated
// instance: the delegating agent gets its agent.delegationResult at once,
// status interrupted, instead of waiting for ever. Its id is the one a
// turn's result would have, so a redelivery queues it once.
func (r *run) refuseDelegation(ctx context.Context, ev domain.Event) error {
	t := turn.Turn{ID: turnID(ev.ID), InputType: EventDelegate, Origin: ev.Origin, Auth: ev.Auth, TraceID: traceID(ev)}
	return r.returnDelegation(ctx, t, turn.TurnInterrupted, &turn.Failure{Code: "terminated",
		Message: fmt.Sprintf("agent %s's instance is terminated: the task was not run", r.key.Agent)})
}

// returnDelegation queues the delegated turn's result to the agent that
// handed the task over, before the turn's end is committed (its id is
// stable, so a retried end queues it once).
func (r *run) returnDelegation(ctx context.Context, t turn.Turn, status turn.TurnStatus, f *turn.Failure) error {
	from, _ := t.Origin[originDelegatedFrom].(string)
	if t.InputType != EventDelegate || from == "" || r.e.Queue == nil {
		return nil
	}
	result := map[string]any{"type": EventDelegationResult, "agent": r.key.Agent, "status": status, "answer": t.Final,
		originDelegationTurnID: t.Origin[originDelegationTurnID], originDelegationEventID: t.Origin[originDelegationEventID]}
	if f != nil {
		result["error"] = f
	}
	input, _ := json.Marshal(result)
	origin := maps.Clone(t.Origin)
	delete(origin, originDelegatedFrom)
	delete(origin, originDelegationTurnID)
	delete(origin, originDelegationEventID)
	return r.e.Queue.Enqueue(ctx, domain.Event{
		ID: "delegation-result:" + t.ID, SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: r.key.Swarm}, InstanceKey: r.key.Key, AgentName: from,
		Input: string(input), Origin: origin, Auth: t.Auth, Metadata: map[string]string{"eventType": EventDelegationResult, "traceId": t.TraceID},
		EnqueuedAt: r.e.now(),
	})
}
