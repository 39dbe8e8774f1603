package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/deadlettertest"
)

// ChangeMessageVisibilityBatch and GetQueueAttributes make fakeSQS a
// dead-letter queue too.
func (f *fakeSQS) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.visibilityChanges++
	if len(in.Entries) == 0 || len(in.Entries) > 10 {
		return nil, apiErr("AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "bad batch")
	}
	var out sqs.ChangeMessageVisibilityBatchOutput
	for _, e := range in.Entries {
		ok := false
		for _, m := range f.msgs {
			if m.handle != "" && m.handle == aws.ToString(e.ReceiptHandle) {
				m.visibleAt = f.now.Add(time.Duration(e.VisibilityTimeout) * time.Second)
				ok = true
			}
		}
		if ok {
			out.Successful = append(out.Successful, types.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
		} else {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid")})
		}
	}
	return &out, nil
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	visible, hidden := 0, 0
	for _, m := range f.msgs {
		if m.receives > 0 && m.visibleAt.After(f.now) {
			hidden++
		} else {
			visible++
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"ApproximateNumberOfMessages":           strconv.Itoa(visible),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(hidden),
	}}, nil
}

// bury puts e on a dead-letter queue as SQS moves it there: its body,
// group and attribute as Enqueue sent them.
func bury(t *testing.T, api interface {
	SendMessage(context.Context, *sqs.SendMessageInput, ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}, dlqURL string, e domain.Event) {
	t.Helper()
	body, err := encodeBody(e)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: aws.String(dlqURL), MessageBody: aws.String(body),
		MessageGroupId: aws.String(GroupID(e)), MessageDeduplicationId: aws.String(DeduplicationID(e.ID)),
		MessageAttributes: map[string]types.MessageAttributeValue{
			EventTypeAttribute: {DataType: aws.String("String"), StringValue: aws.String(EventType(e))},
		},
	}); err != nil {
		t.Fatal(err)
	}
}

// takeAll receives and acknowledges every event q holds now.
func takeAll(t *testing.T, q *Queue, wait time.Duration) []domain.Event {
	t.Helper()
	var out []domain.Event
	for {
		ds, err := q.Receive(context.Background(), MaxReceiveMessages, wait)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) == 0 {
			return out
		}
		for _, d := range ds {
			out = append(out, d.Event)
			if err := q.Ack(context.Background(), d); err != nil {
				t.Fatal(err)
			}
		}
	}
}

const (
	fakeMainURL = "https://sqs.us-east-1.amazonaws.com/123456789012/events.fifo"
	fakeDLQURL  = "https://sqs.us-east-1.amazonaws.com/123456789012/events-dlq.fifo"
)

func newFakeDeadLetters(t *testing.T) (*DeadLetters, *fakeSQS, *Queue) {
	t.Helper()
	mainAPI, dlqAPI := newFakeSQS(), newFakeSQS()
	main, err := New(mainAPI, fakeMainURL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	dls, err := NewDeadLetters(dlqAPI, fakeDLQURL, main)
	if err != nil {
		t.Fatal(err)
	}
	return dls, dlqAPI, main
}

func TestDeadLettersConformanceOnFake(t *testing.T) {
	deadlettertest.Run(t, func(t *testing.T) deadlettertest.Env {
		dls, dlq, main := newFakeDeadLetters(t)
		return deadlettertest.Env{
			DeadLetters: dls,
			Bury:        func(t *testing.T, e domain.Event) { bury(t, dlq, fakeDLQURL, e) },
			Queued:      func(t *testing.T) []domain.Event { return takeAll(t, main, 0) },
		}
	})
}

// TestDeadLettersHoldBriefly: a listing leaves every message visible
// again (a redrive right after finds it, the clock unmoved) and stops
// after a bounded number of receives. SQS FIFO hands out at most the
// first ten messages of a group until they are deleted: those are listed
// (the count says how many there are) and redriven; a later one of the
// group is ErrNotFound until those before it are gone.
func TestDeadLettersHoldBriefly(t *testing.T) {
	ctx := context.Background()
	dls, dlq, main := newFakeDeadLetters(t)
	var evs []domain.Event
	for range 12 {
		e := deadlettertest.Event("thread-1", "x") // one group
		evs = append(evs, e)
		bury(t, dlq, fakeDLQURL, e)
	}
	got, n, err := dls.ListDeadLetters(ctx, 30)
	if err != nil || n != 12 || len(got) != 10 {
		t.Fatalf("ListDeadLetters: %d of %d, %v; want the group's first 10 of 12", len(got), n, err)
	}
	for i, d := range got {
		if d.Event.ID != evs[i].ID {
			t.Fatalf("dead letter %d is %s, want %s (oldest first)", i, d.Event.ID, evs[i].ID)
		}
	}
	if err := dls.RedriveDeadLetter(ctx, got[9].ID); err != nil {
		t.Fatal(err)
	}
	if q := takeAll(t, main, 0); len(q) != 1 || q[0].ID != evs[9].ID {
		t.Fatalf("queued %+v", q)
	}
	// The 12th is behind ten of its group: not reachable yet.
	if err := dls.RedriveDeadLetter(ctx, "msg-0012"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("redrive of the 12th of a group: %v, want ErrNotFound", err)
	}
	if _, n, _ := dls.ListDeadLetters(ctx, 1); n != 11 {
		t.Fatalf("after one redrive the count is %d (something left hidden?)", n)
	}

	// Past what a listing reads (10 receives of 10), it lists what it read.
	for i := range 110 {
		bury(t, dlq, fakeDLQURL, deadlettertest.Event(fmt.Sprint("thread-", 100+i), "y"))
	}
	dlq.receives = nil
	got, n, err = dls.ListDeadLetters(ctx, 200)
	if err != nil || n != 121 || len(got) != 100 || len(dlq.receives) != maxReceiveCalls {
		t.Fatalf("ListDeadLetters over 121: %d listed of %d in %d receives, %v", len(got), n, len(dlq.receives), err)
	}
}

// TestRedriveSendFails: a send that fails leaves the dead letter in place
// and visible, and reports the send.
func TestRedriveSendFails(t *testing.T) {
	ctx := context.Background()
	dls, dlq, main := newFakeDeadLetters(t)
	e := deadlettertest.Event("thread-1", "x")
	bury(t, dlq, fakeDLQURL, e)
	main.api.(*fakeSQS).sendErr = func(int, *sqs.SendMessageInput) error { return apiErr("InternalError", "secret body echo") }
	got, _, _ := dls.ListDeadLetters(ctx, 1)
	err := dls.RedriveDeadLetter(ctx, got[0].ID)
	if err == nil || errors.Is(err, domain.ErrNotFound) || strings.Contains(err.Error(), "secret body echo") {
		t.Fatalf("redrive with a failing send: %v", err)
	}
	if again, n, _ := dls.ListDeadLetters(ctx, 1); n != 1 || len(again) != 1 || again[0].ID != got[0].ID {
		t.Fatalf("after a failed redrive: %+v of %d", again, n)
	}
}

func TestNewDeadLettersRefusesAStandardQueue(t *testing.T) {
	main, err := New(newFakeSQS(), fakeMainURL, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewDeadLetters(newFakeSQS(), "https://sqs.us-east-1.amazonaws.com/123456789012/events-dlq", main); err == nil {
		t.Fatal("a standard dead-letter queue was accepted")
	}
}
