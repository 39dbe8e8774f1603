package auditfile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/audittest"
)

func TestConformance(t *testing.T) {
	audittest.Run(t, func(t *testing.T, retention time.Duration) domain.ToolAuditLog {
		return New(filepath.Join(t.TempDir(), "audit", "tools"), retention)
	})
}

// Two Logs on one directory, as two processes: what one appends the
// other reads, also after it cached the day.
func TestTwoLogsShareADirectory(t *testing.T) {
	dir := t.TempDir()
	a, b := New(dir, time.Hour), New(dir, time.Hour)
	ctx := context.Background()
	now := time.Now().UTC()
	for i, l := range []*Log{a, b, a} {
		if err := l.AppendToolAudit(ctx, domain.ToolAudit{At: now.Add(time.Duration(i) * time.Millisecond), CallID: "c" + string(rune('0'+i)), Tool: "t", Status: "ok"}); err != nil {
			t.Fatal(err)
		}
		p, err := b.QueryToolAudit(ctx, domain.ToolAuditQuery{AnyTenant: true})
		if err != nil || len(p.Records) != i+1 {
			t.Fatalf("after %d appends b reads %d records, %v", i+1, len(p.Records), err)
		}
	}
}

// Sweep deletes the days wholly older than the retention, and nothing
// else; a half-written last line is not read, and a bad line is reported,
// not fatal.
func TestSweepAndDamagedLines(t *testing.T) {
	dir := t.TempDir()
	l := New(dir, 48*time.Hour)
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	l.SetClock(func() time.Time { return now })
	ctx := context.Background()
	for _, d := range []int{0, 1, 2, 3, 9} {
		if err := l.AppendToolAudit(ctx, domain.ToolAudit{At: now.Add(-time.Duration(d) * 24 * time.Hour), CallID: "c", Tool: "t", Status: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := l.Sweep(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2 (days 3 and 9 back)", n, err)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "2026-03-08.jsonl 2026-03-09.jsonl 2026-03-10.jsonl notes.txt" {
		t.Fatalf("left: %v", names)
	}
	today := filepath.Join(dir, "2026-03-10.jsonl")
	f, err := os.OpenFile(today, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("{not json}\n{\"id\":\"00000000000000ff\",\"at\":\"2026-03-10T11:00:00Z\",\"callId\":\"half")
	f.Close()
	p, err := l.QueryToolAudit(ctx, domain.ToolAuditQuery{AnyTenant: true})
	if err != nil || len(p.Unreadable) != 1 || len(p.Records) != 3 {
		t.Fatalf("records %d, unreadable %v, %v", len(p.Records), p.Unreadable, err)
	}
	if strings.Contains(p.Unreadable[0].Error(), "not json") {
		t.Fatalf("an unreadable line's content in the error: %v", p.Unreadable[0])
	}
}

// A record too long for one append has its strings cut; the line stays
// within PIPE_BUF.
func TestLongFieldsAreCut(t *testing.T) {
	dir := t.TempDir()
	l := New(dir, time.Hour)
	long := strings.Repeat("é", 3000)
	r := domain.ToolAudit{At: time.Now().UTC(), CallID: long, Tool: long, AgentID: long, Principal: long, Tenant: "acme", Status: "ok"}
	if err := l.AppendToolAudit(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	p, err := l.QueryToolAudit(context.Background(), domain.ToolAuditQuery{Tenant: "acme"})
	if err != nil || len(p.Records) != 1 || len(p.Records[0].Principal) > maxField {
		t.Fatalf("%+v, %v", p, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, r.At.Format(dayLayout)+suffix))
	if len(b) > maxLine {
		t.Fatalf("line of %d bytes", len(b))
	}
}

// What one append costs (the background writer's work per tool call on
// agentauth serve).
func BenchmarkAppend(b *testing.B) {
	l := New(b.TempDir(), time.Hour)
	d := int64(12)
	r := domain.ToolAudit{At: time.Now().UTC(), CallID: "call-1", Tool: "search", AgentID: "core.system", Principal: "alice", Tenant: "acme",
		Transport: "native", Status: "ok", DurationMs: &d, ArgsHash: strings.Repeat("ab", 32)}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.AppendToolAudit(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// A console page over a day of 100,000 records, after the first read
// (which parses the file once; later reads parse only its new tail).
func BenchmarkQueryPage100k(b *testing.B) {
	dir := b.TempDir()
	l := New(dir, 24*time.Hour)
	now := time.Now().UTC()
	var buf strings.Builder
	for i := range 100_000 {
		at := now.Add(-time.Duration(i) * 100 * time.Microsecond)
		if at.Format(dayLayout) != now.Format(dayLayout) {
			at = now.Add(time.Duration(i) * time.Nanosecond)
		}
		line, _ := json.Marshal(stored{ID: fmt.Sprintf("%016x", i), ToolAudit: domain.ToolAudit{At: at, CallID: "c", Tool: "search", Tenant: []string{"acme", "globex"}[i%2], Status: "ok"}})
		buf.Write(line)
		buf.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, now.Format(dayLayout)+suffix), []byte(buf.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if _, err := l.QueryToolAudit(ctx, domain.ToolAuditQuery{Tenant: "acme"}); err != nil {
		b.Fatal(err)
	}
	b.Logf("first read of 100,000 records: %s", time.Since(start))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.QueryToolAudit(ctx, domain.ToolAuditQuery{Tenant: "acme", Tool: "search"}); err != nil {
			b.Fatal(err)
		}
	}
}
