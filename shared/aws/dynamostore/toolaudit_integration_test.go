//go:build integration

package dynamostore

import (
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/audittest"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
)

// The audit stream's suite on the emulator, each subtest on a fresh table
// with TimeToLive on (the suite's expired records may go at any time; the
// query never returns them either way).
func TestToolAuditConformanceEmulator(t *testing.T) {
	emulatortest.Config(t)
	audittest.Run(t, func(t *testing.T, retention time.Duration) domain.ToolAuditLog {
		s, _ := newEmulatorStore(t, tableOpts{})
		return s.ToolAudit(retention)
	})
}
