package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
)

// deadLetterCommands list and redrive the events that failed every
// delivery attempt, on the home or on the AWS deployment the environment
// names — through the port the console uses, not the HTTP API.
func deadLetterCommands() []command {
	return []command{
		{name: "instances dead-letters", env: true,
			summary: "list the events that failed every delivery attempt, oldest first: id, when, instance, attempts, error",
			about: `Locally they are the turn worker's, in <home>/worker/deadletter; with AGENTAUTH_TABLE set,
				the events queue's dead-letter queue (AGENTAUTH_DEAD_LETTER_QUEUE_URL), where SQS keeps no
				error or attempt count and the total is its estimate. Redrive one with agentauth instances
				redrive ID.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				homeFlag(fs, cfg)
				asJSON := fs.Bool("json", false, "print JSON lines (the whole event) instead of a table")
				n := fs.Int("n", 20, "`N` list at most N dead letters (1-1000)")
				return func(ctx context.Context, std stdio, _ []string) error {
					if *n < 1 || *n > 1000 {
						return usageError{msg: fmt.Sprintf("instances dead-letters: -n %d: want 1 to 1000", *n)}
					}
					dls, err := openDeadLetters(ctx, *cfg)
					if err != nil {
						return fmt.Errorf("instances dead-letters: %w", err)
					}
					return listDeadLetters(ctx, dls, *n, *asJSON, std)
				}
			}},
		{name: "instances redrive", env: true, args: "ID", argsAbout: "the dead letter's id, as instances dead-letters prints it",
			summary: "queue a dead letter's event again, then remove the dead letter",
			about: `The event keeps its id: an instance that did handle it skips it. A dead letter another
				operator redrove meanwhile is not found, and nothing is queued twice.`,
			bind: func(fs *flag.FlagSet, cfg *config.Config) action {
				homeFlag(fs, cfg)
				return func(ctx context.Context, std stdio, args []string) error {
					dls, err := openDeadLetters(ctx, *cfg)
					if err != nil {
						return fmt.Errorf("instances redrive: %w", err)
					}
					return redriveDeadLetter(ctx, dls, args[0], std)
				}
			}},
	}
}

// openDeadLetters opens the dead letters of the AWS deployment when
// AGENTAUTH_TABLE is set, else the home's.
func openDeadLetters(ctx context.Context, cfg config.Config) (domain.DeadLetters, error) {
	if cfg.AWS != nil {
		b, err := app.OpenAWS(ctx, *cfg.AWS, nil)
		if err != nil {
			return nil, err
		}
		if b.DeadLetters == nil {
			return nil, fmt.Errorf("no dead-letter queue: set %s to the events queue's dead-letter queue", config.DeadLetterQueueURL)
		}
		return b.DeadLetters, nil
	}
	h, err := openHome(ctx, cfg, false)
	if err != nil {
		return nil, err
	}
	return h.DeadLetters, nil
}

// deadLetterView is a dead letter as --json prints it.
type deadLetterView struct {
	ID       string       `json:"id"`
	At       time.Time    `json:"at"`
	Attempts int          `json:"attempts,omitempty"`
	Error    string       `json:"error,omitempty"`
	Event    domain.Event `json:"event"`
}

// listDeadLetters prints up to n dead letters as a table (or JSON lines)
// and, on stderr, how many there are.
func listDeadLetters(ctx context.Context, dls domain.DeadLetters, n int, asJSON bool, std stdio) error {
	list, total, err := dls.ListDeadLetters(ctx, n)
	if err != nil {
		return fmt.Errorf("instances dead-letters: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(std.out)
		for _, d := range list {
			if err := enc.Encode(deadLetterView{ID: d.ID, At: d.At, Attempts: d.Attempts, Error: d.Error, Event: d.Event}); err != nil {
				return err
			}
		}
	} else if len(list) > 0 {
		tw := tabwriter.NewWriter(std.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tDEAD-LETTERED\tINSTANCE\tEVENT\tATTEMPTS\tERROR")
		for _, d := range list {
			attempts := "?"
			if d.Attempts > 0 {
				attempts = fmt.Sprint(d.Attempts)
			}
			instance := "-"
			if d.Event.ID != "" {
				instance = d.Event.SwarmRef.Name + "/" + d.Event.InstanceKey + "/" + d.Event.AgentName
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, fmtTime(&d.At), instance, orDash(d.Event.ID), attempts, orDash(oneLine(d.Error, 120)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	switch {
	case total == 0:
		fmt.Fprintln(std.err, "no dead letters")
	case len(list) < total:
		fmt.Fprintf(std.err, "%d of %d dead letters, oldest first (-n shows more)\n", len(list), total)
	default:
		fmt.Fprintf(std.err, "%d dead letters, oldest first\n", total)
	}
	return nil
}

// oneLine is s on one line, cut to at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// redriveDeadLetter redrives the dead letter id and says so.
func redriveDeadLetter(ctx context.Context, dls domain.DeadLetters, id string, std stdio) error {
	err := dls.RedriveDeadLetter(ctx, id)
	switch {
	case errors.Is(err, domain.ErrInvalidID):
		return usageError{msg: fmt.Sprintf("instances redrive: %q is no dead letter id: copy it from agentauth instances dead-letters", id)}
	case errors.Is(err, domain.ErrNotFound):
		return fmt.Errorf("instances redrive: no dead letter %s (redriven already? agentauth instances dead-letters lists them)", id)
	case err != nil:
		return fmt.Errorf("instances redrive: %w", err)
	}
	fmt.Fprintf(std.out, "redriven %s: its event is queued again\n", id)
	return nil
}
