package dynamostore

import (
	"testing"

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
