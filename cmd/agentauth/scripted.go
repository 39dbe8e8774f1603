package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentauth/agentauth/shared/observe/logging"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// cmdScriptedModel serves the scripted model: an HTTP server that speaks
// OpenAI chat completions and Bedrock Converse and answers from the fixed
// script called name. It is not a language model; `make run` starts it
// (the demo script) so the example Agent runs with no model account, and
// the end-to-end tests (the self-change script) to drive agents changing
// their bundle. Point the bundle's Model at a real endpoint to use one.
func cmdScriptedModel(ctx context.Context, addr, name string, stdout, stderr io.Writer) error {
	script, err := scripted.Named(name)
	if err != nil {
		return usageError{msg: "scripted-model: --script: " + err.Error()}
	}
	fmt.Fprintf(stderr, "scripted model (not a language model; script %s) listening on http://%s/v1 (chat completions) and /model/{id}/converse\n", name, addr)
	return scripted.Serve(ctx, addr, script, logging.New(stdout, slog.LevelInfo))
}
