// Package awserr describes AWS SDK errors without what a request or a server
// may have put into them. Every AWS adapter (dynamostore, kmsseal,
// awssecrets, sqsqueue) passes what an SDK call returned through Safe or
// Describe, so an error text names the service, operation, error code,
// HTTP status, request id, attempt count and whether time ran out, and
// nothing else.
//
// An AWS error message can echo request content: a DynamoDB validation
// error quotes attribute values, SQS a message body, and an endpoint that
// misbehaves whatever it likes. This package must never put an error's
// message, or any text of an error it does not know, into a description.
// The cause stays reachable with errors.Is and errors.As. Where a
// description reaches more than a log line (a model adapter's error ends
// in a turn failure), DescribeListed and Listed keep even the error code
// to the values a service documents.
package awserr

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

// Safe returns err with its text replaced by Describe(err); errors.Is and
// errors.As still reach every cause (smithy.APIError, the SDK's typed
// exceptions, context errors, *retry.MaxAttemptsError). nil stays nil.
// Adapters call it on what an SDK call returned, before wrapping it with
// what they were doing.
func Safe(err error) error {
	if err == nil {
		return nil
	}
	return &safeError{err: err}
}

type safeError struct{ err error }

func (e *safeError) Error() string { return Describe(e.err) }
func (e *safeError) Unwrap() error { return e.err }

// Code is the AWS error code of err ("ResourceNotFoundException",
// "QueueDoesNotExist", …), or "" when the request got no answer.
func Code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// Describe summarises err from safe parts only, e.g.
//
//	DynamoDB UpdateItem: api error ValidationException (status 400, request id R1)
//	KMS Decrypt: timed out
//	SQS SendMessage: api error InternalError (status 500, request id R2); gave up after 3 attempts
//
// A network error keeps its text (it names addresses, never request
// content); any other error is named by its Go type only.
func Describe(err error) string { return describe(err, Token) }

// DescribeListed is Describe naming an API error's code only when known
// lists it (Listed): for a description that reaches more than a log line
// — a model adapter's error becomes a turn failure — where a server's
// own words must not go, be it through the code.
func DescribeListed(err error, known map[string]bool) string {
	return describe(err, func(code string) string { return Listed(code, known) })
}

// OtherCode stands for an error code a server sent that is not on the
// list a description keeps (Listed).
const OtherCode = "other"

// Listed is code when known lists it, OtherCode for any other code, and
// "" for none: a server's error code kept to the values its service
// documents, since a misbehaving endpoint controls the code as much as
// the message.
func Listed(code string, known map[string]bool) string {
	switch {
	case code == "":
		return ""
	case known[code]:
		return code
	}
	return OtherCode
}

func describe(err error, code func(string) string) string {
	var parts []string
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		parts = append(parts, "timed out")
	case errors.Is(err, context.Canceled):
		parts = append(parts, "canceled")
	}
	var (
		api    smithy.APIError
		resp   *awshttp.ResponseError
		netErr *net.OpError
	)
	switch {
	case errors.As(err, &api):
		s := "api error " + code(api.ErrorCode())
		if errors.As(err, &resp) {
			s += fmt.Sprintf(" (status %d, request id %s)", resp.HTTPStatusCode(), Token(resp.ServiceRequestID()))
		}
		parts = append(parts, s)
	case errors.As(err, &netErr):
		parts = append(parts, netErr.Error())
	case len(parts) == 0:
		parts = append(parts, fmt.Sprintf("failed (%T)", innermost(err)))
	}
	var maxAttempts *retry.MaxAttemptsError
	if errors.As(err, &maxAttempts) {
		parts = append(parts, fmt.Sprintf("gave up after %d attempts", maxAttempts.Attempt))
	}
	s := strings.Join(parts, "; ")
	var op *smithy.OperationError
	if errors.As(err, &op) {
		s = Token(op.ServiceID) + " " + Token(op.OperationName) + ": " + s
	}
	return s
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

// Token keeps an identifier a server sent (an error code, a request or
// message id) to a short run of printable ASCII, since a misbehaving
// endpoint controls it.
func Token(s string) string {
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
