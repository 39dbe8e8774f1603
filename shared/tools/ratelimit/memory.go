package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Memory is the limiter of one process: for tests, and as a fallback where
// only one process serves calls. It forgets keys whose bucket is full again.
type Memory struct {
	limits Limits
	now    func() time.Time

	mu  sync.Mutex
	tat map[string]int64 // by Key
}

// sweepAt is the number of keys at which Allow drops the idle ones.
const sweepAt = 1 << 14

// NewMemory returns a limiter with limits, reading the time from now
// (time.Now when nil).
func NewMemory(limits Limits, now func() time.Time) (*Memory, error) {
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &Memory{limits: limits, now: now, tat: map[string]int64{}}, nil
}

// Allow implements toolhooks.Limiter.
func (m *Memory) Allow(ctx context.Context, principal, tool string) (bool, time.Duration, error) {
	key, err := Key(principal, tool)
	if err != nil {
		return false, 0, err
	}
	g := m.limits.For(tool).GCRA()
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now().UnixMicro()
	newTAT, ok, retry := g.Decide(m.tat[key], now)
	if !ok {
		return false, retry, nil
	}
	if len(m.tat) >= sweepAt {
		for k, tat := range m.tat {
			if tat <= now { // full again: the same as absent
				delete(m.tat, k)
			}
		}
	}
	m.tat[key] = newTAT
	return true, 0, nil
}
