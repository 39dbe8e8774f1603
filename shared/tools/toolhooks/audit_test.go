package toolhooks

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// memAudit is an in-memory ToolAuditLog; block, when set, holds every
// append until it is closed or the append's context ends.
type memAudit struct {
	mu    sync.Mutex
	recs  []domain.ToolAudit
	err   error
	block chan struct{}
}

func (m *memAudit) AppendToolAudit(ctx context.Context, r domain.ToolAudit) error {
	if m.block != nil {
		select {
		case <-m.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.recs = append(m.recs, r)
	return nil
}

func (m *memAudit) QueryToolAudit(context.Context, domain.ToolAuditQuery) (domain.ToolAuditPage, error) {
	return domain.ToolAuditPage{}, nil
}

func (m *memAudit) records() []domain.ToolAudit {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]domain.ToolAudit{}, m.recs...)
}

func okTool(context.Context, json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(`{"ok":true}`), nil
}

// A call through the hooks lands as one record: the toolReturned joined
// with its toolCalled, the tenant and argsHash in it, no argument value.
func TestAuditSinkJoinsACall(t *testing.T) {
	for _, buffer := range []int{0, 16} {
		log := &memAudit{}
		s := NewAuditSink(log, AuditOptions{Buffer: buffer})
		h := &Hooks{Sink: MultiSink{&recSink{}, s}}
		out := h.Invoke(context.Background(), Call{AgentID: "a", ToolName: "t", CallID: "c1", Principal: "alice", Tenant: "acme",
			Args: json.RawMessage(`{"q":"` + canary + `"}`), Via: ViaTurn}, Tool{Name: "t", Transport: "native"}, okTool)
		h.Invoke(context.Background(), Call{AgentID: "a", ToolName: "t", CallID: "c2", Principal: "alice", Tenant: "acme",
			Args: json.RawMessage(`{}`), GrantedScopes: nil}, Tool{Name: "t", Transport: "http", RequiredScopes: []string{"s"}}, okTool)
		h.Invoke(context.Background(), Call{AgentID: "a", ToolName: "t", CallID: "c3", Principal: "alice", Tenant: "acme",
			Args: json.RawMessage(`{}`)}, Tool{Name: "t", Transport: "native"}, func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("upstream said " + canary)
		})
		h.Invoke(context.Background(), Call{AgentID: "a", ToolName: "t", CallID: "c4", Principal: "alice", Tenant: "acme",
			Args: json.RawMessage(`{}`)}, Tool{Name: "t", Transport: "http"}, func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, &AuthorizationRequired{Authorization: json.RawMessage(`{"authorizationUrl":"https://idp/authorize"}`)}
		})
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		recs := log.records()
		if len(recs) != 4 || recs[3].Status != domain.ToolAuditConsent {
			t.Fatalf("buffer %d: %d records; a call that waits for consent: %+v", buffer, len(recs), recs[len(recs)-1])
		}
		recs = recs[:3]
		if len(recs) != 3 {
			t.Fatalf("buffer %d: %d records", buffer, len(recs))
		}
		r := recs[0]
		if r.CallID != "c1" || r.Tool != "t" || r.AgentID != "a" || r.Principal != "alice" || r.Tenant != "acme" || r.Transport != "native" ||
			r.Via != ViaTurn || r.Status != StatusOK || r.DurationMs == nil || r.ArgsHash != out.ToolCalled.ArgsHash || len(r.ArgsHash) != 64 || r.At.IsZero() {
			t.Fatalf("record %+v", r)
		}
		if recs[1].Status != StatusForbidden || recs[1].DurationMs != nil || recs[1].Transport != "http" {
			t.Fatalf("forbidden record %+v", recs[1])
		}
		if recs[2].Status != StatusError || recs[2].ErrorCode != CodeTool {
			t.Fatalf("error record %+v", recs[2])
		}
		b, _ := json.Marshal(recs)
		if strings.Contains(string(b), canary) || strings.Contains(string(b), "upstream said") {
			t.Fatalf("content in the audit records: %s", b)
		}
		if st := s.Stats(); st.Written != 4 || st.Pending != 0 || st.Unmatched != 0 || st.Dropped != 0 {
			t.Fatalf("stats %+v", st)
		}
	}
}

