package sqsqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/domain"
)

// SQSAPI is what the queue needs from SQS; *sqs.Client implements it.
// A producer only ever calls SendMessage; ReceiveMessage and DeleteMessage
// serve Receive and Ack. Build the client from shared/aws/awsconfig: a replayed
// SendMessage is harmless (same deduplication id), but a replayed receive
// hides a message for a visibility timeout and a replayed delete reports
// a stale receipt handle.
type SQSAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Options bound what one Enqueue may cost. Zero fields take the defaults.
type Options struct {
	// MaxAttempts is how many times the SDK's retryer may send one
	// message, the first try included. Default 4.
	MaxAttempts int
	// MaxBackoff caps the retryer's wait between attempts. Default 1s.
	MaxBackoff time.Duration
	// Timeout bounds one Enqueue, every attempt and wait included.
	// Default 5s: the callback that enqueues auth.granted has a user
	// waiting, and a failure is not lost (the OAuth core marks the event
	// pending and its sweep sends it again).
	Timeout time.Duration
	// MaxMessageBytes is the largest message (body plus attributes)
	// Enqueue sends; a larger event fails before any request. Default
	// 262144 (256 KiB), the smallest limit an SQS queue has had by
	// default; set it to the queue's MaximumMessageSize to allow more.
	MaxMessageBytes int
}

// Defaults for Options.
const (
	DefaultMaxAttempts     = 4
	DefaultMaxBackoff      = time.Second
	DefaultTimeout         = 5 * time.Second
	DefaultMaxMessageBytes = 256 << 10
)

// Receive limits set by SQS.
const (
	MaxReceiveMessages = 10
	MaxReceiveWait     = 20 * time.Second
)

// Queue is a domain.EventQueue on one SQS FIFO queue. It is safe for
// concurrent use.
type Queue struct {
	api  SQSAPI
	url  string
	name string
	opts Options
}

var _ domain.EventQueue = (*Queue)(nil)

// New returns the queue at queueURL, which must name a FIFO queue (its name
// ends in ".fifo"): per-instance ordering and deduplication exist only
// there. It makes no request.
func New(api SQSAPI, queueURL string, opts Options) (*Queue, error) {
	if api == nil {
		return nil, errors.New("sqsqueue: nil SQS client")
	}
	name, err := fifoQueueName(queueURL)
	if err != nil {
		return nil, err
	}
	if opts.MaxAttempts < 0 || opts.MaxBackoff < 0 || opts.Timeout < 0 || opts.MaxMessageBytes < 0 {
		return nil, errors.New("sqsqueue: negative Options value")
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = DefaultMaxAttempts
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxMessageBytes == 0 {
		opts.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return &Queue{api: api, url: queueURL, name: name, opts: opts}, nil
}

// fifoQueueName checks that u is an SQS queue URL whose name ends in .fifo
// and returns the name.
func fifoQueueName(u string) (string, error) {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return "", fmt.Errorf("sqsqueue: queue URL %.200q: want http(s)://host/<account>/<name>.fifo", u)
	}
	name := path.Base(p.Path)
	if !strings.HasSuffix(name, ".fifo") || name == ".fifo" {
		return "", fmt.Errorf("sqsqueue: queue URL %.200q is not a FIFO queue (its name must end in .fifo): agent events need one ordered, deduplicated message group per agent instance", u)
	}
	return name, nil
}

// Enqueue sends e to its agent instance's message group. EnqueuedAt is set
// to now when zero. Sending an ID again within SQS's five-minute
// deduplication window is accepted and delivers nothing new (see the
// package doc for what covers longer gaps). A final failure, after at most
// Options.MaxAttempts attempts within Options.Timeout, is an *Error.
func (q *Queue) Enqueue(ctx context.Context, e domain.Event) error {
	if e.ID == "" {
		return errors.New("sqsqueue: enqueue: event without an id")
	}
	dedup := DeduplicationID(e.ID)
	op := "enqueue event " + dedup + " to " + q.name
	if e.EnqueuedAt.IsZero() {
		e.EnqueuedAt = time.Now().UTC()
	}
	body, err := encodeBody(e)
	if err != nil {
		return &Error{Op: op + ": encode", Err: err}
	}
	eventType := EventType(e)
	if size := len(body) + len(EventTypeAttribute) + len("String") + len(eventType); size > q.opts.MaxMessageBytes {
		return fmt.Errorf("sqsqueue: %s: message is %d bytes, over the %d-byte limit", op, size, q.opts.MaxMessageBytes)
	}
	group := GroupID(e)
	ctx, cancel := context.WithTimeout(ctx, q.opts.Timeout)
	defer cancel()
	_, err = q.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:               aws.String(q.url),
		MessageBody:            aws.String(body),
		MessageGroupId:         aws.String(group),
		MessageDeduplicationId: aws.String(dedup),
		MessageAttributes: map[string]types.MessageAttributeValue{
			EventTypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(eventType)},
		},
	}, q.retryOptions)
	if err != nil {
		return &Error{Op: op, Err: err}
	}
	return nil
}

