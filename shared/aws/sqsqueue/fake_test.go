package sqsqueue

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// fakeSQS is a hand-written SQS FIFO queue: SQS's input validation for
// FIFO sends, five-minute deduplication by MessageDeduplicationId (also
// after a delete), message groups delivered in order with a group hidden
// while one of its messages is in flight, visibility timeouts and receive
// counts. Time is a field the test moves.
type fakeSQS struct {
	mu         sync.Mutex
	now        time.Time
	visibility time.Duration
	msgs       []*fakeMessage
	dedup      map[string]time.Time // deduplication id → accepted at
	nextID     int

	sends    []*sqs.SendMessageInput
	sendOpts []sqs.Options
	// sendErr, when set, answers the n-th SendMessage call (from 1)
	// instead of the queue when it returns an error.
	sendErr  func(n int, in *sqs.SendMessageInput) error
	receives []*sqs.ReceiveMessageInput
	// visibilityChanges counts ChangeMessageVisibilityBatch calls.
	visibilityChanges int
}

type fakeMessage struct {
	id, body, group, handle string
	attrs                   map[string]types.MessageAttributeValue
	visibleAt               time.Time
	receives                int
	seq                     int // the FIFO sequence number
	sentAt, firstReceivedAt time.Time
}

func newFakeSQS() *fakeSQS {
	return &fakeSQS{
		now:        time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		visibility: 30 * time.Second,
		dedup:      map[string]time.Time{},
	}
}

func (f *fakeSQS) advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
}

func apiErr(code, msg string) error {
	return &smithy.GenericAPIError{Code: code, Message: msg, Fault: smithy.FaultClient}
}

// validFifoID is SQS's rule for MessageGroupId and MessageDeduplicationId.
func validFifoID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := range len(s) {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

// validSQSText is SQS's character rule for bodies and attribute values:
// #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF.
func validSQSText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var o sqs.Options
	for _, fn := range optFns {
		fn(&o)
	}
	cp := *in
	f.sends = append(f.sends, &cp)
	f.sendOpts = append(f.sendOpts, o)
	if f.sendErr != nil {
		if err := f.sendErr(len(f.sends), in); err != nil {
			return nil, err
		}
	}
	body := aws.ToString(in.MessageBody)
	switch {
	case !strings.HasSuffix(aws.ToString(in.QueueUrl), ".fifo"):
		return nil, apiErr("AWS.SimpleQueueService.NonExistentQueue", "queue does not exist")
	case body == "":
		return nil, apiErr("MissingParameter", "The request must contain the parameter MessageBody.")
	case !validSQSText(body):
		return nil, apiErr("InvalidMessageContents", "Invalid characters found.")
	case !validFifoID(aws.ToString(in.MessageGroupId)):
		return nil, apiErr("InvalidParameterValue", "Value for parameter MessageGroupId is invalid.")
	case !validFifoID(aws.ToString(in.MessageDeduplicationId)):
		return nil, apiErr("InvalidParameterValue", "Value for parameter MessageDeduplicationId is invalid.")
	case in.DelaySeconds != 0:
		return nil, apiErr("InvalidParameterValue", "DelaySeconds is not valid for this queue type.")
	}
	for name, a := range in.MessageAttributes {
		if aws.ToString(a.DataType) != "String" || aws.ToString(a.StringValue) == "" || !validSQSText(aws.ToString(a.StringValue)) {
			return nil, apiErr("InvalidParameterValue", "Message attribute "+name+" is invalid.")
		}
	}
	dedup := aws.ToString(in.MessageDeduplicationId)
	f.nextID++
	id := fmt.Sprintf("msg-%04d", f.nextID)
	if at, ok := f.dedup[dedup]; ok && f.now.Sub(at) < 5*time.Minute {
		// Accepted and dropped, as SQS does.
		return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
	}
	f.dedup[dedup] = f.now
	f.msgs = append(f.msgs, &fakeMessage{
		id: id, body: body, group: aws.ToString(in.MessageGroupId),
		attrs: in.MessageAttributes, visibleAt: f.now, seq: f.nextID, sentAt: f.now,
	})
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

// inject adds a raw message, as another producer might.
func (f *fakeSQS) inject(group, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	f.msgs = append(f.msgs, &fakeMessage{id: fmt.Sprintf("msg-%04d", f.nextID), body: body, group: group, visibleAt: f.now})
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := *in
	f.receives = append(f.receives, &cp)
	if in.MaxNumberOfMessages < 1 || in.MaxNumberOfMessages > 10 || in.WaitTimeSeconds < 0 || in.WaitTimeSeconds > 20 {
		return nil, apiErr("InvalidParameterValue", "bad receive parameters")
	}
	inFlight := map[string]bool{}
	for _, m := range f.msgs {
		if m.receives > 0 && m.visibleAt.After(f.now) {
			inFlight[m.group] = true
		}
	}
	// Like SQS, a batch may hold several messages of one group, in order,
	// but nothing of a group that has a message in flight.
	var out sqs.ReceiveMessageOutput
	for _, m := range f.msgs {
		if len(out.Messages) == int(in.MaxNumberOfMessages) {
			break
		}
		if inFlight[m.group] {
			continue
		}
		m.receives++
		if m.receives == 1 {
			m.firstReceivedAt = f.now
		}
		m.visibleAt = f.now.Add(f.visibility)
		if in.VisibilityTimeout > 0 {
			m.visibleAt = f.now.Add(time.Duration(in.VisibilityTimeout) * time.Second)
		}
		f.nextID++
		m.handle = fmt.Sprintf("handle-%04d", f.nextID)
		msg := types.Message{
			MessageId:     aws.String(m.id),
			ReceiptHandle: aws.String(m.handle),
			Body:          aws.String(m.body),
			Attributes: map[string]string{
				"MessageGroupId":                   m.group,
				"ApproximateReceiveCount":          strconv.Itoa(m.receives),
				"SequenceNumber":                   fmt.Sprintf("%020d", m.seq),
				"SentTimestamp":                    strconv.FormatInt(m.sentAt.UnixMilli(), 10),
				"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceivedAt.UnixMilli(), 10),
			},
		}
		if a, ok := m.attrs[EventTypeAttribute]; ok && slices.Contains(in.MessageAttributeNames, EventTypeAttribute) {
			msg.MessageAttributes = map[string]types.MessageAttributeValue{EventTypeAttribute: a}
		}
		out.Messages = append(out.Messages, msg)
	}
	return &out, nil
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, m := range f.msgs {
		if m.handle != "" && m.handle == aws.ToString(in.ReceiptHandle) {
			f.msgs = append(f.msgs[:i], f.msgs[i+1:]...)
			return &sqs.DeleteMessageOutput{}, nil
		}
	}
	return nil, apiErr("ReceiptHandleIsInvalid", "The input receipt handle is invalid.")
}

func (f *fakeSQS) sent() []*sqs.SendMessageInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*sqs.SendMessageInput(nil), f.sends...)
}
