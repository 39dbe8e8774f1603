package dynamostore

import (
	"testing"

	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// The turn store conformance suite on the in-memory table: the keys,
// conditions and item layout, without an emulator.
func TestTurnConformance(t *testing.T) {
	turnstoretest.Run(t, func(t *testing.T) turn.Store {
		s, err := New(newMemTable(), "agentauth-test")
		if err != nil {
			t.Fatal(err)
		}
		return s.Turns()
	})
}
