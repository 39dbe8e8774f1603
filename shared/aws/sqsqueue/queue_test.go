package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/smithy-go"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

const fakeURL = "https://sqs.us-east-1.amazonaws.com/000000000000/agent-events.fifo"

func newFakeQueue(t *testing.T, opts Options) (*Queue, *fakeSQS) {
	t.Helper()
	f := newFakeSQS()
	q, err := New(f, fakeURL, opts)
	if err != nil {
		t.Fatal(err)
	}
	return q, f
}

func TestSuiteOnFake(t *testing.T) {
	runSQSSuite(t, suiteEnv{
		newQueue: func(t *testing.T) *Queue { q, _ := newFakeQueue(t, Options{}); return q },
	})
}

func TestNew(t *testing.T) {
	f := newFakeSQS()
	tests := []struct {
		name string
		api  SQSAPI
		url  string
		opts Options
		want string // error substring; "" for success
	}{
		{"fifo", f, fakeURL, Options{}, ""},
		{"emulator", f, "http://127.0.0.1:4566/000000000000/x.fifo", Options{}, ""},
		{"standard queue", f, "https://sqs.us-east-1.amazonaws.com/000000000000/agent-events", Options{}, "not a FIFO queue"},
		{"fifo in the path only", f, "https://sqs.us-east-1.amazonaws.com/a.fifo/agent-events", Options{}, "not a FIFO queue"},
		{"bare suffix", f, "https://sqs.us-east-1.amazonaws.com/000000000000/.fifo", Options{}, "not a FIFO queue"},
		{"not a URL", f, "agent-events.fifo", Options{}, "want http(s)://"},
		{"empty", f, "", Options{}, "want http(s)://"},
		{"nil client", nil, fakeURL, Options{}, "nil SQS client"},
		{"negative attempts", f, fakeURL, Options{MaxAttempts: -1}, "negative"},
		{"negative timeout", f, fakeURL, Options{Timeout: -time.Second}, "negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, err := New(tc.api, tc.url, tc.opts)
			if tc.want == "" {
				if err != nil || q == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	q, _ := newFakeQueue(t, Options{})
	want := Options{MaxAttempts: DefaultMaxAttempts, MaxBackoff: DefaultMaxBackoff, Timeout: DefaultTimeout, MaxMessageBytes: DefaultMaxMessageBytes}
	if q.opts != want {
		t.Fatalf("defaults %+v", q.opts)
	}
}

func TestEnqueueWire(t *testing.T) {
	q, f := newFakeQueue(t, Options{MaxAttempts: 7, MaxBackoff: 3 * time.Second})
	e := storetest.SampleEvent(storetest.NewSessionID())
	before := time.Now()
	if err := q.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	sends := f.sent()
	if len(sends) != 1 {
		t.Fatalf("%d sends", len(sends))
	}
	in := sends[0]
	if aws.ToString(in.QueueUrl) != fakeURL {
		t.Fatalf("QueueUrl %q", aws.ToString(in.QueueUrl))
	}
	if got := aws.ToString(in.MessageGroupId); got != "Swarm/default/1700000000.000100/planner" {
		t.Fatalf("MessageGroupId %q", got)
	}
	if got := aws.ToString(in.MessageDeduplicationId); got != e.ID {
		t.Fatalf("MessageDeduplicationId %q, want the session id %q", got, e.ID)
	}
	a := in.MessageAttributes[EventTypeAttribute]
	if len(in.MessageAttributes) != 1 || aws.ToString(a.DataType) != "String" || aws.ToString(a.StringValue) != "auth.granted" {
		t.Fatalf("MessageAttributes %+v", in.MessageAttributes)
	}
	var got domain.Event
	if err := json.Unmarshal([]byte(aws.ToString(in.MessageBody)), &got); err != nil {
		t.Fatal(err)
	}
	if got.EnqueuedAt.Before(before.Add(-time.Second)) || got.EnqueuedAt.Location() != time.UTC {
		t.Fatalf("EnqueuedAt %v not stamped", got.EnqueuedAt)
	}
	got.EnqueuedAt = time.Time{}
	if !reflect.DeepEqual(got, e) {
		t.Fatalf("body is not the event\n got: %#v\nwant: %#v", got, e)
	}
	// The SDK retryer is bounded per call.
	o := f.sendOpts[0]
	if o.Retryer == nil || o.Retryer.MaxAttempts() != 7 || o.RetryMaxAttempts != 7 {
		t.Fatalf("retryer max attempts: %v / %d", o.Retryer, o.RetryMaxAttempts)
	}
}

func TestEnqueueRejectsBeforeSending(t *testing.T) {
	q, f := newFakeQueue(t, Options{MaxMessageBytes: 4096})
	big := storetest.SampleEvent("as-big")
	big.Input = "user text " + strings.Repeat("z", 5000)
	tests := []struct {
		name string
		e    domain.Event
		want string
	}{
		{"no id", domain.Event{Input: "x"}, "event without an id"},
		{"too large", big, "over the 4096-byte limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := q.Enqueue(context.Background(), tc.e)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Enqueue: %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "user text") {
				t.Fatalf("error holds the body: %v", err)
			}
		})
	}
	if n := len(f.sent()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
}

func TestEnqueueErrorsNeverHoldTheBody(t *testing.T) {
	e := storetest.SampleEvent("as-0123456789abcdef0123456789abcdef")
	e.Input = "please wire 100 EUR to IBAN DE00 1234"
	tests := []struct {
		name     string
		err      func(body string) error
		wantText []string
		code     string
	}{
		{
			"api error echoing the body",
			func(body string) error { return apiErr("InvalidParameterValue", "bad message: "+body) },
			[]string{"api error InvalidParameterValue", "as-0123456789abcdef0123456789abcdef", "agent-events.fifo"},
			"InvalidParameterValue",
		},
		{
			"plain error echoing the body",
			func(body string) error { return errors.New("weird: " + body) },
			[]string{"failed (*errors.errorString)"},
			"",
		},
		{
			"network error",
			func(string) error {
				return &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
			},
			[]string{"dial tcp: connection refused"},
			"",
		},
		{
			"timeout",
			func(string) error { return context.DeadlineExceeded },
			[]string{"timed out"},
			"",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q, f := newFakeQueue(t, Options{})
			f.sendErr = func(_ int, in *sqs.SendMessageInput) error { return tc.err(aws.ToString(in.MessageBody)) }
			err := q.Enqueue(context.Background(), e)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			for _, leak := range []string{e.Input, "IBAN", "slack:user", "slack-main", `"input"`} {
				if strings.Contains(msg, leak) {
					t.Fatalf("error %q holds %q from the body", msg, leak)
				}
			}
			for _, w := range tc.wantText {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q lacks %q", msg, w)
				}
			}
			var qe *Error
			if !errors.As(err, &qe) || qe.Code() != tc.code {
				t.Fatalf("*Error with code %q: %#v", tc.code, err)
			}
			if tc.code != "" {
				var api smithy.APIError
				if !errors.As(err, &api) {
					t.Fatal("the API error is not reachable with errors.As")
				}
			}
		})
	}
}

