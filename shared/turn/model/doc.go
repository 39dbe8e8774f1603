// Package model is the turn engine's port to language models: one Call
// from a provider-neutral request (turn/message messages, tool specs) to a
// response (messages, finish reason, token usage), with the tool names
// mapped to the providers' alphabet and back. Adapters live below it
// (model/bedrock: Bedrock Converse; model/openai: OpenAI-compatible chat
// completions); tests and the demo use model/scripted, a scripted model
// server — never a model.
//
// It must never log or return a credential, and never retry a 4xx other
// than 429.
package model
