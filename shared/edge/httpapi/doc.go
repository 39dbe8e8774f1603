// Package httpapi holds agentauth's HTTP handlers — token, callback,
// session status, revoke, auth.pending, health — as plain net/http
// handlers, so the local server and the Lambda functions run the same code.
//
// It answers in the edge's one vocabulary (shared/edge/httpx: the JSON
// writer, the error body, the strict body decoder, request ids). A 5xx
// body is generic and carries the request id; no handler ever writes
// err.Error(), a token (other than the ready result), a code or a state to
// a response or a log.
package httpapi
