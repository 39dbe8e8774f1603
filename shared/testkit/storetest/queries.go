package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// OperatorStore is a store that also answers the console's lists.
type OperatorStore interface {
	domain.Store
	domain.OperatorQueries
}

// RunOperatorQueries runs the conformance suite of domain.OperatorQueries:
// filters, tenant scoping (a tenant's query never returns another
// tenant's record: the console relies on it), newest first, paging with
// After with no duplicate or gap while records are added, Limit bounds,
// unreadable records reported, the count cap. newStore returns a fresh,
// empty store. corruptGrant breaks the stored grant id so that it no
// longer decodes (nil: that case is skipped).
func RunOperatorQueries(t *testing.T, newStore func(t *testing.T) OperatorStore, corruptGrant func(t *testing.T, s OperatorStore, id string)) {
	tests := []struct {
		name string
		run  func(t *testing.T, s OperatorStore)
	}{
		{"GrantFilters", testGrantFilters},
		{"GrantRevokeMoves", testGrantRevokeMoves},
		{"GrantPagingWhileAdding", testGrantPagingWhileAdding},
		{"GrantLimits", testGrantLimits},
		{"SessionFilters", testSessionFilters},
		{"CountGrants", testCountGrants},
		{"GrantRefreshFailingMoves", testGrantRefreshFailingMoves},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newStore(t)) })
	}
	if corruptGrant != nil {
		t.Run("GrantUnreadable", func(t *testing.T) {
			s := newStore(t)
			ctx := context.Background()
			ids := seedGrants(t, s, 3, func(i int, g *domain.Grant) { g.Tenant = "acme" })
			corruptGrant(t, s, ids[1].ID)
			got, bad := allGrants(t, s, domain.GrantQuery{Tenant: "acme", Limit: 2})
			if len(bad) != 1 {
				t.Fatalf("unreadable: %v, want one", bad)
			}
			if want := []string{ids[2].ID, ids[0].ID}; !slices.Equal(grantIDs(got), want) {
				t.Fatalf("grants %v, want %v", grantIDs(got), want)
			}
			_ = ctx
		})
	}
}

// qt0 dates the suite's records: newest first means higher i first.
var qt0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seedGrants writes n grants created a minute apart (i = 0 oldest), each
// as mut leaves it.
func seedGrants(t *testing.T, s domain.Store, n int, mut func(i int, g *domain.Grant)) []domain.Grant {
	t.Helper()
	out := make([]domain.Grant, n)
	for i := range n {
		g := SampleGrant(NewGrantID())
		g.CreatedAt = qt0.Add(time.Duration(i) * time.Minute)
		g.Subject = fmt.Sprint("user-", i)
		mut(i, &g)
		w, err := s.PutGrant(context.Background(), g, 0)
		noErr(t, err, "PutGrant")
		out[i] = w
	}
	return out
}

// allGrants pages through q to the end, checking each page's bounds.
func allGrants(t *testing.T, s domain.OperatorQueries, q domain.GrantQuery) ([]domain.Grant, []error) {
	t.Helper()
	var out []domain.Grant
	var bad []error
	limit, _ := domain.PageLimit(q.Limit)
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
		p, err := s.QueryGrants(context.Background(), q)
		noErr(t, err, "QueryGrants")
		if len(p.Grants) > limit {
			t.Fatalf("a page of %d grants, limit %d", len(p.Grants), limit)
		}
		out = append(out, p.Grants...)
		bad = append(bad, p.Unreadable...)
		if p.Next == "" {
			return out, bad
		}
		if p.Next == q.After {
			t.Fatalf("Next %q repeats After", p.Next)
		}
		q.After = p.Next
	}
}

func grantIDs(gs []domain.Grant) []string {
	ids := make([]string, len(gs))
	for i, g := range gs {
		ids[i] = g.ID
	}
	return ids
}

// newestFirst is the ids of gs that keep holds, newest first.
func newestFirst(gs []domain.Grant, keep func(domain.Grant) bool) []string {
	var sel []domain.Grant
	for _, g := range gs {
		if keep(g) {
			sel = append(sel, g)
		}
	}
	slices.SortFunc(sel, func(a, b domain.Grant) int {
		return compareKeys(domain.ListKey(a.CreatedAt, a.ID), domain.ListKey(b.CreatedAt, b.ID))
	})
	return grantIDs(sel)
}

