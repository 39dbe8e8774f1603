package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/engine"
)

// twoSwarms are two teams' swarms that share the demo's Agent (and so its
// name) and, in the test, an instance key.
const twoSwarms = `apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: victim}
spec: {agents: [Agent/assistant], entrypoint: Agent/assistant}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: other}
spec: {agents: [Agent/assistant], entrypoint: Agent/assistant}
`

// TestPendingBlockStaysInItsSwarm is issue 17's attack, end to end on
// serve's turn plane: the victim team's turn parks on its global-mode
// consent; then a user of swarm "other", chatting under the same instance
// key with an Agent of the same name, runs a step. That step's model
// input must not hold the victim's consent link (before the fix it did,
// in auth.pending, and the user completed it with their own account, so
// that the victim's grant and parked turn became theirs); each instance's
// auth.pending lists its own consent only.
func TestPendingBlockStaysInItsSwarm(t *testing.T) {
	r := newConsentRig(t, twoSwarms)
	e := r.app.Turns.Engine
	var mu sync.Mutex
	inputs := map[string][]string{} // swarm → the model input of each step, as JSON
	e.Hooks.LLMInput = append(e.Hooks.LLMInput, func(_ context.Context, sc *engine.StepContext) error {
		b, err := json.Marshal(sc.Messages)
		mu.Lock()
		defer mu.Unlock()
		inputs[sc.Key.Swarm] = append(inputs[sc.Key.Swarm], string(b))
		return err
	})
	w := r.worker()
	ctx := context.Background()
	const thread = "C0123-thread"
	park := func(swarm string, n int) string {
		t.Helper()
		auth := domain.TurnAuth{Claims: map[string]any{"sub": fmt.Sprintf("user-%d", n)}, Subjects: &domain.Subjects{Global: fmt.Sprintf("demo:team:T%d", n)}}
		if _, err := r.app.Turns.Post(ctx, swarm, thread, Incoming{Text: "who am I?", Auth: auth}); err != nil {
			t.Fatal(err)
		}
		if err := w.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		return receive(t, r.parked, swarm+"'s turn.parked")
	}
	victimLink := park("victim", 1)
	otherLink := park("other", 2)
	if victimLink == otherLink {
		t.Fatal("the two teams got one consent link")
	}

	mu.Lock()
	otherInputs := inputs["other"]
	mu.Unlock()
	if len(otherInputs) == 0 {
		t.Fatal("no step of swarm other reached the model")
	}
	for i, in := range otherInputs {
		if strings.Contains(in, victimLink) || strings.Contains(in, jsonEscaped(victimLink)) {
			t.Fatalf("step %d of swarm other sent the model the victim's consent link:\n%s", i+1, in)
		}
	}

	// What the next step of each instance would be given.
	for swarm, own := range map[string]string{"victim": victimLink, "other": otherLink} {
		block, err := e.Pending.PendingBlock(ctx, turn.InstanceKey{Swarm: swarm, Key: thread, Agent: "assistant"})
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			Type  string `json:"type"`
			Items []struct {
				AuthorizationURL string `json:"authorizationUrl"`
			} `json:"items"`
		}
		if err := json.Unmarshal(block, &b); err != nil {
			t.Fatal(err)
		}
		if b.Type != "auth.pending" || len(b.Items) != 1 || b.Items[0].AuthorizationURL != own {
			t.Fatalf("swarm %s's auth.pending %s, want its own link only", swarm, block)
		}
	}
}

// jsonEscaped is s as json.Marshal writes it inside a string (&, < and >
// escaped).
func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
