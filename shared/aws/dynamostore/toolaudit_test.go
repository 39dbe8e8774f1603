package dynamostore

import (
	"context"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/audittest"
)

// The audit stream on the in-memory table, with small Query pages.
func TestToolAuditConformanceFake(t *testing.T) {
	audittest.Run(t, func(t *testing.T, retention time.Duration) domain.ToolAuditLog {
		s := newMemStore(t, newMemTable())
		s.scanLimit = 3
		return s.ToolAudit(retention)
	})
}

// An audit item: the list attributes the lists' indexes read, the ttl at
// the record's time plus the retention, and nothing but the record in doc.
func TestToolAuditItem(t *testing.T) {
	m := newMemTable()
	s := newMemStore(t, m)
	at := time.Date(2026, 3, 10, 12, 0, 0, 500, time.UTC)
	if err := s.ToolAudit(time.Hour).AppendToolAudit(context.Background(), domain.ToolAudit{At: at, CallID: "c", Tool: "t", Tenant: "acme", Status: "ok"}); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.items) != 1 {
		t.Fatalf("%d items", len(m.items))
	}
	for pk, item := range m.items {
		_, id, err := domain.ParseListKey(pk[len(auditPrefix):])
		if err != nil || len(id) != 16 {
			t.Fatalf("pk %q: %v", pk, err)
		}
		for attr, want := range map[string]string{attrKind: kindToolAudit, attrListKey: "audit#t#acme", attrListAll: "audit", attrListSort: pk[len(auditPrefix):]} {
			if got, _, _ := getS(item, attr); got != want {
				t.Fatalf("%s = %q, want %q", attr, got, want)
			}
		}
		if n, _ := needN(item, TTLAttribute); n != at.Add(time.Hour).Unix()+1 {
			t.Fatalf("ttl %d", n)
		}
	}
}
