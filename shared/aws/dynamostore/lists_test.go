package dynamostore

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// The operator queries on the in-memory table, with small Query pages.
func TestOperatorQueriesFake(t *testing.T) {
	tables := map[storetest.OperatorStore]*memTable{}
	storetest.RunOperatorQueries(t, func(t *testing.T) storetest.OperatorStore {
		m := newMemTable()
		s := newMemStore(t, m)
		s.scanLimit = 3
		tables[s] = m
		return s
	}, func(t *testing.T, s storetest.OperatorStore, id string) {
		m := tables[s]
		m.mu.Lock()
		defer m.mu.Unlock()
		m.items[grantPrefix+id][attrDoc] = str("{" + turnstoretest.Canary)
	})
}

func TestInstanceQueriesFake(t *testing.T) {
	turnstoretest.RunQueries(t, func(t *testing.T) turn.Store {
		s := newMemStore(t, newMemTable())
		s.scanLimit = 3
		return s.Turns(nil)
	})
}

// What a page costs follows the page: one Query per range read and one
// BatchGetItem, whatever the table holds; a refresh writes no list key.
func TestQueryGrantsCalls(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := newMemStore(t, m)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var last domain.Grant
	for i := range 400 {
		g := storetest.SampleGrant(storetest.NewGrantID())
		g.CreatedAt, g.Tenant = t0.Add(time.Duration(i)*time.Minute), fmt.Sprint("t", i%4)
		w, err := s.PutGrant(ctx, g, 0)
		if err != nil {
			t.Fatal(err)
		}
		last = w
	}
	before := maps.Clone(m.items[grantPrefix+last.ID])
	last.UpdatedAt = last.UpdatedAt.Add(time.Hour)
	if _, err := s.PutGrant(ctx, last, last.Version); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{attrListKey, attrListAll, attrListSort} {
		if !reflect.DeepEqual(before[a], m.items[grantPrefix+last.ID][a]) {
			t.Fatalf("a refresh changed %s", a)
		}
	}
	for _, tc := range []struct {
		q           domain.GrantQuery
		query, gets int
	}{
		{domain.GrantQuery{AnyTenant: true, Revoked: ptr(false)}, 2, 1}, // the active and failing ranges, merged
		{domain.GrantQuery{AnyTenant: true}, 3, 1},                      // active, failing and revoked, merged
		{domain.GrantQuery{Tenant: "t1", Limit: 60}, 3, 1},
	} {
		m.takeCalls()
		p, err := s.QueryGrants(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		limit, _ := domain.PageLimit(tc.q.Limit)
		if len(p.Grants) != limit || p.Next == "" {
			t.Fatalf("%+v: %d grants, next %q", tc.q, len(p.Grants), p.Next)
		}
		calls := m.takeCalls()
		if calls["Query"] != tc.query || calls["BatchGetItem"] != tc.gets || calls["Scan"] != 0 || len(calls) != 2 {
			t.Fatalf("%+v: calls %v", tc.q, calls)
		}
	}
}

func ptr[T any](v T) *T { return &v }
