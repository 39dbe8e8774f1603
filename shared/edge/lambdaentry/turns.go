package lambdaentry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentauth/agentauth/shared/aws/sqsqueue"
	"github.com/agentauth/agentauth/shared/domain"
)

// sqsBatch runs one SQS FIFO batch of agent events through the turn
// engine (the turn function; its event source mapping has
// ReportBatchItemFailures on).
//
// One message group is one agent instance. Groups run in parallel, at
// most parallel at once; a group's records run one after another, in the
// batch's order. When a record fails — the engine's error, a body that is
// not an event, a panic, or too little time left to start it — it and
// every later record of its group are reported as failures, so SQS hands
// them out again in the same order; the other groups' records are done.
// A record the engine already handled is a no-op when it comes back (the
// engine records every event id it processed in the same commit).
type sqsBatch struct {
	handle func(ctx context.Context, ev domain.Event) error
	log    *slog.Logger
	// parallel bounds the groups run at once (default 8).
	parallel int
	// minLeft is the time a record needs to be started at all (default
	// 3 s): with less, it is left to the next delivery. The engine hands a
	// long turn over on its own (AGENTAUTH_TURN_RESERVE_SECONDS).
	minLeft time.Duration
}

// groupOf is a record's message group; a record without one (a standard
// queue) is a group of its own.
func groupOf(m events.SQSMessage) string {
	if g := m.Attributes["MessageGroupId"]; g != "" {
		return g
	}
	return "\x00" + m.MessageId
}

// run handles the batch and names the records to hand out again.
func (b sqsBatch) run(ctx context.Context, in events.SQSEvent) events.SQSEventResponse {
	start := time.Now()
	parallel, minLeft := b.parallel, b.minLeft
	if parallel <= 0 {
		parallel = 8
	}
	if minLeft <= 0 {
		minLeft = 3 * time.Second
	}
	groups := map[string][]int{}
	var order []string
	for i, m := range in.Records {
		g := groupOf(m)
		if _, ok := groups[g]; !ok {
			order = append(order, g)
		}
		groups[g] = append(groups[g], i)
	}
	failed := make([]bool, len(in.Records))
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, g := range order {
		slots <- struct{}{}
		wg.Add(1)
		go func(idx []int) {
			defer wg.Done()
			defer func() { <-slots }()
			for n, i := range idx {
				if err := b.record(ctx, in.Records[i], minLeft); err != nil {
					b.log.ErrorContext(ctx, "turn event failed; it and the later events of its instance go back to the queue",
						"messageId", in.Records[i].MessageId, "returned", len(idx)-n, "err", err)
					for _, j := range idx[n:] {
						failed[j] = true // each index is written by its group's goroutine only
					}
					return
				}
			}
		}(groups[g])
	}
	wg.Wait()
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for i, f := range failed {
		if f {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: in.Records[i].MessageId})
		}
	}
	b.log.InfoContext(ctx, "turn batch", "records", len(in.Records), "instances", len(order),
		"returned", len(resp.BatchItemFailures), "ms", time.Since(start).Milliseconds())
	return resp
}

// errNoTime: too little of the invocation is left to start a record.
var errNoTime = errors.New("too little time left in this invocation to start the event")

// record handles one message; a panic is its failure, not the batch's.
func (b sqsBatch) record(ctx context.Context, m events.SQSMessage, minLeft time.Duration) (err error) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < minLeft {
		return errNoTime
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	ev, err := sqsqueue.DecodeBody(m.Body)
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			// The panic value is not logged: it could quote event content.
			err = fmt.Errorf("event %s: the turn engine panicked", ev.ID)
		}
	}()
	return b.handle(ctx, ev)
}