func compareKeys(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ptr[T any](v T) *T { return &v }

func testGrantFilters(t *testing.T, s OperatorStore) {
	tenants := []string{"acme", "globex", ""}
	apps := []string{"slack-bot", "github"}
	gs := seedGrants(t, s, 18, func(i int, g *domain.Grant) {
		g.Tenant = tenants[i%3]
		g.OAuthAppRef.Name = apps[i%2]
		if i%4 == 0 {
			g.Subject = "shared-subject"
		}
		if i%5 == 0 {
			g.Revoked, g.RevokedReason = true, domain.RevokedByRequest
			at := g.CreatedAt
			g.RevokedAt = &at
		}
	})
	for _, q := range []domain.GrantQuery{
		{Tenant: "acme"}, {Tenant: "globex"}, {Tenant: ""}, {AnyTenant: true}, {Tenant: "initech"},
		{Tenant: "acme", App: "github"}, {AnyTenant: true, App: "slack-bot"},
		{AnyTenant: true, Subject: "shared-subject"}, {Tenant: "", Subject: "shared-subject"},
		{AnyTenant: true, Revoked: ptr(true)}, {AnyTenant: true, Revoked: ptr(false)},
		{Tenant: "globex", Revoked: ptr(false), App: "slack-bot"}, {Tenant: "acme", Revoked: ptr(true)},
		{AnyTenant: true, App: "none"},
	} {
		for _, limit := range []int{0, 1, 4} {
			q.Limit = limit
			t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) {
				got, bad := allGrants(t, s, q)
				if len(bad) != 0 {
					t.Fatalf("unreadable: %v", bad)
				}
				want := newestFirst(gs, func(g domain.Grant) bool {
					return (q.AnyTenant || g.Tenant == q.Tenant) && (q.App == "" || g.OAuthAppRef.Name == q.App) &&
						(q.Subject == "" || g.Subject == q.Subject) && (q.Revoked == nil || g.Revoked == *q.Revoked)
				})
				if !slices.Equal(grantIDs(got), want) {
					t.Fatalf("grants %v, want %v", grantIDs(got), want)
				}
				for _, g := range got {
					if !q.AnyTenant && g.Tenant != q.Tenant {
						t.Fatalf("tenant %q's query returned a grant of tenant %q", q.Tenant, g.Tenant)
					}
				}
			})
		}
	}
}

// A revoked grant leaves the active list and joins the revoked one; a
// refresh (the same grant written again) changes neither.
func testGrantRevokeMoves(t *testing.T, s OperatorStore) {
	ctx := context.Background()
	gs := seedGrants(t, s, 3, func(i int, g *domain.Grant) { g.Tenant = "acme" })
	g := gs[1]
	g.UpdatedAt = g.UpdatedAt.Add(time.Hour)
	g, err := s.PutGrant(ctx, g, g.Version) // a refresh
	noErr(t, err, "refresh")
	active, _ := allGrants(t, s, domain.GrantQuery{Tenant: "acme", Revoked: ptr(false)})
	if want := []string{gs[2].ID, gs[1].ID, gs[0].ID}; !slices.Equal(grantIDs(active), want) {
		t.Fatalf("active after a refresh %v, want %v", grantIDs(active), want)
	}
	g.Revoked, g.RevokedReason = true, domain.RevokedByRequest
	_, err = s.PutGrant(ctx, g, g.Version)
	noErr(t, err, "revoke")
	active, _ = allGrants(t, s, domain.GrantQuery{Tenant: "acme", Revoked: ptr(false)})
	revoked, _ := allGrants(t, s, domain.GrantQuery{Tenant: "acme", Revoked: ptr(true)})
	all, _ := allGrants(t, s, domain.GrantQuery{Tenant: "acme"})
	if !slices.Equal(grantIDs(active), []string{gs[2].ID, gs[0].ID}) || !slices.Equal(grantIDs(revoked), []string{gs[1].ID}) ||
		!slices.Equal(grantIDs(all), []string{gs[2].ID, gs[1].ID, gs[0].ID}) {
		t.Fatalf("after a revoke: active %v, revoked %v, all %v", grantIDs(active), grantIDs(revoked), grantIDs(all))
	}
	if !revoked[0].Revoked {
		t.Fatal("the revoked list holds the grant as it was before")
	}
}

