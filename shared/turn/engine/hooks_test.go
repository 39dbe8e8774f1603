package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/turn/model"
)

// TestPipelineOrder: the points run in the runtime model's order,
// mutators in registration order, middleware as an onion (the first
// registered outermost).
func TestPipelineOrder(t *testing.T) {
	f := newFixture(t, callTools("echo"), say("done"))
	var trace []string
	mark := func(s string) Mutator {
		return func(context.Context, *StepContext) error { trace = append(trace, s); return nil }
	}
	llm := func(name string) func(LLMCall) LLMCall {
		return func(next LLMCall) LLMCall {
			return func(ctx context.Context, req model.Request) (model.Response, error) {
				trace = append(trace, name+">")
				resp, err := next(ctx, req)
				trace = append(trace, "<"+name)
				return resp, err
			}
		}
	}
	tool := func(name string) func(ToolCall) ToolCall {
		return func(next ToolCall) ToolCall {
			return func(ctx context.Context, in Invocation) Outcome {
				trace = append(trace, name+">")
				out := next(ctx, in)
				trace = append(trace, "<"+name)
				return out
			}
		}
	}
	f.e.Hooks = Hooks{
		StepPre:            []Mutator{mark("pre1"), mark("pre2")},
		StepTools:          []Mutator{mark("tools")},
		StepBlocks:         []Mutator{mark("blocks")},
		LLMInput:           []Mutator{mark("input1"), mark("input2")},
		StepPost:           []Mutator{mark("post")},
		LLMCallMiddleware:  []func(LLMCall) LLMCall{llm("outer"), llm("inner")},
		ToolExecMiddleware: []func(ToolCall) ToolCall{tool("t1"), tool("t2")},
	}
	f.send(t, "ev-1", "go")
	got := strings.Join(trace, " ")
	want := "pre1 pre2 tools blocks input1 input2 outer> inner> <inner <outer t1> t2> <t2 <t1 post " +
		"pre1 pre2 tools blocks input1 input2 outer> inner> <inner <outer post"
	if got != want {
		t.Fatalf("order\n got %s\nwant %s", got, want)
	}
}

// TestCatalogIsWhatTheModelSees: the step's catalog (after step.tools
// narrowed it) is the only tool list the model gets, and a call outside
// it goes to the tool plane with that catalog (which refuses it).
func TestCatalogIsWhatTheModelSees(t *testing.T) {
	f := newFixture(t, callTools("lookup"), say("done"))
	var seen []string
	f.e.Hooks.StepTools = []Mutator{func(_ context.Context, sc *StepContext) error {
		sc.Tools = sc.Tools[:1] // only echo
		return nil
	}}
	f.e.Hooks.ToolExecMiddleware = []func(ToolCall) ToolCall{func(next ToolCall) ToolCall {
		return func(ctx context.Context, in Invocation) Outcome { seen = in.Catalog; return next(ctx, in) }
	}}
	f.send(t, "ev-1", "go")
	if tools := f.model.calls[0].Tools; len(tools) != 1 || tools[0].Name != "echo" {
		t.Fatalf("the model saw %+v", tools)
	}
	if strings.Join(seen, ",") != "echo" {
		t.Fatalf("the call was checked against %v, not the step's catalog", seen)
	}
}
