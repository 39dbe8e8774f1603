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
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(os.Stderr, "agentauth: %v\n\n%s", err, ue.usage)
			os.Exit(2)
		}
		fmt.Fprintf(os.Stderr, "agentauth: %v\n", err)
		os.Exit(1)
	}
}

// usageError is a command line agentauth cannot run: main prints it and
// usage — the command's synopsis, or a list of commands — and exits 2.
type usageError struct{ msg, usage string }

func (e usageError) Error() string { return e.msg }

// run runs the command args names (commands has them all).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return dispatch(ctx, commands(), args, stdio{in: stdin, out: stdout, err: stderr})
}
