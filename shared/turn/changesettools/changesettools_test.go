package changesettools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/turn"
)

const policyBundle = `apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: m}
spec: {provider: openai, model: m, endpoint: "http://127.0.0.1:1/v1"}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: on}
spec: {modelRef: Model/m}
---
apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: off}
spec: {modelRef: Model/m, changesets: {enabled: false}}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: open}
spec: {agents: [Agent/on, Agent/off], entrypoint: Agent/on, policy: {changesets: {enabled: true}}}
---
apiVersion: agents.example.io/v1alpha1
kind: Swarm
metadata: {name: closed}
spec: {agents: [Agent/on], entrypoint: Agent/on}
`

// TestOfferedByPolicy: the tools are offered only where the swarm and the
// agent enable changesets, at the revision the turn's step loaded; each
// has a compiled schema; the names are those docs/changesets.md lists.
func TestOfferedByPolicy(t *testing.T) {
	b, err := bundle.Parse([]bundle.File{{Name: "b.yaml", Data: []byte(policyBundle)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var asked []string
	x := &Tools{Bundles: func(_ context.Context, rev string) (*bundle.Bundle, error) { asked = append(asked, rev); return b, nil }}
	for _, tc := range []struct {
		swarm, agent string
		want         int
	}{{"open", "on", 6}, {"open", "off", 0}, {"closed", "on", 0}, {"missing", "on", 0}} {
		tr := turn.Turn{ID: "t1", Instance: turn.InstanceKey{Swarm: tc.swarm, Key: "k", Agent: tc.agent}, BundleRevision: "git:abc"}
		got, err := x.For(context.Background(), tr)
		if err != nil || len(got) != tc.want {
			t.Fatalf("%s/%s: %d tools, %v; want %d", tc.swarm, tc.agent, len(got), err, tc.want)
		}
		for _, bt := range got {
			if bt.Schema == nil || bt.Run == nil || len(bt.Spec.InputSchema) == 0 {
				t.Fatalf("%s is incomplete", bt.Spec.Name)
			}
		}
	}
	if len(asked) != 4 || asked[0] != "git:abc" {
		t.Fatalf("the bundle was asked at %v, want the turn's revision", asked)
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "changesets.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{Open, Read, Write, List, Delete, Commit} {
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/changesets.md's table lacks %s", name)
		}
	}
}
