// Package httpapi holds agentauth's HTTP handlers — token, callback,
// session status, revoke, auth.pending, health — as plain net/http
// handlers, so the local server and the Lambda functions run the same code.
//
// It maps errors to HTTP statuses in one place (writeError). A 5xx body is
// generic and carries the request id; no handler ever writes err.Error(),
// a token (other than the ready result), a code or a state to a response
// or a log.
package httpapi
