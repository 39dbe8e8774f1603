package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/domain"
)

// DeadLetterAPI is what DeadLetters needs of SQS on the dead-letter
// queue; *sqs.Client implements it.
type DeadLetterAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// What reading the dead-letter queue may cost. SQS has no way to look at
// a message without receiving it, and a received message is hidden for
// the visibility timeout; so a listing holds what it read for a short
// time only and then makes it visible again at once, and both a listing
// and a search for one message stop after a bounded number of receives.
const (
	// maxReceiveCalls bounds the receives of one listing or one search
	// (at most 10 messages each): past 100 dead letters a listing shows
	// the oldest of the first 100 it reads, and a redrive may not find an
	// id (ErrNotFound; the console lists again).
	maxReceiveCalls = 10
	// listHold is how long a listing hides what it read, should making it
	// visible again fail: long enough for the receives of one listing.
	listHold = 10 * time.Second
	// redriveHold is how long a redrive hides the message it found, from
	// the receive until its delete: a send and a delete.
	redriveHold = 30 * time.Second
	// receiveWait is each receive's long poll: SQS answers at once when it
	// has messages, and a short poll may miss some that it has.
	receiveWait = 1
	// restoreTimeout bounds making messages visible again, which runs
	// even when the caller's context has ended.
	restoreTimeout = 5 * time.Second
)

// DeadLetters is domain.DeadLetters over the events queue's dead-letter
// queue (a FIFO queue: SQS moves a message there after the redrive
// policy's maxReceiveCount). A dead letter's id is the SQS message id. A
// redrive sends the event to the events queue as Enqueue does — its
// instance's message group, its id as deduplication id — and then deletes
// it from the dead-letter queue. It is safe for concurrent use.
type DeadLetters struct {
	api  DeadLetterAPI
	url  string
	name string
	main *Queue
}

var _ domain.DeadLetters = (*DeadLetters)(nil)

// NewDeadLetters returns the dead letters of the FIFO queue at dlqURL,
// redriven to main. It makes no request.
func NewDeadLetters(api DeadLetterAPI, dlqURL string, main *Queue) (*DeadLetters, error) {
	if api == nil {
		return nil, errors.New("sqsqueue: dead letters: nil SQS client")
	}
	if main == nil {
		return nil, errors.New("sqsqueue: dead letters: nil events queue")
	}
	name, err := fifoQueueName(dlqURL)
	if err != nil {
		return nil, err
	}
	return &DeadLetters{api: api, url: dlqURL, name: name, main: main}, nil
}

// received is one message read from the dead-letter queue.
type received struct {
	id, handle string
	msg        types.Message
}

// receive reads up to 10 messages, hiding them for hold.
func (d *DeadLetters) receive(ctx context.Context, hold time.Duration) ([]received, error) {
	out, err := d.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:              aws.String(d.url),
		MaxNumberOfMessages:   MaxReceiveMessages,
		WaitTimeSeconds:       receiveWait,
		VisibilityTimeout:     int32(hold / time.Second),
		MessageAttributeNames: []string{EventTypeAttribute},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameSequenceNumber,
			types.MessageSystemAttributeNameSentTimestamp,
			types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp,
		},
	})
	if err != nil {
		return nil, &Error{Op: "receive from " + d.name, Err: err}
	}
	rs := make([]received, 0, len(out.Messages))
	for _, m := range out.Messages {
		id, handle := aws.ToString(m.MessageId), aws.ToString(m.ReceiptHandle)
		if id == "" || handle == "" {
			continue
		}
		rs = append(rs, received{id: id, handle: handle, msg: m})
	}
	return rs, nil
}

// restore makes messages visible again (best effort: what it misses
// shows again when its hold ends), in batches of 10.
func (d *DeadLetters) restore(ctx context.Context, rs []received) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
	defer cancel()
	for batch := range slices.Chunk(rs, MaxReceiveMessages) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(batch))
		for i, r := range batch {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.handle), VisibilityTimeout: 0}
		}
		_, _ = d.api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(d.url), Entries: entries})
	}
}

// count is the queue's approximate number of messages, those in flight
// included: on a dead-letter queue only a listing or a redrive holds one,
// and briefly.
func (d *DeadLetters) count(ctx context.Context) (int, error) {
	out, err := d.api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(d.url),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
		},
	})
	if err != nil {
		return 0, &Error{Op: "count the messages of " + d.name, Err: err}
	}
	n := 0
	for _, a := range []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible} {
		v, _ := strconv.Atoi(out.Attributes[string(a)])
		n += max(v, 0)
	}
	return n, nil
}