// Two calls with one call id at once (clients choose call ids) are
// joined each with its own toolCalled: never one caller's principal or
// tenant on the other's record.
func TestAuditSinkRepeatedCallIDs(t *testing.T) {
	log := &memAudit{}
	s := NewAuditSink(log, AuditOptions{})
	h := &Hooks{Sink: s}
	release := make(chan struct{})
	var wg sync.WaitGroup
	for _, tenant := range []string{"acme", "globex"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h.Invoke(context.Background(), Call{AgentID: "a", ToolName: "t", CallID: "1", Principal: "user-" + tenant, Tenant: tenant, Args: json.RawMessage(`{}`)},
				Tool{Name: "t", Transport: "native"}, func(context.Context, json.RawMessage) (json.RawMessage, error) {
					if tenant == "acme" {
						<-release // acme returns after globex was called
					}
					return nil, nil
				})
		}()
	}
	for s.Stats().Pending < 1 || len(log.records()) < 1 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	recs := log.records()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	for _, r := range recs {
		if r.Principal != "user-"+r.Tenant {
			t.Fatalf("record of tenant %q has principal %q", r.Tenant, r.Principal)
		}
	}
}

// A toolReturned without its toolCalled is recorded with what it has;
// a toolCalled whose toolReturned never comes expires; the pending map
// stays within MaxPending.
func TestAuditSinkUnmatchedExpiredBounded(t *testing.T) {
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	log := &memAudit{}
	s := NewAuditSink(log, AuditOptions{MaxPending: 3, PendingTTL: 10 * time.Minute, Now: clock})
	ctx := context.Background()

	s.Emit(ctx, ToolReturned{Type: "agent.toolReturned", AgentID: "a", ToolName: "t", CallID: "lost", Status: StatusOK})
	recs := log.records()
	if len(recs) != 1 || recs[0].CallID != "lost" || recs[0].Principal != "" || recs[0].Tenant != "" || recs[0].ArgsHash != "" || !recs[0].At.Equal(now) {
		t.Fatalf("unmatched: %+v", recs)
	}
	if st := s.Stats(); st.Unmatched != 1 {
		t.Fatalf("stats %+v", st)
	}

	// Events built without the hooks join by agent, tool and call id.
	s.Emit(ctx, ToolCalled{Type: "agent.toolCalled", AgentID: "a", ToolName: "t", CallID: "x", Principal: "p", Tenant: "acme", ArgsHash: "h"})
	s.Emit(ctx, ToolReturned{Type: "agent.toolReturned", AgentID: "a", ToolName: "t", CallID: "x", Status: StatusOK})
	if r := log.records()[1]; r.Principal != "p" || r.Tenant != "acme" || r.ArgsHash != "h" {
		t.Fatalf("joined by ids: %+v", r)
	}

	for i := range 5 {
		s.Emit(ctx, ToolCalled{AgentID: "a", ToolName: "t", CallID: string(rune('a' + i))})
		advance(time.Second)
	}
	if st := s.Stats(); st.Pending != 3 || st.Evicted != 2 {
		t.Fatalf("bounded: %+v", st)
	}
	// The oldest were evicted: a and b come back unmatched, e is joined.
	s.Emit(ctx, ToolReturned{AgentID: "a", ToolName: "t", CallID: "a", Status: StatusOK})
	s.Emit(ctx, ToolReturned{AgentID: "a", ToolName: "t", CallID: "e", Status: StatusOK})
	if st := s.Stats(); st.Unmatched != 2 || st.Pending != 2 {
		t.Fatalf("after returns: %+v", st)
	}

	advance(11 * time.Minute)
	s.Emit(ctx, ToolCalled{AgentID: "a", ToolName: "t", CallID: "new"})
	if st := s.Stats(); st.Expired != 2 || st.Pending != 1 {
		t.Fatalf("expired: %+v", st)
	}
}

