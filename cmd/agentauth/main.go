// Command agentauth runs agentauth on a laptop — every route in one process
// on the embedded backends (filesystem store, local AES keyring, file
// queue) — and carries the admin commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

const usage = `agentauth — the auth and tool plane for AI agents (local server and admin)

Usage:
  agentauth serve [--bundle DIR] [--home DIR] [--addr HOST:PORT] [--public-url URL]
  agentauth runtime-token [--home DIR]        print the local runtime token (created once)
  agentauth grants list [--home DIR]          grants without secrets
  agentauth events list [--home DIR]          queued events (auth.granted)
  agentauth sessions cleanup [--bundle DIR] [--home DIR]
  agentauth keys rotate [--home DIR]          new master key, every record resealed
  agentauth keys reseal [--home DIR]          reseal every record under the current key
  agentauth keys generate                     print a new key for GOONDAN_OAUTH_KEY
  agentauth keys rewrap --to-key KMS_KEY      AWS: move every grant to another KMS key
                                              (reads AGENTAUTH_TABLE, AGENTAUTH_KMS_KEY_ID, …)
  agentauth bench [--url URL] [--token T] [--duration D] [--concurrency N]
  agentauth scripted-model [--addr 127.0.0.1:9292]
                                              the demo's scripted model server (NOT a
                                              language model: a fixed script, for make run)

Agent instances, over the running server's HTTP API (--url, default
http://127.0.0.1:8080, with the home's runtime token):
  agentauth send --swarm S --instance K [--agent A] [--user ID] "text"
                                              post a user's message; prints the event id
  agentauth instances list [--swarm S] [--instance K] [--agent A]
  agentauth instances inspect|pause|resume|delete --swarm S --instance K --agent A
  agentauth instances terminate --swarm S --instance K --agent A [--reason R]
                                              delete keeps the instance's OAuth grants

Home defaults to $AGENTAUTH_HOME or ./.agentauth; the bundle to
$AGENTAUTH_BUNDLE or ./examples/bundle. See README.md.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "agentauth: %v\n\n%s", err, usage)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "agentauth: %v\n", err)
		os.Exit(1)
	}
}

type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{"no command"}
	}
	cmd, rest := args[0], args[1:]
	sub := ""
	if len(rest) > 0 && len(rest[0]) > 0 && rest[0][0] != '-' {
		sub = rest[0]
	}
	switch {
	case cmd == "serve":
		return cmdServe(ctx, rest, stdout, stderr)
	case cmd == "runtime-token":
		return cmdRuntimeToken(rest, stdout)
	case cmd == "grants" && sub == "list":
		return cmdGrantsList(ctx, rest[1:], stdout)
	case cmd == "events" && sub == "list":
		return cmdEventsList(ctx, rest[1:], stdout)
	case cmd == "sessions" && sub == "cleanup":
		return cmdSessionsCleanup(ctx, rest[1:], stdout, stderr)
	case cmd == "keys" && sub == "rotate":
		return cmdKeysRotate(ctx, rest[1:], stdout)
	case cmd == "keys" && sub == "reseal":
		return cmdKeysReseal(ctx, rest[1:], stdout)
	case cmd == "keys" && sub == "rewrap":
		return cmdKeysRewrap(ctx, rest[1:], stdout)
	case cmd == "keys" && sub == "generate":
		return cmdKeysGenerate(stdout)
	case cmd == "send":
		return cmdSend(ctx, rest, stdout, stderr)
	case cmd == "instances" && slices.Contains([]string{"list", "inspect", "pause", "resume", "terminate", "delete"}, sub):
		return cmdInstances(ctx, sub, rest[1:], stdout)
	case cmd == "bench":
		return cmdBench(ctx, rest, stdout)
	case cmd == "scripted-model":
		return cmdScriptedModel(ctx, rest, stdout, stderr)
	case cmd == "help" || cmd == "-h" || cmd == "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q", joinArgs(args))}
}

func joinArgs(a []string) string {
	if len(a) > 2 {
		a = a[:2]
	}
	s := ""
	for i, x := range a {
		if i > 0 {
			s += " "
		}
		s += x
	}
	return s
}