// A grant whose refreshes start failing is counted as failing (and still
// active), listed among the active ones, once; when a refresh succeeds
// again it is no longer failing. The count is scoped like the others.
func testGrantRefreshFailingMoves(t *testing.T, s OperatorStore) {
	ctx := context.Background()
	gs := seedGrants(t, s, 4, func(i int, g *domain.Grant) {
		g.Tenant = "acme"
		if i == 3 {
			g.Tenant = "globex"
		}
	})
	failing := func(tenant string, any bool) int {
		t.Helper()
		n, capped, err := s.CountFailingGrants(ctx, tenant, any, 10)
		noErr(t, err, "CountFailingGrants")
		if capped {
			t.Fatal("capped under the limit")
		}
		return n
	}
	if n := failing("acme", false); n != 0 {
		t.Fatalf("failing before any failure: %d", n)
	}
	at := qt0.Add(time.Hour)
	g := gs[1]
	g.RefreshFailures, g.LastRefreshError, g.LastRefreshFailedAt = 2, "temporarily_unavailable", &at
	g, err := s.PutGrant(ctx, g, g.Version)
	noErr(t, err, "record a failure")
	h := gs[3]
	h.RefreshFailures = 1
	_, err = s.PutGrant(ctx, h, h.Version)
	noErr(t, err, "record a failure")
	if a, b, c := failing("acme", false), failing("globex", false), failing("", true); a != 1 || b != 1 || c != 2 {
		t.Fatalf("failing: acme %d, globex %d, all %d; want 1, 1, 2", a, b, c)
	}
	if active, _, _, err := s.CountGrants(ctx, "acme", false, 10); err != nil || active != 3 {
		t.Fatalf("active (failing among them): %d, %v; want 3", active, err)
	}
	// The cap counts the failing among the active: two active and one
	// failing pass a limit of 2 (and of 1), not one of 3.
	for _, tc := range []struct {
		limit, active int
		capped        bool
	}{{1, 1, true}, {2, 2, true}, {3, 3, false}} {
		if active, _, capped, err := s.CountGrants(ctx, "acme", false, tc.limit); err != nil || active != tc.active || capped != tc.capped {
			t.Fatalf("CountGrants(acme, limit %d) = %d, capped %v, %v; want %d, %v", tc.limit, active, capped, err, tc.active, tc.capped)
		}
	}
	active, _ := allGrants(t, s, domain.GrantQuery{Tenant: "acme", Revoked: ptr(false)})
	revoked, _ := allGrants(t, s, domain.GrantQuery{Tenant: "acme", Revoked: ptr(true)})
	all, _ := allGrants(t, s, domain.GrantQuery{Tenant: "acme"})
	want := []string{gs[2].ID, gs[1].ID, gs[0].ID}
	if !slices.Equal(grantIDs(active), want) || len(revoked) != 0 || !slices.Equal(grantIDs(all), want) {
		t.Fatalf("with one failing: active %v, revoked %v, all %v; want %v", grantIDs(active), grantIDs(revoked), grantIDs(all), want)
	}
	g.RefreshFailures, g.LastRefreshError, g.LastRefreshFailedAt = 0, "", nil // a refresh succeeded
	_, err = s.PutGrant(ctx, g, g.Version)
	noErr(t, err, "recover")
	if n := failing("acme", false); n != 0 {
		t.Fatalf("failing after a success: %d", n)
	}
	if all, _ := allGrants(t, s, domain.GrantQuery{Tenant: "acme", Revoked: ptr(false)}); !slices.Equal(grantIDs(all), want) {
		t.Fatalf("after the recovery: %v, want %v", grantIDs(all), want)
	}
	if _, _, err := s.CountFailingGrants(ctx, "acme", false, 0); !errors.Is(err, domain.ErrInvalidID) {
		t.Errorf("CountFailingGrants with limit 0: %v, want ErrInvalidID", err)
	}
}

