package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentauth/agentauth/shared/observe/logging"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
)

// cmdScriptedModel serves the demo's scripted model: an HTTP server that
// speaks OpenAI chat completions and Bedrock Converse and answers from a
// fixed script. It is not a language model; `make run` starts it so the
// example Agent runs with no model account. Point the bundle's Model at a
// real endpoint to use one.
func cmdScriptedModel(ctx context.Context, addr string, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "scripted model (not a language model) listening on http://%s/v1 (chat completions) and /model/{id}/converse\n", addr)
	return scripted.Serve(ctx, addr, scripted.DemoScript(), logging.New(stdout, slog.LevelInfo))
}
