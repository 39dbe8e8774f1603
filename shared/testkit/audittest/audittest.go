// Package audittest is the conformance suite of domain.ToolAuditLog, run
// against every implementation (the home's JSON-lines files, the DynamoDB
// table): newest first, a tenant's scope never holding another tenant's
// records, the tool and status filters, paging without duplicates or gaps,
// the retention, and concurrent appends. Test helper only.
package audittest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// New returns an empty log keeping records for retention.
type New func(t *testing.T, retention time.Duration) domain.ToolAuditLog

// Run runs the suite; each subtest gets a log of its own.
func Run(t *testing.T, newLog New) {
	ctx := context.Background()
	// Records are dated just before now, so the retention of a day keeps
	// them wherever the suite runs.
	base := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	rec := func(i int, tenant, tool, status string) domain.ToolAudit {
		d := int64(i)
		r := domain.ToolAudit{At: base.Add(time.Duration(i) * time.Millisecond), CallID: fmt.Sprintf("call-%d", i), Tool: tool,
			AgentID: "agent", Principal: "user-" + tenant, Tenant: tenant, Transport: "native", Status: status, DurationMs: &d,
			ArgsHash: fmt.Sprintf("%064x", i)}
		if status == "error" {
			r.ErrorCode = "E_TOOL"
		}
		return r
	}
	appendAll := func(t *testing.T, l domain.ToolAuditLog, rs ...domain.ToolAudit) {
		t.Helper()
		for _, r := range rs {
			if err := l.AppendToolAudit(ctx, r); err != nil {
				t.Fatalf("append %s: %v", r.CallID, err)
			}
		}
	}
	// all reads every page of q, failing on a duplicate or an unreadable
	// record.
	all := func(t *testing.T, l domain.ToolAuditLog, q domain.ToolAuditQuery) []domain.ToolAudit {
		t.Helper()
		var out []domain.ToolAudit
		seen := map[string]bool{}
		for pages := 0; ; pages++ {
			if pages > 1000 {
				t.Fatal("more than 1000 pages: Next does not move")
			}
			p, err := l.QueryToolAudit(ctx, q)
			if err != nil {
				t.Fatalf("query %+v: %v", q, err)
			}
			if len(p.Unreadable) > 0 {
				t.Fatalf("unreadable: %v", p.Unreadable)
			}
			if p.Next != "" && q.Limit > 0 && len(p.Records) != q.Limit && len(p.Records) == 0 {
				t.Fatalf("an empty page with a Next")
			}
			for _, r := range p.Records {
				if seen[r.CallID] {
					t.Fatalf("%s listed twice", r.CallID)
				}
				seen[r.CallID] = true
			}
			out = append(out, p.Records...)
			if p.Next == "" {
				return out
			}
			q.After = p.Next
		}
	}
	ids := func(rs []domain.ToolAudit) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.CallID
		}
		return out
	}
	newestFirst := func(t *testing.T, rs []domain.ToolAudit) {
		t.Helper()
		for i := 1; i < len(rs); i++ {
			if rs[i].At.After(rs[i-1].At) {
				t.Fatalf("not newest first: %s (%s) after %s (%s)", rs[i].CallID, rs[i].At, rs[i-1].CallID, rs[i-1].At)
			}
		}
	}

	t.Run("RoundTripNewestFirst", func(t *testing.T) {
		l := newLog(t, 24*time.Hour)
		if p, err := l.QueryToolAudit(ctx, domain.ToolAuditQuery{AnyTenant: true}); err != nil || len(p.Records) != 0 || p.Next != "" {
			t.Fatalf("empty log: %+v, %v", p, err)
		}
		order := []int{3, 0, 4, 1, 2}
		var want []domain.ToolAudit
		for _, i := range order {
			r := rec(i, "acme", "search", "ok")
			if i == 2 {
				r.Status, r.ErrorCode, r.Via, r.DurationMs = "error", "E_TOOL_TIMEOUT", "turn", nil
			}
			appendAll(t, l, r)
			want = append(want, r)
		}
		slices.SortFunc(want, func(a, b domain.ToolAudit) int { return b.At.Compare(a.At) })
		got := all(t, l, domain.ToolAuditQuery{Tenant: "acme"})
		if len(got) != len(want) {
			t.Fatalf("got %v, want %v", ids(got), ids(want))
		}
		for i := range want {
			if !got[i].At.Equal(want[i].At) {
				t.Fatalf("record %d: At %s, want %s", i, got[i].At, want[i].At)
			}
			g, w := got[i], want[i]
			g.At, w.At = time.Time{}, time.Time{}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("record %d:\n got %+v\nwant %+v", i, g, w)
			}
		}
	})

	t.Run("TenantScope", func(t *testing.T) {
		l := newLog(t, 24*time.Hour)
		tenants := []string{"acme", "globex", ""}
		for i := range 30 {
			appendAll(t, l, rec(i, tenants[i%3], "search", "ok"))
		}
		for _, tenant := range tenants {
			for _, limit := range []int{0, 1, 4} {
				got := all(t, l, domain.ToolAuditQuery{Tenant: tenant, Limit: limit})
				if len(got) != 10 {
					t.Fatalf("tenant %q limit %d: %d records, want 10", tenant, limit, len(got))
				}
				for _, r := range got {
					if r.Tenant != tenant {
						t.Fatalf("tenant %q's scope holds %s of tenant %q", tenant, r.CallID, r.Tenant)
					}
				}
				newestFirst(t, got)
			}
		}
		if got := all(t, l, domain.ToolAuditQuery{Tenant: "initech"}); len(got) != 0 {
			t.Fatalf("a tenant without records sees %v", ids(got))
		}
		if got := all(t, l, domain.ToolAuditQuery{AnyTenant: true, Limit: 7}); len(got) != 30 {
			t.Fatalf("every tenant: %d records, want 30", len(got))
		}
	})

	t.Run("Filters", func(t *testing.T) {
		l := newLog(t, 24*time.Hour)
		tools, statuses := []string{"search", "get_menu"}, []string{"ok", "error", "forbidden", "rate_limited"}
		for i := range 40 {
			appendAll(t, l, rec(i, []string{"acme", "globex"}[i%2], tools[(i/2)%2], statuses[(i/4)%4]))
		}
		for _, q := range []domain.ToolAuditQuery{
			{Tenant: "acme", Tool: "search"},
			{Tenant: "acme", Status: "error", Limit: 2},
			{Tenant: "globex", Tool: "get_menu", Status: "rate_limited", Limit: 1},
			{AnyTenant: true, Status: "forbidden", Limit: 3},
			{AnyTenant: true, Tool: "nope"},
		} {
			got := all(t, l, q)
			want := 0
			for i := range 40 {
				r := rec(i, []string{"acme", "globex"}[i%2], tools[(i/2)%2], statuses[(i/4)%4])
				if (q.AnyTenant || r.Tenant == q.Tenant) && (q.Tool == "" || r.Tool == q.Tool) && (q.Status == "" || r.Status == q.Status) {
					want++
				}
			}
			if len(got) != want {
				t.Fatalf("%+v: %d records, want %d", q, len(got), want)
			}
			for _, r := range got {
				if (!q.AnyTenant && r.Tenant != q.Tenant) || (q.Tool != "" && r.Tool != q.Tool) || (q.Status != "" && r.Status != q.Status) {
					t.Fatalf("%+v: listed %+v", q, r)
				}
			}
			newestFirst(t, got)
		}
	})

	t.Run("PagingWithoutGapsOrDuplicates", func(t *testing.T) {
		l := newLog(t, 24*time.Hour)
		var want []string
		for i := range 23 {
			r := rec(i, "acme", "search", "ok")
			if i%5 == 0 {
				r.At = base.Add(5 * time.Millisecond) // ties: the id orders them
			}
			appendAll(t, l, r)
			want = append(want, r.CallID)
		}
		for _, limit := range []int{1, 5, 22, 23, 100} {
			got := all(t, l, domain.ToolAuditQuery{Tenant: "acme", Limit: limit})
			newestFirst(t, got)
			g := ids(got)
			slices.Sort(g)
			w := slices.Clone(want)
			slices.Sort(w)
			if !slices.Equal(g, w) {
				t.Fatalf("limit %d: got %v, want %v", limit, g, w)
			}
		}
		p, err := l.QueryToolAudit(ctx, domain.ToolAuditQuery{Tenant: "acme", Limit: 23})
		if err != nil || len(p.Records) != 23 || p.Next != "" {
			t.Fatalf("a page of exactly every record: %d records, Next %q, %v", len(p.Records), p.Next, err)
		}
		// A record appended after the first page, newer than all, is not
		// in the pages after it, and nothing is lost.
		p1, err := l.QueryToolAudit(ctx, domain.ToolAuditQuery{Tenant: "acme", Limit: 10})
		if err != nil || p1.Next == "" {
			t.Fatalf("first page: %v, Next %q", err, p1.Next)
		}
		appendAll(t, l, rec(100, "acme", "search", "ok"))
		rest := all(t, l, domain.ToolAuditQuery{Tenant: "acme", Limit: 10, After: p1.Next})
		if len(p1.Records)+len(rest) != 23 || slices.Contains(ids(rest), "call-100") {
			t.Fatalf("after a new record: %d + %d records", len(p1.Records), len(rest))
		}
	})

	t.Run("Retention", func(t *testing.T) {
		l := newLog(t, 2*time.Hour)
		now := time.Now().UTC()
		old, kept := rec(1, "acme", "search", "ok"), rec(2, "acme", "search", "ok")
		old.At, kept.At = now.Add(-3*time.Hour), now.Add(-time.Hour)
		older := rec(3, "acme", "search", "ok")
		older.At = now.Add(-50 * time.Hour) // another day
		appendAll(t, l, old, kept, older)
		got := all(t, l, domain.ToolAuditQuery{Tenant: "acme"})
		if !slices.Equal(ids(got), []string{"call-2"}) {
			t.Fatalf("retention 2h: got %v, want [call-2]", ids(got))
		}
	})

	t.Run("ConcurrentAppends", func(t *testing.T) {
		l := newLog(t, 24*time.Hour)
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 25 {
					r := rec(g*25+i, "acme", "search", "ok")
					r.At = base // one instant for all: ties everywhere
					if err := l.AppendToolAudit(ctx, r); err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := all(t, l, domain.ToolAuditQuery{Tenant: "acme", Limit: 17}); len(got) != 200 {
			t.Fatalf("%d records, want 200", len(got))
		}
	})

	t.Run("BadQueries", func(t *testing.T) {
		l := newLog(t, 24*time.Hour)
		for _, q := range []domain.ToolAuditQuery{{Limit: -1}, {Limit: 101}, {After: "not-a-cursor"}, {After: "../../etc/passwd"}} {
			if _, err := l.QueryToolAudit(ctx, q); !errors.Is(err, domain.ErrInvalidID) {
				t.Fatalf("%+v: %v, want ErrInvalidID", q, err)
			}
		}
		if err := l.AppendToolAudit(ctx, domain.ToolAudit{CallID: "c", Tool: "t", Status: "ok"}); err == nil {
			t.Fatal("a record without a time was appended")
		}
	})
}
