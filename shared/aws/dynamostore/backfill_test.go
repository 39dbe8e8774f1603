package dynamostore

import (
	"context"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// Items written before the list indexes are listed once the backfill has
// given them their list attributes; a second run has nothing to do.
func TestBackfillListIndex(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := newMemStore(t, m)
	s.scanLimit = 3
	g, err := s.PutGrant(ctx, storetest.SampleGrant(storetest.NewGrantID()), 0)
	if err != nil {
		t.Fatal(err)
	}
	sess := storetest.SampleSession(storetest.NewSessionID())
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	k := turnstoretest.Key(t)
	if err := s.Turns(nil).Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	broken := storetest.NewGrantID()
	if _, err := s.PutGrant(ctx, storetest.SampleGrant(broken), 0); err != nil {
		t.Fatal(err)
	}
	// As versions before the index wrote them.
	m.mu.Lock()
	for pk, item := range m.items {
		if strings.HasPrefix(pk, grantPrefix) || strings.HasPrefix(pk, sessionPrefix) || strings.HasPrefix(pk, turnInstPrefix) {
			for _, a := range []string{attrListKey, attrListAll, attrListSort, attrInstance} {
				delete(item, a)
			}
		}
	}
	m.items[grantPrefix+broken][attrDoc] = str("{")
	m.mu.Unlock()
	count := func() (int, int, int) {
		gp, err := s.QueryGrants(ctx, domain.GrantQuery{AnyTenant: true})
		if err != nil {
			t.Fatal(err)
		}
		sp, err := s.QuerySessions(ctx, domain.SessionQuery{AnyTenant: true})
		if err != nil {
			t.Fatal(err)
		}
		ip, err := s.Turns(nil).(turn.InstanceQuerier).QueryInstances(ctx, turn.InstanceQuery{})
		if err != nil {
			t.Fatal(err)
		}
		return len(gp.Grants), len(sp.Sessions), len(ip.Instances)
	}
	if a, b, c := count(); a+b+c != 0 {
		t.Fatalf("listed before the backfill: %d, %d, %d", a, b, c)
	}
	n, bad, err := s.BackfillListIndex(ctx, nil)
	if err != nil || n != 3 || len(bad) != 1 {
		t.Fatalf("backfill: %d, %v, %v", n, bad, err)
	}
	if a, b, c := count(); a != 1 || b != 1 || c != 1 {
		t.Fatalf("listed after the backfill: %d, %d, %d", a, b, c)
	}
	if p, _ := s.QueryGrants(ctx, domain.GrantQuery{AnyTenant: true}); p.Grants[0].ID != g.ID {
		t.Fatalf("grant %s", p.Grants[0].ID)
	}
	if n, _, err := s.BackfillListIndex(ctx, nil); err != nil || n != 0 {
		t.Fatalf("second backfill: %d, %v", n, err)
	}
}

// The progress variant reports what the scan read, what it set and which
// items it could not read, as it goes, and ends where BackfillListIndex
// would.
func TestBackfillListIndexProgress(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := newMemStore(t, m)
	s.scanLimit = 2
	ids := []string{storetest.NewGrantID(), storetest.NewGrantID(), storetest.NewGrantID()}
	for _, id := range ids {
		if _, err := s.PutGrant(ctx, storetest.SampleGrant(id), 0); err != nil {
			t.Fatal(err)
		}
	}
	sess := storetest.SampleSession(storetest.NewSessionID()) // listed already: examined, not set
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	total := len(m.items)
	for _, id := range ids {
		for _, a := range []string{attrListKey, attrListAll, attrListSort} {
			delete(m.items[grantPrefix+id], a)
		}
	}
	m.items[grantPrefix+ids[1]][attrDoc] = str("{")
	m.mu.Unlock()
	var seen []BackfillProgress
	n, bad, err := s.BackfillListIndexProgress(ctx, nil, func(p BackfillProgress) { seen = append(seen, p) })
	if err != nil || n != 2 || len(bad) != 1 || !strings.Contains(bad[0].Error(), ids[1]) {
		t.Fatalf("backfill: %d, %v, %v", n, bad, err)
	}
	last := seen[len(seen)-1]
	if last.Examined != total || last.Set != 2 || len(last.Unreadable) != 1 || last.Unreadable[0] != grantPrefix+ids[1] {
		t.Fatalf("last progress %+v, want %d examined, 2 set, %s unreadable", last, total, grantPrefix+ids[1])
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Examined < seen[i-1].Examined || seen[i].Set < seen[i-1].Set || len(seen[i].Unreadable) < len(seen[i-1].Unreadable) {
			t.Fatalf("progress went back: %+v then %+v", seen[i-1], seen[i])
		}
	}
	if len(seen) < total/2+3 {
		t.Fatalf("%d progress calls: want one per page and per item set or unreadable", len(seen))
	}
	if p, _ := s.QueryGrants(ctx, domain.GrantQuery{AnyTenant: true}); len(p.Grants) != 2 {
		t.Fatalf("%d grants listed after the backfill, want 2", len(p.Grants))
	}
}