// Records added while an operator pages (newer ones, and older ones past
// the pages read) never make a page repeat or skip a record that was
// there when paging began.
func testGrantPagingWhileAdding(t *testing.T, s OperatorStore) {
	ctx := context.Background()
	gs := seedGrants(t, s, 12, func(i int, g *domain.Grant) { g.Tenant = "acme" })
	var wg sync.WaitGroup
	stop := make(chan struct{})
	stopped := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopped() // also when a check below ends the test
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			g := SampleGrant(NewGrantID())
			g.Tenant = "acme"
			// Alternately newer than all and older than all.
			g.CreatedAt = qt0.Add(time.Duration(100+i) * time.Minute)
			if i%2 == 1 {
				g.CreatedAt = qt0.Add(-time.Duration(i) * time.Minute)
			}
			if _, err := s.PutGrant(ctx, g, 0); err != nil {
				t.Errorf("PutGrant while paging: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	seen := map[string]int{}
	var keys []string
	q := domain.GrantQuery{Tenant: "acme", Limit: 2}
	for {
		p, err := s.QueryGrants(ctx, q)
		noErr(t, err, "QueryGrants")
		for _, g := range p.Grants {
			seen[g.ID]++
			keys = append(keys, domain.ListKey(g.CreatedAt, g.ID))
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	stopped()
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("grant %s listed %d times", id, n)
		}
	}
	for _, g := range gs {
		if seen[g.ID] != 1 {
			t.Fatalf("grant %s, there all along, was skipped", g.ID)
		}
	}
	if !slices.IsSorted(keys) {
		t.Fatal("pages are not newest first")
	}
}

func testGrantLimits(t *testing.T, s OperatorStore) {
	ctx := context.Background()
	seedGrants(t, s, domain.DefaultPageLimit+2, func(i int, g *domain.Grant) { g.Tenant = "acme" })
	p, err := s.QueryGrants(ctx, domain.GrantQuery{Tenant: "acme"})
	noErr(t, err, "QueryGrants")
	if len(p.Grants) != domain.DefaultPageLimit || p.Next == "" {
		t.Fatalf("default page: %d grants, next %q", len(p.Grants), p.Next)
	}
	p, err = s.QueryGrants(ctx, domain.GrantQuery{Tenant: "acme", After: p.Next, Limit: domain.MaxPageLimit})
	noErr(t, err, "second page")
	if len(p.Grants) != 2 || p.Next != "" {
		t.Fatalf("last page: %d grants, next %q", len(p.Grants), p.Next)
	}
	p, err = s.QueryGrants(ctx, domain.GrantQuery{Tenant: "acme", Limit: domain.MaxPageLimit})
	noErr(t, err, "a page of 100")
	if len(p.Grants) != domain.DefaultPageLimit+2 || p.Next != "" {
		t.Fatalf("page of 100: %d grants, next %q", len(p.Grants), p.Next)
	}
	for _, q := range []domain.GrantQuery{{Limit: -1}, {Limit: domain.MaxPageLimit + 1}, {After: "../grants"}, {After: "grant-0123"}} {
		if _, err := s.QueryGrants(ctx, q); !errors.Is(err, domain.ErrInvalidID) {
			t.Errorf("QueryGrants(%+v): %v, want ErrInvalidID", q, err)
		}
		if _, err := s.QuerySessions(ctx, domain.SessionQuery{Limit: q.Limit, After: q.After}); !errors.Is(err, domain.ErrInvalidID) {
			t.Errorf("QuerySessions(%+v): %v, want ErrInvalidID", q, err)
		}
	}
}

func testSessionFilters(t *testing.T, s OperatorStore) {
	ctx := context.Background()
	tenants := []string{"acme", "globex", ""}
	var all []domain.Session
	for i := range 15 {
		sess := SampleSession(NewSessionID())
		sess.EventPending = false
		sess.Tenant = tenants[i%3]
		sess.CreatedAt = qt0.Add(time.Duration(i) * time.Minute)
		sess.ExpiresAt = sess.CreatedAt.Add(10 * time.Minute)
		if i%2 == 0 {
			sess.OAuthAppRef.Name = "github"
		}
		noErr(t, s.CreateSession(ctx, sess), "CreateSession")
		switch i % 4 {
		case 1:
			sess.Status, sess.StatusReason = domain.SessionFailed, "access_denied"
			var err error
			sess, err = s.UpdateSession(ctx, sess)
			noErr(t, err, "fail a session")
		case 2:
			sess.Status, sess.StatusReason = domain.SessionFailed, "subject_mismatch"
			var err error
			sess, err = s.UpdateSession(ctx, sess)
			noErr(t, err, "fail a session")
		case 3:
			g := SampleGrant(NewGrantID())
			var err error
			sess, _, err = s.CompleteSession(ctx, sess.ID, sess.CreatedAt.Add(time.Minute), g)
			noErr(t, err, "complete a session")
		}
		all = append(all, sess)
	}
	since := qt0.Add(6 * time.Minute)
	for _, q := range []domain.SessionQuery{
		{Tenant: "acme"}, {Tenant: ""}, {AnyTenant: true}, {Tenant: "initech"},
		{AnyTenant: true, Status: domain.SessionFailed}, {AnyTenant: true, Status: domain.SessionFailed, Reason: "access_denied"},
		{Tenant: "globex", Status: domain.SessionCompleted}, {AnyTenant: true, App: "github"}, {Tenant: "acme", App: "slack-bot"},
		{AnyTenant: true, Since: since}, {Tenant: "acme", Since: since, Status: domain.SessionPending},
		{AnyTenant: true, Reason: "subject_mismatch"},
	} {
		for _, limit := range []int{0, 2} {
			q.Limit = limit
			t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) {
				var got []string
				for pages := 0; ; pages++ {
					p, err := s.QuerySessions(ctx, q)
					noErr(t, err, "QuerySessions")
					if len(p.Unreadable) != 0 || pages > 100 {
						t.Fatalf("unreadable %v, pages %d", p.Unreadable, pages)
					}
					for _, sess := range p.Sessions {
						if !q.AnyTenant && sess.Tenant != q.Tenant {
							t.Fatalf("tenant %q's query returned a session of tenant %q", q.Tenant, sess.Tenant)
						}
						got = append(got, sess.ID)
					}
					if p.Next == "" {
						break
					}
					q.After = p.Next
				}
				var want []string
				for i := len(all) - 1; i >= 0; i-- {
					sess := all[i]
					if (q.AnyTenant || sess.Tenant == q.Tenant) && (q.App == "" || sess.OAuthAppRef.Name == q.App) &&
						(q.Status == "" || sess.Status == q.Status) && (q.Reason == "" || sess.StatusReason == q.Reason) &&
						!sess.CreatedAt.Before(q.Since) {
						want = append(want, sess.ID)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("sessions %v, want %v", got, want)
				}
			})
		}
	}
}

func testCountGrants(t *testing.T, s OperatorStore) {
	ctx := context.Background()
	seedGrants(t, s, 10, func(i int, g *domain.Grant) {
		g.Tenant = "acme"
		if i >= 7 {
			g.Tenant = "globex"
		}
		g.Revoked = i%3 == 0 // acme: 0, 3, 6 revoked; globex: 9
	})
	for _, tc := range []struct {
		tenant          string
		any             bool
		limit           int
		active, revoked int
		capped          bool
	}{
		{"acme", false, 10, 4, 3, false},
		{"acme", false, 4, 4, 3, false},
		{"acme", false, 3, 3, 3, true},
		{"acme", false, 2, 2, 2, true},
		{"globex", false, 10, 2, 1, false},
		{"", false, 10, 0, 0, false},
		{"", true, 100, 6, 4, false},
		{"", true, 5, 5, 4, true},
	} {
		a, r, capped, err := s.CountGrants(ctx, tc.tenant, tc.any, tc.limit)
		noErr(t, err, "CountGrants")
		if a != tc.active || r != tc.revoked || capped != tc.capped {
			t.Errorf("CountGrants(%q, %v, %d) = %d, %d, %v; want %d, %d, %v", tc.tenant, tc.any, tc.limit, a, r, capped, tc.active, tc.revoked, tc.capped)
		}
	}
	if _, _, _, err := s.CountGrants(ctx, "acme", false, 0); !errors.Is(err, domain.ErrInvalidID) {
		t.Errorf("CountGrants with limit 0: %v, want ErrInvalidID", err)
	}
}
