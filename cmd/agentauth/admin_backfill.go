package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/config"
)

// backfillEvery is how often the backfill prints its progress.
const backfillEvery = 5 * time.Second

// adminCommands upgrade the AWS deployment the environment names
// (docs/deploy.md).
func adminCommands() []command {
	return []command{
		{name: "admin backfill-list-index", env: true,
			summary: "AWS: give the grants, sessions and instances written before the list indexes their list attributes, so that the console lists them",
			about: `Run it once after the deploy that adds the list indexes (docs/deploy.md, "Upgrading a stack: the
				list indexes"), with the functions' variables: AGENTAUTH_TABLE, AGENTAUTH_KMS_KEY_ID,
				AGENTAUTH_QUEUE_URL, AGENTAUTH_SESSION_KEYS_SECRET, and AGENTAUTH_TURN_BUCKET when the stack has
				one. It scans the table once and updates each item that lacks them, on condition that nothing
				wrote it meanwhile (an item written since has them already); it changes nothing else. A progress
				line goes to stderr every 5 seconds. It prints how many items it set and the key of each item it
				could not read, and exits 1 when there is one. Running it again is safe: what is set is skipped.

				A local home needs none of this: the home's list index is built by serve itself.`,
			bind: func(_ *flag.FlagSet, cfg *config.Config) action {
				return func(ctx context.Context, std stdio, _ []string) error {
					if cfg.AWS == nil {
						return fmt.Errorf("admin backfill-list-index: %s is not set: the home's list index is built by serve itself; this command is for the AWS table (run it with the functions' variables: %s, %s, %s, %s)",
							config.Table, config.Table, config.KMSKeyID, config.QueueURL, config.SessionKeysSecret)
					}
					be, err := app.OpenAWS(ctx, *cfg.AWS, nil)
					if err != nil {
						return fmt.Errorf("admin backfill-list-index: %w", err)
					}
					var blobs dynamostore.Blobs
					if be.Blobs != nil { // a nil *s3blobs.Store would be a non-nil Blobs
						blobs = be.Blobs
					}
					return backfillListIndex(ctx, be.Store, blobs, backfillEvery, std)
				}
			}},
	}
}

// listBackfiller is what the command needs of the table's store.
type listBackfiller interface {
	BackfillListIndexProgress(ctx context.Context, blobs dynamostore.Blobs, progress func(dynamostore.BackfillProgress)) (int, []error, error)
}

var _ listBackfiller = (*dynamostore.Store)(nil)

// backfillListIndex runs the backfill on b, printing its progress to
// std.err every interval, then the count set and the keys of the items it
// could not read to std.out; an error when there was one.
func backfillListIndex(ctx context.Context, b listBackfiller, blobs dynamostore.Blobs, every time.Duration, std stdio) error {
	var (
		mu   sync.Mutex
		last dynamostore.BackfillProgress
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				mu.Lock()
				p := last
				mu.Unlock()
				fmt.Fprintf(std.err, "backfill-list-index: %d items examined, %d set, %d unreadable so far\n", p.Examined, p.Set, len(p.Unreadable))
			}
		}
	}()
	n, bad, err := b.BackfillListIndexProgress(ctx, blobs, func(p dynamostore.BackfillProgress) {
		mu.Lock()
		last = p
		mu.Unlock()
	})
	close(stop)
	<-done
	mu.Lock()
	p := last
	mu.Unlock()
	if err != nil {
		return fmt.Errorf("admin backfill-list-index: stopped after %d items examined, %d set: %w (run it again to finish: the items set are skipped)", p.Examined, n, err)
	}
	printBackfill(std.out, p.Examined, n, p.Unreadable)
	if len(bad) > 0 {
		return fmt.Errorf("admin backfill-list-index: %d %s could not be read, and the console does not list %s (keys above)",
			len(bad), plural(len(bad), "item", "items"), plural(len(bad), "it", "them"))
	}
	return nil
}

func printBackfill(w io.Writer, examined, set int, unreadable []string) {
	fmt.Fprintf(w, "set the list attributes on %d %s (%d examined)\n", set, plural(set, "item", "items"), examined)
	for _, k := range unreadable {
		fmt.Fprintf(w, "unreadable: %s\n", k)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
