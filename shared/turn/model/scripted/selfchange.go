package scripted

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The changeset tools SelfChangeScript calls (docs/changesets.md).
const (
	toolOpen   = "swarmBundle.openChangeset"
	toolWrite  = "swarmBundle.writeFile"
	toolCommit = "swarmBundle.commitChangeset"
)

// SelfChangeTool is the file SelfChangeScript writes: a Tool named by the
// user's tool=NAME (default gamma) in source source=SOURCE (default demo),
// described by description=WORD, native, taking an object.
const SelfChangeTool = `apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata:
  name: {{user.tool|gamma}}
spec:
  id: "{{user.source|demo}}:{{user.tool|gamma}}"
  name: {{user.tool|gamma}}
  description: {{user.description|a tool the agent added to itself}}
  inputSchema: {type: object}
  sourceId: {{user.source|demo}}
  transport: native
`

// SelfChangeScript is an agent that changes its own bundle through the
// changeset tools — the script of the end-to-end proof of changesets; the
// scripted model (not a language model) follows it word for word. The
// user's message says what to do; KEY=VALUE words in it fill the file:
//
//   - "change yourself" opens a changeset, writes the file (file=PATH,
//     default tools/NAME.yaml) holding SelfChangeTool, commits it and
//     answers "committed git:<sha>", or "not committed: <code>" ("not
//     written: …", "not opened: …" when an earlier call was refused).
//   - "prepare a change" opens and writes the same way but does not
//     commit: it answers "prepared <changesetId>".
//   - "commit changeset=ID" commits changeset ID (the same answers).
//   - A commit that answers conflict writes the file again, whole, and
//     commits again: the user's version wins the conflicting lines.
//   - "what tools" answers with the names of the tools it was offered.
func SelfChangeScript() Script {
	write := func(path string) []ToolCall {
		args, _ := json.Marshal(map[string]string{"changesetId": "{{result.changesetId}}", "path": path, "content": SelfChangeTool})
		return []ToolCall{{Name: toolWrite, Args: args}}
	}
	commit := func(id string) []ToolCall {
		return []ToolCall{{Name: toolCommit, Args: json.RawMessage(`{"changesetId":"` + id + `","message":"add the {{user.tool|gamma}} tool"}`)}}
	}
	const (
		named   = "{{user.file}}"
		derived = "tools/{{user.tool|gamma}}.yaml"
	)
	return Script{Turns: []Turn{
		// What a commit answered.
		{ToolResult: toolCommit, ResultHas: "newRef", Text: "committed {{result.newRef}}"},
		{ToolResult: toolCommit, ResultHas: "conflictingFiles", UserContains: "file=", ToolCalls: write(named)},
		{ToolResult: toolCommit, ResultHas: "conflictingFiles", ToolCalls: write(derived)},
		{ToolResult: toolCommit, Text: "not committed: {{result.code}}"},
		// What a write answered.
		{ToolResult: toolWrite, ResultHas: "written", UserContains: "prepare a change", Text: "prepared {{result.changesetId}}"},
		{ToolResult: toolWrite, ResultHas: "written", ToolCalls: commit("{{result.changesetId}}")},
		{ToolResult: toolWrite, Text: "not written: {{result.code}}"},
		// What opening answered.
		{ToolResult: toolOpen, ResultHas: "changesetId", UserContains: "file=", ToolCalls: write(named)},
		{ToolResult: toolOpen, ResultHas: "changesetId", ToolCalls: write(derived)},
		{ToolResult: toolOpen, Text: "not opened: {{result.code}}"},
		// What the user said.
		{UserContains: "change yourself", ToolCalls: []ToolCall{{Name: toolOpen}}},
		{UserContains: "prepare a change", ToolCalls: []ToolCall{{Name: toolOpen}}},
		{UserContains: "commit changeset=", ToolCalls: commit("{{user.changeset}}")},
		{UserContains: "what tools", Text: "I am offered: {{tools}}. (This answer comes from the scripted model, not a language model.)"},
	}}
}

// ScriptNames are the scripts Named knows, the default first.
func ScriptNames() []string { return []string{"demo", "self-change"} }

// Named returns the script called name: "demo" (DemoScript) or
// "self-change" (SelfChangeScript).
func Named(name string) (Script, error) {
	switch name {
	case "demo":
		return DemoScript(), nil
	case "self-change":
		return SelfChangeScript(), nil
	}
	return Script{}, fmt.Errorf("scripted model: no script %q (the scripts: %s)", name, strings.Join(ScriptNames(), ", "))
}
