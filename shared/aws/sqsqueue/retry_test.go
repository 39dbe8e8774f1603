package sqsqueue

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// These tests drive a real *sqs.Client against an httptest server, so the
// SDK's own retryer, not a stand-in, is what the Options bound.

type sqsServer struct {
	mu     sync.Mutex
	bodies []map[string]any
	// answer writes the response to request n (from 1).
	answer func(w http.ResponseWriter, r *http.Request, n int, in map[string]any)
}

func (s *sqsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var in map[string]any
	_ = json.Unmarshal(raw, &in)
	s.mu.Lock()
	s.bodies = append(s.bodies, in)
	n := len(s.bodies)
	s.mu.Unlock()
	s.answer(w, r, n, in)
}

func (s *sqsServer) requests() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

func jsonError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", "req-42")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":%q,"message":%q}`, typ, msg)
}

func sendOK(w http.ResponseWriter, in map[string]any) {
	body, _ := in["MessageBody"].(string)
	sum := md5.Sum([]byte(body))
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	fmt.Fprintf(w, `{"MessageId":"m-1","MD5OfMessageBody":%q,"SequenceNumber":"1"}`, hex.EncodeToString(sum[:]))
}

func newClientQueue(t *testing.T, s *sqsServer, opts Options) *Queue {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	client := sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
		// A client-wide setting the per-call bound must override.
		RetryMaxAttempts: 10,
	})
	q, err := New(client, srv.URL+"/000000000000/agent-events.fifo", opts)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestRetryBound(t *testing.T) {
	s := &sqsServer{answer: func(w http.ResponseWriter, _ *http.Request, _ int, in map[string]any) {
		// A server that echoes the request must not get it into the error.
		body, _ := in["MessageBody"].(string)
		jsonError(w, 500, "InternalError", "failed on "+body)
	}}
	q := newClientQueue(t, s, Options{MaxAttempts: 3, MaxBackoff: time.Millisecond})
	e := storetest.SampleEvent(storetest.NewSessionID())
	err := q.Enqueue(context.Background(), e)
	if err == nil {
		t.Fatal("no error")
	}
	if n := len(s.requests()); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	msg := err.Error()
	for _, want := range []string{"gave up after 3 attempts", "api error InternalError", "status 500", "request id req-42", e.ID} {
		if !strings.Contains(msg, want) {
			t.Fatalf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "failed on") || strings.Contains(msg, "grant-0123456789abcdef") || strings.Contains(msg, "slack") {
		t.Fatalf("error holds the echoed body: %q", msg)
	}
	var me *retry.MaxAttemptsError
	if !errors.As(err, &me) {
		t.Fatal("MaxAttemptsError not reachable")
	}
}

func TestRetrySucceedsWithOneDeduplicationID(t *testing.T) {
	s := &sqsServer{answer: func(w http.ResponseWriter, _ *http.Request, n int, in map[string]any) {
		if n < 3 {
			jsonError(w, 503, "ServiceUnavailable", "try later")
			return
		}
		sendOK(w, in)
	}}
	q := newClientQueue(t, s, Options{MaxAttempts: 4, MaxBackoff: time.Millisecond})
	e := storetest.SampleEvent(storetest.NewSessionID())
	if err := q.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	reqs := s.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d attempts, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r["MessageDeduplicationId"] != e.ID || r["MessageGroupId"] != GroupID(e) || r["MessageBody"] != reqs[0]["MessageBody"] {
			t.Fatalf("attempt %d sent %v / %v", i+1, r["MessageDeduplicationId"], r["MessageGroupId"])
		}
	}
}

func TestNoRetryOnClientError(t *testing.T) {
	s := &sqsServer{answer: func(w http.ResponseWriter, _ *http.Request, _ int, _ map[string]any) {
		jsonError(w, 400, "com.amazonaws.sqs#QueueDoesNotExist", "The specified queue does not exist.")
	}}
	q := newClientQueue(t, s, Options{MaxAttempts: 5, MaxBackoff: time.Millisecond})
	err := q.Enqueue(context.Background(), storetest.SampleEvent("as-1"))
	var qe *Error
	if !errors.As(err, &qe) || qe.Code() != "QueueDoesNotExist" {
		t.Fatalf("error %v", err)
	}
	if n := len(s.requests()); n != 1 {
		t.Fatalf("%d attempts for a client error", n)
	}
}

func TestTimeoutBound(t *testing.T) {
	release := make(chan struct{})
	s := &sqsServer{answer: func(_ http.ResponseWriter, r *http.Request, _ int, _ map[string]any) {
		select { // hang until the client gives up
		case <-r.Context().Done():
		case <-release:
		}
	}}
	q := newClientQueue(t, s, Options{MaxAttempts: 10, MaxBackoff: time.Millisecond, Timeout: 300 * time.Millisecond})
	defer close(release)
	start := time.Now()
	err := q.Enqueue(context.Background(), storetest.SampleEvent("as-1"))
	took := time.Since(start)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error %v, want a timeout", err)
	}
	if took > 2*time.Second {
		t.Fatalf("Enqueue took %v with a 300ms bound", took)
	}
}

func TestCallerCancel(t *testing.T) {
	s := &sqsServer{answer: func(w http.ResponseWriter, _ *http.Request, _ int, in map[string]any) { sendOK(w, in) }}
	q := newClientQueue(t, s, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := q.Enqueue(ctx, storetest.SampleEvent("as-1"))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "canceled") {
		t.Fatalf("error %v", err)
	}
}

func TestClientRoundTrip(t *testing.T) {
	// The real client's serialization of everything Enqueue sets.
	s := &sqsServer{answer: func(w http.ResponseWriter, _ *http.Request, _ int, in map[string]any) { sendOK(w, in) }}
	q := newClientQueue(t, s, Options{})
	e := storetest.SampleEvent("as-0123456789abcdef0123456789abcdef")
	if err := q.Enqueue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	r := s.requests()[0]
	attrs, _ := r["MessageAttributes"].(map[string]any)
	et, _ := attrs["eventType"].(map[string]any)
	if r["QueueUrl"] == nil || r["MessageGroupId"] != "Swarm/default/1700000000.000100/planner" ||
		r["MessageDeduplicationId"] != e.ID || et["DataType"] != "String" || et["StringValue"] != "auth.granted" {
		t.Fatalf("request %v", r)
	}
}
