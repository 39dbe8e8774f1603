package ratelimit_test

import (
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/limitertest"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

var _ toolhooks.Limiter = (*ratelimit.Memory)(nil)

func TestMemoryConformance(t *testing.T) {
	limitertest.Run(t, func(t *testing.T, limits ratelimit.Limits, now func() time.Time) (toolhooks.Limiter, error) {
		return ratelimit.NewMemory(limits, now)
	})
}
