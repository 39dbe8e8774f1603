// Package sqsqueue is the AWS domain.EventQueue: agent events on an SQS FIFO
// queue, one message group per agent instance, so that one instance's events
// are handled one after another and different instances run in parallel.
//
// # Wire format
//
// A message body is the domain.Event as JSON. Its message attribute
// "eventType" (see EventType) lets a consumer route without parsing the
// body. MessageGroupId is GroupID(event) and MessageDeduplicationId is
// DeduplicationID(event.ID); both are valid SQS ids for every input.
//
// # Exactly once
//
// SQS drops a message whose deduplication id it has accepted within the
// last five minutes, also after the first one was received and deleted. An
// auth.granted event uses the auth session id as its event id, so a replayed
// callback, an SDK retry after a lost response, or the OAuth core's sweep
// re-sending a pending event within that window queues nothing new. Past the
// window SQS no longer helps. A replayed callback still emits nothing, since
// the OAuth core completes a session at most once. One case remains: a send
// that failed for the caller (say, a timeout) but reached SQS marks the event
// pending, and if the sweep re-sends it more than five minutes later it is
// delivered twice. So the consumer must resume a parked turn at most once per
// event id (the turn state in the store), not rely on the queue alone.
//
// # What it must never do
//
// Events may carry user input, origin data and subjects but never a secret.
// This package must never log an event, and its errors never contain a
// message body or text an AWS error echoed back: they name the operation,
// the event id (as its deduplication id), the queue name, and the error
// code, HTTP status and request id.
package sqsqueue
