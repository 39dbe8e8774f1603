package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Limit is one rate: Rate calls per second on average, up to Burst at once.
type Limit struct {
	Rate  float64 // calls per second, > 0
	Burst int     // calls allowed at once, >= 1
}

// Bounds a Limit must keep: the interval is a whole number of microseconds
// (at least one), and a full bucket refills within MaxWindow, which keeps
// every TAT far from overflowing and is longer than any sane limit.
const (
	MaxRate   = 1e6                  // calls per second
	MaxWindow = 366 * 24 * time.Hour // Burst / Rate
)

// Validate reports whether l is a usable limit.
func (l Limit) Validate() error {
	switch {
	case math.IsNaN(l.Rate) || l.Rate <= 0:
		return fmt.Errorf("rate %v: want a positive number of calls per second", l.Rate)
	case l.Rate > MaxRate:
		return fmt.Errorf("rate %v: want at most %v calls per second", l.Rate, float64(MaxRate))
	case l.Burst < 1:
		return fmt.Errorf("burst %d: want at least 1", l.Burst)
	case float64(l.Burst)/l.Rate > MaxWindow.Seconds():
		return fmt.Errorf("burst %d at rate %v: a full bucket would take longer than %v to refill", l.Burst, l.Rate, MaxWindow)
	}
	return nil
}

// Limits are the limits per tool, with a default for every other tool.
type Limits struct {
	Default Limit
	PerTool map[string]Limit
}

// Validate reports whether every limit in ls is usable.
func (ls Limits) Validate() error {
	var errs []error
	if err := ls.Default.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("default limit: %w", err))
	}
	for tool, l := range ls.PerTool {
		if tool == "" {
			errs = append(errs, errors.New("limit for an empty tool name"))
			continue
		}
		if err := l.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("limit for tool %.80q: %w", tool, err))
		}
	}
	return errors.Join(errs...)
}

// For returns the limit of tool.
func (ls Limits) For(tool string) Limit {
	if l, ok := ls.PerTool[tool]; ok {
		return l
	}
	return ls.Default
}

// GCRA is a Limit in whole microseconds, as every backend stores times:
// the emission interval T and the tolerance τ = (Burst-1)·T.
type GCRA struct {
	Interval  int64 // T
	Tolerance int64 // τ
}

// GCRA returns l in microseconds. l must be valid (Validate).
func (l Limit) GCRA() GCRA {
	t := max(int64(math.Round(1e6/l.Rate)), 1)
	return GCRA{Interval: t, Tolerance: int64(l.Burst-1) * t}
}

// Decide applies GCRA at now (Unix µs) to a key whose TAT is tat (0 for a
// new key). It returns the new TAT when the call is allowed, or tat
// unchanged and how long to wait. It is the whole algorithm: a backend
// reads tat, calls Decide and stores newTAT when ok, atomically.
func (g GCRA) Decide(tat, now int64) (newTAT int64, ok bool, retryAfter time.Duration) {
	newTAT = max(tat, now) + g.Interval
	over := newTAT - now - (g.Tolerance + g.Interval)
	if over <= 0 {
		return newTAT, true, 0
	}
	return tat, false, retryAfterSeconds(over)
}

// retryAfterSeconds rounds a wait in microseconds up to whole seconds, at
// least one, as HTTP Retry-After carries it.
func retryAfterSeconds(us int64) time.Duration {
	s := (us + 999_999) / 1_000_000
	return time.Duration(max(s, 1)) * time.Second
}

// Key names the bucket of (principal, tool) without holding either: the
// hex SHA-256 of principal, a zero byte and tool. It refuses an empty
// principal or tool (every such call would share one bucket by mistake)
// and a zero byte in either, which would make the name ambiguous
// ("a\x00b" + "c" and "a" + "b\x00c" would share a bucket). Backends name
// their state only by Key, so no principal reaches a file name, a table
// key or an error.
func Key(principal, tool string) (string, error) {
	switch {
	case principal == "":
		return "", errors.New("ratelimit: empty principal")
	case tool == "":
		return "", errors.New("ratelimit: empty tool name")
	case strings.IndexByte(principal, 0) >= 0:
		return "", errors.New("ratelimit: principal holds a zero byte")
	case strings.IndexByte(tool, 0) >= 0:
		return "", errors.New("ratelimit: tool name holds a zero byte")
	}
	h := sha256.New()
	h.Write([]byte(principal))
	h.Write([]byte{0})
	h.Write([]byte(tool))
	return hex.EncodeToString(h.Sum(nil)), nil
}
