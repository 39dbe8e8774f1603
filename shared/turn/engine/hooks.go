package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// StepContext is what the pipeline's hooks see and may change in one
// step. It is pinned to one bundle revision (Revision) for the whole step.
type StepContext struct {
	Key      turn.InstanceKey
	Turn     turn.Turn
	Step     int
	Agent    Agent
	Revision string
	// Tools is the step's catalog (step.tools may narrow it).
	Tools []Tool
	// Blocks are the context blocks (step.blocks adds them).
	Blocks []Block
	// Messages are what the model will be sent (step.llmInput may edit
	// them; the stored conversation is not changed).
	Messages []message.Message
	// Response is the model's answer (step.post reads it).
	Response *model.Response
	// RevisionChanged is the swarmBundle.revisionChanged block's data
	// when this step runs on another bundle revision than the instance's
	// previous step (nil otherwise).
	RevisionChanged json.RawMessage
}

// Block is a context block given to the model (auth.pending, …).
type Block struct {
	Type string
	Data json.RawMessage
}

// Mutator changes the step's context at a pipeline point.
type Mutator func(ctx context.Context, sc *StepContext) error

// LLMCall is the model call; ToolCall a tool call.
type (
	LLMCall  func(ctx context.Context, req model.Request) (model.Response, error)
	ToolCall func(ctx context.Context, in Invocation) Outcome
)

// Hooks are the pipeline's extension points (the runtime model's step.*
// and toolCall.*). Mutators run in registration order; middleware is
// onion-style: the first registered is the outermost layer. The order is
// deterministic.
type Hooks struct {
	StepPre    []Mutator
	StepTools  []Mutator
	StepBlocks []Mutator
	LLMInput   []Mutator
	StepPost   []Mutator
	// LLMCallMiddleware wraps step.llmCall; ToolExecMiddleware wraps
	// toolCall.exec.
	LLMCallMiddleware  []func(next LLMCall) LLMCall
	ToolExecMiddleware []func(next ToolCall) ToolCall
}

func (h Hooks) run(ctx context.Context, ms []Mutator, sc *StepContext) error {
	for i, m := range ms {
		if err := m(ctx, sc); err != nil {
			return fmt.Errorf("hook %d: %w", i, err)
		}
	}
	return nil
}

func (h Hooks) wrapLLM(call LLMCall) LLMCall {
	for i := len(h.LLMCallMiddleware) - 1; i >= 0; i-- {
		call = h.LLMCallMiddleware[i](call)
	}
	return call
}

func (h Hooks) wrapTool(call ToolCall) ToolCall {
	for i := len(h.ToolExecMiddleware) - 1; i >= 0; i-- {
		call = h.ToolExecMiddleware[i](call)
	}
	return call
}
