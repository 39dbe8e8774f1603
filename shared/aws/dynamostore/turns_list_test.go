package dynamostore

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// TestTurnListNamesTheUnreadable: an instance item whose document does
// not decode is named by its key hash beside the instances that read,
// instead of failing the listing (issue 16).
func TestTurnListNamesTheUnreadable(t *testing.T) {
	m := newMemTable()
	var broken turn.InstanceKey
	u := turnstoretest.RunUnreadable(t, turnStoreOn(t, m), func(t *testing.T, k turn.InstanceKey) {
		broken = k
		m.mu.Lock()
		defer m.mu.Unlock()
		item, ok := m.items[turnInstPK(turnHash(k))]
		if !ok {
			t.Fatal("no instance item")
		}
		item[attrDoc] = &types.AttributeValueMemberS{Value: `{"instance":"` + turnstoretest.Canary}
	})
	if u.ID != turnHash(broken)[:12] {
		t.Fatalf("unreadable %+v, want the id %s", u, turnHash(broken)[:12])
	}
}
