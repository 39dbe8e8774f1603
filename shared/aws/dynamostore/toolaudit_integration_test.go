//go:build integration

package dynamostore

import (
	"context"
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

// One append on the emulator: what a Lambda's tool call waits for (the
// emulator's latency, not DynamoDB's).
func BenchmarkToolAuditAppendEmulator(b *testing.B) {
	emulatortest.Config(b)
	api := emulatortest.DynamoDB(b)
	s, err := New(api, emulatortest.DynamoTable(b, api, "agentauth-dynamostore-bench-", TableSchema, nil))
	if err != nil {
		b.Fatal(err)
	}
	l := s.ToolAudit(time.Hour)
	d := int64(12)
	r := domain.ToolAudit{At: time.Now().UTC(), CallID: "call-1", Tool: "search", Principal: "alice", Tenant: "acme", Status: "ok", DurationMs: &d}
	for b.Loop() {
		if err := l.AppendToolAudit(context.Background(), r); err != nil {
			b.Fatal(err)
		}
	}
}
