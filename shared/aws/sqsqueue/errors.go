package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
)

// Error is a failed queue operation. Its text is built from safe parts
// only: the operation, the error code, HTTP status and request id of an
// AWS error, the attempt count and whether time ran out. It never holds an
// AWS error's message, which could echo request content, nor a message
// body. The cause is still reachable with errors.Is and errors.As
// (context.DeadlineExceeded, smithy.APIError, *retry.MaxAttemptsError).
type Error struct {
	// Op names what failed, e.g. "enqueue event as-… to events.fifo".
	Op  string
	Err error
}

func (e *Error) Error() string { return "sqsqueue: " + e.Op + ": " + describe(e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Code is the AWS error code of the cause ("QueueDoesNotExist",
// "AWS.SimpleQueueService.NonExistentQueue", …), or "" when the request
// got no answer.
func (e *Error) Code() string {
	var api smithy.APIError
	if errors.As(e.Err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// describe summarises err without any text a server or a value could have
// put into it.
func describe(err error) string {
	var parts []string
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		parts = append(parts, "timed out")
	case errors.Is(err, context.Canceled):
		parts = append(parts, "canceled")
	}
	var api smithy.APIError
	var resp *awshttp.ResponseError
	var netErr *net.OpError
	switch {
	case errors.As(err, &api):
		s := "api error " + safeToken(api.ErrorCode())
		if errors.As(err, &resp) {
			s += fmt.Sprintf(" (status %d, request id %s)", resp.HTTPStatusCode(), safeToken(resp.ServiceRequestID()))
		}
		parts = append(parts, s)
	case errors.As(err, &netErr):
		// A dial or read error names addresses, never request content.
		parts = append(parts, netErr.Error())
	case len(parts) == 0:
		parts = append(parts, fmt.Sprintf("failed (%T)", innermost(err)))
	}
	var maxAttempts *retry.MaxAttemptsError
	if errors.As(err, &maxAttempts) {
		parts = append(parts, fmt.Sprintf("gave up after %d attempts", maxAttempts.Attempt))
	}
	return strings.Join(parts, "; ")
}

func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// safeToken keeps codes and request ids to a short run of printable ASCII,
// since a misbehaving endpoint controls them.
func safeToken(s string) string {
	const limit = 100
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < limit; i++ {
		c := s[i]
		if c >= '!' && c <= '~' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "-"
	}
	return b.String()
}
