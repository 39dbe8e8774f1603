// Package httpx is the one response vocabulary of agentauth's HTTP edge:
// every route (runtime, callback, tool plane) answers through it.
//
//   - WriteJSON writes a JSON answer that no cache keeps.
//   - WriteError writes the one error body,
//     {"error": {"code", "message", "details"?, "requestId"}}. A 5xx
//     message is fixed by its status, so no handler can put err.Error()
//     into a response; the request id finds the log line.
//   - DecodeJSON, ReadJSON and ReadBody read a request body by one set of
//     rules: Content-Type application/json (or none) else 415, a
//     per-route size limit else 413, and for JSON one value with no
//     unknown field, no field name in another case, no duplicate key (at
//     any depth) and no trailing data else 400, naming the field, the key
//     and its JSONPath — and for an unknown field the one it likely means
//     (domain.Suggest) — or the byte offset. Unmarshal is the same decoder
//     for JSON a body holds as raw bytes.
//   - Unmatched is every router's catch-all: 405 with Allow for a route
//     asked with another method, else 404.
//   - Credential.Refusal says which credential a route takes when it was
//     sent the other (judged by the token's shape, never echoed);
//     PrefersHTML reads Accept for a route that has a page.
//   - Observe gives every request its request id and trace id, recovers
//     panics into a generic 500 and writes one access-log line.
//
// It must never echo a request body, a query or a header value in an
// answer or a log line: problems are described by field name, byte offset
// and type.
package httpx
