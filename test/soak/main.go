// Command soak runs `agentauth serve` under a steady mixed load on
// loopback for a set time and watches it for leaks: every interval it
// prints the server's CPU, RSS, threads, goroutines and heap in use (from
// serve's --debug-addr /debug/vars), open files, the files under its home
// and p50/p99 per route; at the end, and again after an idle period with
// no load, it prints each metric's least-squares slope per hour and the
// idle levels against the pre-load baseline, and exits 1 when a slope is
// not flat within its bound or an idle level did not come back — after
// printing, from /debug/pprof, the stacks that gained goroutines and the
// sites that hold the heap, so that a failure says where.
//
// It starts everything it needs on 127.0.0.1: the server on a fresh
// temporary home with the soak bundle and short retention windows (5 min
// by default, so that the files it keeps by design level off within an
// hour's run), a JWKS issuer for the tool routes' JWTs, the scripted model
// (a fixed script, not a language model), an upstream for the http tools
// and a fake OAuth provider whose consents it completes for half the
// subjects and leaves pending for the rest.
//
// `make soak` builds and runs it (SOAK_DURATION=2m, SOAK_ARGS=…); see
// README.md, Performance. It must never listen on or call anything but
// loopback, and never run without a bound on time and on request counts.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	var verdict verdictError
	switch {
	case err == nil:
	case errors.As(err, &verdict):
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(1)
	default:
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(2)
	}
}
