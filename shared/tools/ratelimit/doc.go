// Package ratelimit is the per-(principal, tool) rate limit of the tool
// hooks (toolhooks.Limiter): GCRA, the generic cell rate algorithm, which
// is a token bucket kept as one number per key — its theoretical arrival
// time (TAT) — so no job ever refills anything.
//
// Three backends share the arithmetic in gcra.go and one conformance
// suite: Memory (one process: tests and fallback), File (the local server:
// one small file per key under a directory, changed under an advisory lock,
// so the limit holds across processes on one machine) and Dynamo (AWS: one
// item per key in the store's table, changed by a conditional UpdateItem, so
// the limit holds across every Lambda with no read-then-write race).
//
// # The algorithm
//
// A Limit of Rate r per second and Burst b gives the emission interval
// T = 1/r and the tolerance τ = (b-1)·T. At time now, a call computes
// newTAT = max(TAT, now) + T; it is allowed (and TAT becomes newTAT) when
// newTAT − now ≤ τ + T, and denied (TAT unchanged) otherwise, with
// Retry-After = newTAT − now − (τ + T) rounded up to whole seconds, at
// least one. Times are whole microseconds, as DynamoDB stores them.
//
// This package must never put a principal, a tool argument or a stored
// value in an error or a file name: keys are the SHA-256 of principal and
// tool, and errors name only the operation that failed. It never logs.
// When the state cannot be read or written, Allow returns an error and
// ok=false: the caller fails closed.
package ratelimit