// retryOptions bounds the client's retryer for one SendMessage. A retried
// send carries the same deduplication id, so a first attempt that did
// arrive (its answer lost) is not queued twice.
func (q *Queue) retryOptions(o *sqs.Options) {
	r := o.Retryer
	if r == nil {
		r = retry.NewStandard()
	}
	r = retry.AddWithMaxAttempts(r, q.opts.MaxAttempts)
	o.Retryer = retry.AddWithMaxBackoffDelay(r, q.opts.MaxBackoff)
	// The client re-wraps its retryer when this differs from its own
	// setting; keep both in agreement.
	o.RetryMaxAttempts = q.opts.MaxAttempts
}

// encodeBody is the event as JSON in the character set SQS accepts:
// encoding/json already escapes control characters and replaces invalid
// UTF-8, which leaves U+FFFE and U+FFFF, the only valid runes SQS refuses.
// Escaping them inside JSON strings (the only place non-ASCII can appear)
// keeps the decoded event identical.
func encodeBody(e domain.Event) (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	b = bytes.ReplaceAll(b, []byte("\uFFFE"), []byte(`\ufffe`))
	b = bytes.ReplaceAll(b, []byte("\uFFFF"), []byte(`\uffff`))
	return string(b), nil
}

// Delivery is one received event.
type Delivery struct {
	Event domain.Event
	// ReceiptHandle acknowledges this receipt of the message (Ack).
	ReceiptHandle string
	// GroupID is the message group: the agent instance (GroupID(Event)).
	GroupID string
	// EventType is the eventType attribute the sender set.
	EventType string
	// MessageID is SQS's id of the message.
	MessageID string
	// ReceiveCount is how often SQS has handed the message out, this time
	// included; at the redrive policy's maxReceiveCount the next failed
	// receipt moves it to the dead-letter queue.
	ReceiveCount int
}

// Receive takes up to limit (1 to 10) visible messages, waiting up to wait
// (0 to 20s, rounded up to whole seconds) for the first. Within a group,
// deliveries come in send order and a group's later messages stay hidden
// while earlier ones are in flight; a consumer must Ack (or let time out)
// each one in order. Received messages stay invisible for the queue's
// VisibilityTimeout.
//
// A message whose body is not an event is left unacknowledged (it will
// reach the dead-letter queue) and reported in the error, wrapping
// domain.ErrCorrupt, next to the valid deliveries.
func (q *Queue) Receive(ctx context.Context, limit int, wait time.Duration) ([]Delivery, error) {
	if limit < 1 || limit > MaxReceiveMessages {
		return nil, fmt.Errorf("sqsqueue: receive: limit %d messages, want 1 to %d", limit, MaxReceiveMessages)
	}
	if wait < 0 || wait > MaxReceiveWait {
		return nil, fmt.Errorf("sqsqueue: receive: wait %v, want 0 to %v", wait, MaxReceiveWait)
	}
	out, err := q.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:            aws.String(q.url),
		MaxNumberOfMessages: int32(limit),
		WaitTimeSeconds:     int32((wait + time.Second - 1) / time.Second),
		MessageAttributeNames: []string{
			EventTypeAttribute,
		},
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameMessageGroupId,
			types.MessageSystemAttributeNameApproximateReceiveCount,
		},
	})
	if err != nil {
		return nil, &Error{Op: "receive from " + q.name, Err: err}
	}
	deliveries := make([]Delivery, 0, len(out.Messages))
	var bad []error
	for _, m := range out.Messages {
		d, err := decodeMessage(m)
		if err != nil {
			bad = append(bad, fmt.Errorf("sqsqueue: receive from %s: message %s: %w", q.name, awserr.Token(aws.ToString(m.MessageId)), err))
			continue
		}
		deliveries = append(deliveries, d)
	}
	return deliveries, errors.Join(bad...)
}

// DecodeBody is the event a message body holds (the wire format above),
// for every consumer: Receive, and the turn function's SQS batches. An
// error wraps domain.ErrCorrupt and holds none of the body.
func DecodeBody(body string) (domain.Event, error) {
	var e domain.Event
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.ID == "" {
		return domain.Event{}, fmt.Errorf("body is not an event: %w", domain.ErrCorrupt)
	}
	return e, nil
}

func decodeMessage(m types.Message) (Delivery, error) {
	if aws.ToString(m.ReceiptHandle) == "" {
		return Delivery{}, errors.New("no receipt handle")
	}
	e, err := DecodeBody(aws.ToString(m.Body))
	if err != nil {
		return Delivery{}, err
	}
	d := Delivery{
		Event:         e,
		ReceiptHandle: aws.ToString(m.ReceiptHandle),
		GroupID:       m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)],
		MessageID:     aws.ToString(m.MessageId),
	}
	if a, ok := m.MessageAttributes[EventTypeAttribute]; ok {
		d.EventType = aws.ToString(a.StringValue)
	}
	if n, err := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil {
		d.ReceiveCount = n
	}
	return d, nil
}

// Ack deletes a received message so it is not delivered again. Its event
// ID keeps deduplicating for the rest of the five-minute window.
func (q *Queue) Ack(ctx context.Context, d Delivery) error {
	op := "ack event " + DeduplicationID(d.Event.ID) + " on " + q.name
	if d.ReceiptHandle == "" {
		return fmt.Errorf("sqsqueue: %s: no receipt handle", op)
	}
	_, err := q.api.DeleteMessage(ctx, &sqs.DeleteMessageInput{
		QueueUrl:      aws.String(q.url),
		ReceiptHandle: aws.String(d.ReceiptHandle),
	})
	if err != nil {
		return &Error{Op: op, Err: err}
	}
	return nil
}