func TestReceiveAndAck(t *testing.T) {
	ctx := context.Background()
	q, f := newFakeQueue(t, Options{})
	e := storetest.SampleEvent("as-1")
	mustEnqueue(t, q, e)

	ds, err := q.Receive(ctx, 10, 1500*time.Millisecond)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Receive: %d, %v", len(ds), err)
	}
	in := f.receives[0]
	if in.WaitTimeSeconds != 2 || in.MaxNumberOfMessages != 10 || !reflect.DeepEqual(in.MessageAttributeNames, []string{EventTypeAttribute}) {
		t.Fatalf("ReceiveMessage input %+v", in)
	}
	if ds[0].EventType != "auth.granted" || ds[0].GroupID != GroupID(e) || ds[0].ReceiveCount != 1 {
		t.Fatalf("delivery %+v", ds[0])
	}

	// Not acknowledged: back after the visibility timeout, counted again.
	f.advance(31 * time.Second)
	again, err := q.Receive(ctx, 10, 0)
	if err != nil || len(again) != 1 || again[0].ReceiveCount != 2 || again[0].Event.ID != e.ID {
		t.Fatalf("redelivery: %+v, %v", again, err)
	}
	// The first receipt handle no longer acknowledges.
	if err := q.Ack(ctx, ds[0]); err == nil || !strings.Contains(err.Error(), "ReceiptHandleIsInvalid") {
		t.Fatalf("stale ack: %v", err)
	}
	if err := q.Ack(ctx, again[0]); err != nil {
		t.Fatal(err)
	}
	if err := q.Ack(ctx, Delivery{}); err == nil {
		t.Fatal("ack without a receipt handle")
	}
	f.advance(time.Hour)
	if rest, _ := q.Receive(ctx, 10, 0); len(rest) != 0 {
		t.Fatalf("acknowledged message came back: %v", ids(rest))
	}
}

func TestReceiveLimits(t *testing.T) {
	q, f := newFakeQueue(t, Options{})
	for _, tc := range []struct {
		limit int
		wait  time.Duration
	}{{0, 0}, {11, 0}, {1, -time.Second}, {1, 21 * time.Second}} {
		if _, err := q.Receive(context.Background(), tc.limit, tc.wait); err == nil {
			t.Fatalf("Receive(%d, %v) accepted", tc.limit, tc.wait)
		}
	}
	if len(f.receives) != 0 {
		t.Fatal("invalid receive reached SQS")
	}
}

func TestReceiveCorruptMessage(t *testing.T) {
	ctx := context.Background()
	q, f := newFakeQueue(t, Options{})
	f.inject("other/group", "not json: secret-ish user text")
	good := storetest.SampleEvent("as-good")
	mustEnqueue(t, q, good)
	ds, err := q.Receive(ctx, 10, 0)
	if !errors.Is(err, domain.ErrCorrupt) || strings.Contains(err.Error(), "user text") {
		t.Fatalf("error %v, want ErrCorrupt without the body", err)
	}
	if len(ds) != 1 || ds[0].Event.ID != good.ID {
		t.Fatalf("valid deliveries %v", ids(ds))
	}
}

func TestEnqueueDedupBySessionID(t *testing.T) {
	// Two callbacks for one session (a replay) make one message; the fake
	// models SQS's window, so after five minutes it would queue again —
	// which the OAuth core's single-use session prevents upstream.
	ctx := context.Background()
	q, f := newFakeQueue(t, Options{})
	e := storetest.SampleEvent("as-0123456789abcdef0123456789abcdef")
	mustEnqueue(t, q, e)
	f.advance(4 * time.Minute)
	mustEnqueue(t, q, e)
	ds, _ := drain(ctx, q, 0)
	if len(ds) != 1 {
		t.Fatalf("delivered %d", len(ds))
	}
	sends := f.sent()
	if len(sends) != 2 || aws.ToString(sends[0].MessageDeduplicationId) != aws.ToString(sends[1].MessageDeduplicationId) {
		t.Fatal("the two sends carry different deduplication ids")
	}
}
