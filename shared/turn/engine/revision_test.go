package engine

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/model"
)

// movingConfig answers step.config at the revision a test sets.
type movingConfig struct {
	mu    sync.Mutex
	agent Agent
	rev   string
}

func (c *movingConfig) set(rev string) { c.mu.Lock(); c.rev = rev; c.mu.Unlock() }

func (c *movingConfig) Agent(context.Context, turn.InstanceKey) (Agent, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agent, c.rev, nil
}

// revTools records the revision each catalog was asked at, and its
// "commit" tool moves the config (as a changeset commit moves the head)
// and reports an event.
type revTools struct {
	mu   sync.Mutex
	cfg  *movingConfig
	asks []string
}

func (r *revTools) Catalog(_ context.Context, t turn.Turn) ([]Tool, error) {
	r.mu.Lock()
	r.asks = append(r.asks, t.BundleRevision)
	r.mu.Unlock()
	return []Tool{{Spec: model.ToolSpec{Name: "commit", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, nil
}

func (r *revTools) Invoke(_ context.Context, in Invocation) Outcome {
	r.cfg.set("rev-2")
	return Outcome{Kind: OutcomeOK, Result: json.RawMessage(`{"status":"ok","output":{"status":"ok","newRef":"rev-2"}}`),
		Events: []Event{{Type: turn.EvChangesetCommitted, Data: map[string]any{"callId": in.Call.ID, "newRef": "rev-2"}}}}
}

type revisionsFunc func(ctx context.Context, key turn.InstanceKey, from, to string) (json.RawMessage, bool, error)

func (f revisionsFunc) Changed(ctx context.Context, key turn.InstanceKey, from, to string) (json.RawMessage, bool, error) {
	return f(ctx, key, from, to)
}

// TestRevisionActivatesAtTheNextStep: a revision committed during step N
// is what step N+1's step.config loads, and the catalog is asked at that
// revision; the step that committed keeps its own; the first step on the
// new revision carries the swarmBundle.revisionChanged block (and event)
// once; the events a call reports are committed with its result.
func TestRevisionActivatesAtTheNextStep(t *testing.T) {
	f := newFixture(t, callTools("commit"), say("done"), say("again"))
	cfg := &movingConfig{agent: Agent{Model: f.model, SystemPrompt: "be brief", MaxSteps: 8}, rev: "rev-1"}
	tools := &revTools{cfg: cfg}
	var changes []string
	f.e.Config, f.e.Tools = cfg, tools
	f.e.Revisions = revisionsFunc(func(_ context.Context, key turn.InstanceKey, from, to string) (json.RawMessage, bool, error) {
		changes = append(changes, from+"→"+to+"@"+key.String())
		return json.RawMessage(`{"previousRef":"` + from + `","newRef":"` + to + `"}`), true, nil
	})
	f.send(t, "e1", "change yourself")
	if got := strings.Join(tools.asks, ","); got != "rev-1,rev-2" {
		t.Fatalf("the catalog was asked at %s, want rev-1,rev-2", got)
	}
	if len(changes) != 1 || !strings.HasPrefix(changes[0], "rev-1→rev-2@") {
		t.Fatalf("revision changes described: %v", changes)
	}
	reqs := f.model.calls
	blockIn := func(i int) bool {
		for _, m := range reqs[i].Messages {
			if m.ID == "blocks" && strings.Contains(m.TextOf(), `swarmBundle.revisionChanged: {"previousRef":"rev-1","newRef":"rev-2"}`) {
				return true
			}
		}
		return false
	}
	if blockIn(0) || !blockIn(1) {
		t.Fatalf("the block: step 1 %v, step 2 %v (want only step 2)", blockIn(0), blockIn(1))
	}
	st := f.state(t)
	if st.Instance.BundleRevision != "rev-2" {
		t.Fatalf("the instance's revision: %q", st.Instance.BundleRevision)
	}
	var types []string
	var stepRevs []string
	var first string
	for id := range st.Turns {
		first = id
	}
	for _, ev := range st.TurnEvents[first] {
		types = append(types, ev.Type)
		if ev.Type == turn.EvStepStarted {
			var d struct {
				BundleRevision string `json:"bundleRevision"`
			}
			_ = json.Unmarshal(ev.Data, &d)
			stepRevs = append(stepRevs, d.BundleRevision)
		}
	}
	got := strings.Join(types, " ")
	if !strings.Contains(got, "tool.completed changeset.committed") || strings.Count(got, turn.EvRevisionChanged) != 1 {
		t.Fatalf("events: %s", got)
	}
	if strings.Join(stepRevs, ",") != "rev-1,rev-2" {
		t.Fatalf("steps ran at %v", stepRevs)
	}
	// The next turn runs on rev-2 too: no block.
	f.send(t, "e2", "and now")
	if len(changes) != 1 || len(f.model.calls) != 3 {
		t.Fatalf("a later turn on the same revision: changes %v, %d model calls", changes, len(f.model.calls))
	}
	// A revision that moved between turns tells the next turn's first step.
	cfg.set("rev-3")
	f.model.script = append(f.model.script, say("noted"))
	f.send(t, "e3", "anything new?")
	if len(changes) != 2 || !strings.HasPrefix(changes[1], "rev-2→rev-3") {
		t.Fatalf("between turns: %v", changes)
	}
}
