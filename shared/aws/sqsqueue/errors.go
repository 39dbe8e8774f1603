package sqsqueue

import "github.com/agentauth/agentauth/shared/aws/awserr"

// Error is a failed queue operation. Its text is the operation and
// awserr.Describe of the cause: the error code, HTTP status and request id
// of an AWS error, the attempt count and whether time ran out. It never
// holds an AWS error's message, which could echo request content, nor a
// message body. The cause is still reachable with errors.Is and errors.As
// (context.DeadlineExceeded, smithy.APIError, *retry.MaxAttemptsError).
type Error struct {
	// Op names what failed, e.g. "enqueue event as-… to events.fifo".
	Op  string
	Err error
}

func (e *Error) Error() string { return "sqsqueue: " + e.Op + ": " + awserr.Describe(e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Code is the AWS error code of the cause ("QueueDoesNotExist",
// "AWS.SimpleQueueService.NonExistentQueue", …), or "" when the request
// got no answer.
func (e *Error) Code() string { return awserr.Code(e.Err) }