// ListDeadLetters reads the dead-letter queue — at most maxReceiveCalls
// receives, stopping at the first that finds nothing new — and returns
// the limit oldest of what it read (by the queue's sequence numbers: the
// order they were dead-lettered), with ApproximateNumberOfMessages (plus
// those in flight) as the count. SQS FIFO hands out at most the first ten
// messages of a message group (one instance) until they are deleted, so
// a listing shows those, and a later one of the group shows (and can be
// redriven) once those before it are gone. What it read is visible again when it
// returns. Error is "": SQS keeps no reason; Attempts 0: the receive
// count of the events queue is not kept either. At is when the message
// was first received from the dead-letter queue (SentTimestamp until
// then).
func (d *DeadLetters) ListDeadLetters(ctx context.Context, limit int) ([]domain.DeadLetter, int, error) {
	total, err := d.count(ctx)
	if err != nil || limit <= 0 {
		return nil, total, err
	}
	var all []received
	seen := map[string]int{} // message id → index in all
	defer func() { d.restore(ctx, all) }()
	for range maxReceiveCalls {
		rs, err := d.receive(ctx, listHold)
		if err != nil {
			return nil, 0, err
		}
		fresh := 0
		for _, r := range rs {
			if i, ok := seen[r.id]; ok {
				all[i].handle = r.handle // its hold lapsed and it came again
				continue
			}
			seen[r.id] = len(all)
			all = append(all, r)
			fresh++
		}
		if fresh == 0 {
			break
		}
	}
	sorted := slices.Clone(all)
	slices.SortStableFunc(sorted, func(a, b received) int { return compareSequence(sequenceOf(a.msg), sequenceOf(b.msg)) })
	out := make([]domain.DeadLetter, 0, min(limit, len(sorted)))
	for _, r := range sorted {
		if len(out) == limit {
			break
		}
		if domain.ValidateDeadLetterID(r.id) != nil {
			continue // not an id the port can name; SQS's are UUIDs
		}
		dl := domain.DeadLetter{ID: r.id, At: receivedAt(r.msg)}
		if e, err := DecodeBody(aws.ToString(r.msg.Body)); err != nil {
			dl.Error = "unreadable message: " + err.Error()
		} else {
			dl.Event = e
		}
		out = append(out, dl)
	}
	return out, max(total, len(all)), nil
}

func sequenceOf(m types.Message) string {
	return m.Attributes[string(types.MessageSystemAttributeNameSequenceNumber)]
}

// compareSequence orders FIFO sequence numbers (decimal strings of up to
// 128 bits): shorter is smaller, then by digits. A message without one
// comes last.
func compareSequence(a, b string) int {
	switch {
	case a == "" || b == "":
		return strings.Compare(b, a)
	case len(a) != len(b):
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// receivedAt is ApproximateFirstReceiveTimestamp, else SentTimestamp
// (epoch milliseconds), else zero.
func receivedAt(m types.Message) time.Time {
	for _, a := range []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateFirstReceiveTimestamp, types.MessageSystemAttributeNameSentTimestamp} {
		if ms, err := strconv.ParseInt(m.Attributes[string(a)], 10, 64); err == nil && ms > 0 {
			return time.UnixMilli(ms).UTC()
		}
	}
	return time.Time{}
}

// RedriveDeadLetter finds the message id on the dead-letter queue (at
// most maxReceiveCalls receives; what else it reads is visible again when
// it returns), sends its event to the events queue (Enqueue: the
// instance's group, the event id as deduplication id, so two redrives of
// one message within SQS's five minutes queue it once) and deletes it.
// ErrNotFound when the search does not find it: redriven meanwhile, held
// by another redrive, or past what the search reads. A failed send leaves
// the message where it was, visible again.
func (d *DeadLetters) RedriveDeadLetter(ctx context.Context, id string) error {
	if err := domain.ValidateDeadLetterID(id); err != nil {
		return fmt.Errorf("sqsqueue: redrive: %w", err)
	}
	var others []received
	defer func() { d.restore(ctx, others) }()
	var found *received
	for calls := 0; calls < maxReceiveCalls && found == nil; calls++ {
		rs, err := d.receive(ctx, redriveHold)
		if err != nil {
			return err
		}
		if len(rs) == 0 {
			break
		}
		for _, r := range rs {
			if r.id == id && found == nil {
				found = &r
				continue
			}
			others = append(others, r)
		}
	}
	op := "redrive message " + awserr.Token(id) + " from " + d.name
	if found == nil {
		return fmt.Errorf("sqsqueue: %s: %w", op, domain.ErrNotFound)
	}
	e, err := DecodeBody(aws.ToString(found.msg.Body))
	if err != nil {
		others = append(others, *found)
		return fmt.Errorf("sqsqueue: %s: %w", op, err)
	}
	if err := d.main.Enqueue(ctx, e); err != nil {
		others = append(others, *found)
		return fmt.Errorf("sqsqueue: %s: %w", op, err)
	}
	_, err = d.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.url), ReceiptHandle: aws.String(found.handle)})
	if err != nil {
		// The event is queued. A delete refused for its receipt handle
		// means another redrive took the message meanwhile (its hold
		// lapsed): that one deleted it or will.
		if code := awserr.Code(err); code == "ReceiptHandleIsInvalid" || code == "InvalidParameterValue" {
			return nil
		}
		return &Error{Op: op + ": event queued, dead letter not deleted", Err: err}
	}
	return nil
}
