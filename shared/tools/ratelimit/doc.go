// Package ratelimit is the algorithm of the per-(principal, tool) rate limit
// of the tool hooks (toolhooks.Limiter): GCRA, the generic cell rate
// algorithm, which is a token bucket kept as one number per key — its
// theoretical arrival time (TAT) — so no job ever refills anything.
//
// It is pure: Limits and their parsing, Key (the name of a bucket), GCRA and
// its Decide step, and Memory, the limiter of one process. The limiters
// that keep state elsewhere call Key and Decide and sit with the other
// adapters: filelimit (the local server: one small file per key, changed
// under an advisory lock, so the limit holds across processes on one
// machine) and dynamostore.ToolLimiter (AWS: one item per key in the
// store's table, changed by a conditional UpdateItem, so the limit holds
// across every Lambda with no read-then-write race). All three pass
// limitertest.
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
// This package performs no I/O and never logs. It must never put a
// principal, a tool argument or a stored value in an error or a key: a
// bucket is named by Key, the SHA-256 of principal and tool. When a
// backend cannot read or write the state, its Allow returns an error and
// ok=false: the caller fails closed.
package ratelimit
