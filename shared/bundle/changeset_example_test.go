package bundle_test

import (
	"fmt"

	"github.com/agentauth/agentauth/shared/bundle"
)

func ExampleSwarm_ChangesetPolicy() {
	swarm := &bundle.Swarm{Changesets: bundle.SwarmChangesets{
		Enabled:      true,
		AllowedFiles: []string{"tools/**", "prompts/*.yaml"},
	}}
	agent := &bundle.Agent{Changesets: bundle.AgentChangesets{
		Enabled:      true,
		AllowedFiles: []string{"tools/**"},
	}}
	p := swarm.ChangesetPolicy(agent)
	fmt.Println(p.Allows("tools/search/tool.yaml"))
	fmt.Println(p.Allows("prompts/system.yaml")) // the swarm allows it, the agent does not
	fmt.Println(p.Refused([]string{"tools/a.yaml", "swarm.yaml", "prompts/b.yaml"}))
	// Output:
	// true
	// false
	// [prompts/b.yaml swarm.yaml]
}
