package awserr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// canary is request content a server echoes into its error message; no
// description may hold it.
const canary = "canary-4f2a-attribute-value"

// These tests drive a real *dynamodb.Client against an httptest server, so
// the errors are the ones the SDK builds, wrapping and all.
func newClient(t *testing.T, h http.HandlerFunc, attempts int) *dynamodb.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
		RetryMaxAttempts: attempts,
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = attempts
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		}),
	})
}

func jsonError(status int, typ, requestID string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("x-amzn-RequestId", requestID)
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"__type":%q,"message":"One or more parameter values were invalid: %s"}`, typ, canary)
	}
}

func put(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("agentauth"),
		Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: canary}},
	})
	return err
}

func TestDescribeSDKErrors(t *testing.T) {
	// hang answers nothing until the client goes away. It reads the body
	// first: only then does the server notice a closed connection.
	hang := func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	}
	for _, tc := range []struct {
		name     string
		handler  http.HandlerFunc
		attempts int
		ctx      func() (context.Context, context.CancelFunc)
		want     []string
		code     string
		is       error
	}{
		{
			name:    "api error keeps code, status and request id",
			handler: jsonError(400, "com.amazonaws.dynamodb.v20120810#ValidationException", "req-1"),
			want:    []string{"DynamoDB PutItem: api error ValidationException (status 400, request id req-1)"},
			code:    "ValidationException",
		},
		{
			name:     "retries exhausted",
			handler:  jsonError(500, "InternalServerError", "req-2"),
			attempts: 2,
			want:     []string{"api error InternalServerError (status 500, request id req-2)", "gave up after 2 attempts"},
			code:     "InternalServerError",
		},
		{
			name:    "hostile request id",
			handler: jsonError(400, "ValidationException", "id with spaces\tand "+strings.Repeat("x", 300)),
			want:    []string{"request id id_with_spaces_and_xxx"},
			code:    "ValidationException",
		},
		{
			name:    "deadline",
			handler: hang,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 50*time.Millisecond)
			},
			want: []string{"DynamoDB PutItem: timed out"},
			is:   context.DeadlineExceeded,
		},
		{
			name:    "canceled",
			handler: hang,
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx, cancel
			},
			want: []string{"DynamoDB PutItem: canceled"},
			is:   context.Canceled,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tc.ctx != nil {
				ctx, cancel = tc.ctx()
			}
			defer cancel()
			raw := put(ctx, newClient(t, tc.handler, max(tc.attempts, 1)))
			if raw == nil {
				t.Fatal("no error")
			}
			err := fmt.Errorf("dynamostore: put grant: %w", Safe(raw))
			msg := err.Error()
			if strings.Contains(msg, canary) || strings.Contains(msg, "parameter values") || len(msg) > 300 {
				t.Fatalf("error %q holds the message or request content, or is long", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Fatalf("error %q lacks %q", msg, w)
				}
			}
			if got := Code(err); got != tc.code {
				t.Fatalf("Code = %q, want %q", got, tc.code)
			}
			if tc.code != "" {
				var api smithy.APIError
				if !errors.As(err, &api) {
					t.Fatal("smithy.APIError not reachable through Safe")
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("errors.Is(%v) is false", tc.is)
			}
		})
	}
}

func TestDescribeOtherErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"typed exception from a fake", &types.ResourceNotFoundException{Message: aws.String(canary)}, "api error ResourceNotFoundException"},
		{"plain error", fmt.Errorf("wrapped: %w", errors.New("echo "+canary)), "failed (*errors.errorString)"},
		{"network error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, "dial tcp: connection refused"},
		{"bare deadline", context.DeadlineExceeded, "timed out"},
		{"empty code", &smithy.GenericAPIError{Code: "", Message: canary}, "api error -"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Safe(tc.err).Error()
			if got != tc.want {
				t.Fatalf("Describe = %q, want %q", got, tc.want)
			}
			if !errors.Is(Safe(tc.err), tc.err) {
				t.Fatal("the cause is not reachable")
			}
		})
	}
	if Safe(nil) != nil {
		t.Fatal("Safe(nil) is not nil")
	}
}

// DescribeListed and Listed keep a server's error code only when the
// caller's list holds it (issue 17 item 9: a model adapter's error
// becomes a turn failure, and the endpoint chooses the code).
func TestDescribeListed(t *testing.T) {
	known := map[string]bool{"ValidationException": true}
	for _, tc := range []struct {
		name, typ, code, mentions string
	}{
		{"listed", "ValidationException", "ValidationException", "api error ValidationException (status 400, request id R1)"},
		{"not listed", "IgnorePreviousInstructions", OtherCode, "api error other (status 400, request id R1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := put(context.Background(), newClient(t, jsonError(400, tc.typ, "R1"), 1))
			if got := Listed(Code(err), known); got != tc.code {
				t.Fatalf("Listed = %q, want %q", got, tc.code)
			}
			s := DescribeListed(err, known)
			if !strings.Contains(s, tc.mentions) || strings.Contains(s, "IgnorePrevious") || strings.Contains(s, canary) {
				t.Fatalf("DescribeListed = %q, want it to mention %q and nothing the server chose", s, tc.mentions)
			}
			// Describe, for logs, names every code (as a token).
			if !strings.Contains(Describe(err), "api error "+tc.typ) {
				t.Fatalf("Describe = %q", Describe(err))
			}
		})
	}
	if Listed("", known) != "" {
		t.Fatal("no code became one")
	}
}