// The store is down or slow: the call's outcome is the same, the append
// is cut at the timeout (synchronous) or dropped when the buffer is full
// (background), and both are counted.
func TestAuditSinkNeverHoldsACall(t *testing.T) {
	ctx := context.Background()
	t.Run("failing", func(t *testing.T) {
		s := NewAuditSink(&memAudit{err: errors.New("disk full")}, AuditOptions{})
		h := &Hooks{Sink: s}
		out := h.Invoke(ctx, Call{AgentID: "a", ToolName: "t", CallID: "c", Args: json.RawMessage(`{}`)}, Tool{Name: "t", Transport: "native"}, okTool)
		if out.Verdict != VerdictOK || s.Stats().Failed != 1 {
			t.Fatalf("verdict %s, stats %+v", out.Verdict, s.Stats())
		}
	})
	t.Run("slow, synchronous", func(t *testing.T) {
		s := NewAuditSink(&memAudit{block: make(chan struct{})}, AuditOptions{Timeout: 50 * time.Millisecond})
		h := &Hooks{Sink: s}
		start := time.Now()
		out := h.Invoke(ctx, Call{AgentID: "a", ToolName: "t", CallID: "c", Args: json.RawMessage(`{}`)}, Tool{Name: "t", Transport: "native"}, okTool)
		if d := time.Since(start); out.Verdict != VerdictOK || d > time.Second || s.Stats().Failed != 1 {
			t.Fatalf("verdict %s after %s, stats %+v", out.Verdict, d, s.Stats())
		}
	})
	t.Run("slow, background", func(t *testing.T) {
		log := &memAudit{block: make(chan struct{})}
		s := NewAuditSink(log, AuditOptions{Buffer: 2, Timeout: time.Minute})
		h := &Hooks{Sink: s}
		start := time.Now()
		for range 10 {
			h.Invoke(ctx, Call{AgentID: "a", ToolName: "t", CallID: "c", Args: json.RawMessage(`{}`)}, Tool{Name: "t", Transport: "native"}, okTool)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("10 calls took %s", d)
		}
		// One being written, two queued, the rest dropped.
		if st := s.Stats(); st.Dropped < 7 || st.Dropped > 8 {
			t.Fatalf("stats %+v", st)
		}
		close(log.block)
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.Written+st.Dropped != 10 {
			t.Fatalf("after flush: %+v", st)
		}
		s.Close(ctx)
		s.Emit(ctx, ToolReturned{CallID: "late", Status: StatusOK})
		if st := s.Stats(); st.Written+st.Dropped != 11 {
			t.Fatalf("after close: %+v", st)
		}
	})
}

// nopAudit stores nothing: the benchmarks measure the sink alone.
type nopAudit struct{}

func (nopAudit) AppendToolAudit(context.Context, domain.ToolAudit) error { return nil }
func (nopAudit) QueryToolAudit(context.Context, domain.ToolAuditQuery) (domain.ToolAuditPage, error) {
	return domain.ToolAuditPage{}, nil
}

// What the sink adds to one call: the join and the hand-over to the
// background writer (the append itself runs off the call).
func BenchmarkAuditSinkPerCall(b *testing.B) {
	for _, mode := range []struct {
		name   string
		buffer int
	}{{"background", 1024}, {"synchronous", 0}} {
		b.Run(mode.name, func(b *testing.B) {
			s := NewAuditSink(nopAudit{}, AuditOptions{Buffer: mode.buffer})
			defer s.Close(context.Background())
			ctx := context.Background()
			d := int64(3)
			b.ReportAllocs()
			for b.Loop() {
				tag := &callTag{}
				s.Emit(ctx, ToolCalled{Type: "agent.toolCalled", AgentID: "a", ToolName: "t", CallID: "c", ArgsHash: "h", Principal: "p", Tenant: "acme", Transport: "native", call: tag})
				s.Emit(ctx, ToolReturned{Type: "agent.toolReturned", AgentID: "a", ToolName: "t", CallID: "c", Status: StatusOK, DurationMs: &d, call: tag})
			}
		})
	}
}
