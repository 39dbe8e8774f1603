package bundlerepo

import (
	"context"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/testkit/changesettest"
)

const protectModel = `apiVersion: agents.example.io/v1alpha1
kind: Model
metadata: {name: m}
spec: {provider: openai, model: m, endpoint: "http://127.0.0.1:1/v1"}
`

const protectAgent = `apiVersion: agents.example.io/v1alpha1
kind: Agent
metadata: {name: assistant}
spec: {modelRef: Model/m, systemPrompt: be brief, tools: {selectors: [{source: seed}]}, changesets: {allowed: {files: ["tools/**"]}}}
`

const protectPolicy = `apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: everyone}
spec: {claimMatchers: [{claim: sub, operator: exists}], allowedGroupIds: [seed]}
`

// TestProtectedResources: whatever allowed.files says, a changeset may
// not change a file that defines an AccessPolicy, a Model, an OAuthApp, a
// Connector or a Swarm (before or after), nor an Agent's changesets
// policy; it may change the rest of an Agent (its prompt) and tools.
func TestProtectedResources(t *testing.T) {
	ctx := context.Background()
	repo, recs := emptyRepo(t)
	load := func(files []bundle.File) (*bundle.Bundle, error) {
		return bundle.Parse(files, bundle.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	}
	m := &changeset.Manager{Repo: repo, Records: recs, Load: load}
	seed := append(changesettest.Seed(),
		changeset.ImportFile{Path: "model.yaml", Data: []byte(protectModel)},
		changeset.ImportFile{Path: "agent.yaml", Data: []byte(protectAgent)},
		changeset.ImportFile{Path: "policy.yaml", Data: []byte(protectPolicy)})
	if _, err := m.Import(ctx, seed, "seed"); err != nil {
		t.Fatal(err)
	}
	c := changeset.Caller{Owner: changeset.Owner{Swarm: "s", Instance: "i", Agent: "assistant"}, Policy: changesettest.Everyone}
	for _, tc := range []struct {
		name, path, data string
		code             string // "" lands
	}{
		{"an access policy widened", "policy.yaml", strings.Replace(protectPolicy, "allowedGroupIds: [seed]", "allowedGroupIds: [seed, all]", 1) +
			"---\napiVersion: agents.example.io/v1alpha1\nkind: ToolGroup\nmetadata: {name: all}\nspec: {selectors: [{source: \"*\"}]}\n", "E_PROTECTED_RESOURCE"},
		{"a new access policy in a new file", "tools/policy.yaml", strings.Replace(protectPolicy, "everyone", "mine", 1), "E_PROTECTED_RESOURCE"},
		{"the model's endpoint", "model.yaml", strings.Replace(protectModel, "127.0.0.1:1", "127.0.0.1:2", 1), "E_PROTECTED_RESOURCE"},
		{"the agent's own changesets policy", "agent.yaml", strings.Replace(protectAgent, `["tools/**"]`, `["**"]`, 1), "E_PROTECTED_RESOURCE"},
		{"the agent's prompt", "agent.yaml", strings.Replace(protectAgent, "be brief", "be thorough", 1), ""},
		{"a tool", "tools/gamma.yaml", changesettest.Tool("gamma"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := repo.Head(ctx)
			o, err := m.Open(ctx, c)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.WriteFile(ctx, c, o.ChangesetID, tc.path, []byte(tc.data)); err != nil {
				t.Fatal(err)
			}
			res, err := m.Commit(ctx, c, o.ChangesetID, tc.name)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := repo.Head(ctx)
			if tc.code == "" {
				if res.Status != changeset.StatusOK {
					t.Fatalf("%+v %+v", res, res.Error)
				}
				return
			}
			if res.Status != changeset.StatusRejected || res.Error.Code != tc.code || res.Error.ViolatedFiles[0] != tc.path || after != before {
				t.Fatalf("%+v %+v", res, res.Error)
			}
		})
	}
}
