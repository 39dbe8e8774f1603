//go:build integration

package dynamostore

import (
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/storetest"
)

func TestConformance(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) domain.Store {
		s, _ := newEmulatorStore(t, tableOpts{noTTL: true})
		return s
	})
}
