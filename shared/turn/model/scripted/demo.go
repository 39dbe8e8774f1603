package scripted

import "encoding/json"

// DemoAddr is where `make run` starts the scripted model.
const DemoAddr = "127.0.0.1:9292"

// DemoScript is the walkthrough's script: any user message calls the
// whoami tool; its result is answered with a sentence naming the user, or,
// when the result names nobody (the consent expired, the tool failed),
// with a sentence saying so rather than calling whoami again.
func DemoScript() Script {
	return Script{Turns: []Turn{
		{ToolResult: "whoami", ResultHas: "name", Text: "You are {{result.name}} — the whoami tool says so. (This answer comes from the scripted model, not a language model.)"},
		{ToolResult: "whoami", Text: "The whoami tool did not tell me who you are. (This answer comes from the scripted model, not a language model.)"},
		{ToolCalls: []ToolCall{{Name: "whoami", Args: json.RawMessage(`{}`)}}},
	}}
}
