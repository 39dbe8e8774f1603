package filestore

import (
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// A copied grant shares no pointer with the cached one: writing through
// the copy's times leaves the cache as it was.
func TestCopyGrantSharesNoPointer(t *testing.T) {
	at := time.Unix(1_800_000_000, 0)
	failed, revoked, exp := at, at, at
	g := domain.Grant{LastRefreshFailedAt: &failed, RevokedAt: &revoked, Token: domain.GrantToken{ExpiresAt: &exp}}
	c := copyGrant(g)
	*c.LastRefreshFailedAt = at.Add(time.Hour)
	*c.RevokedAt = at.Add(time.Hour)
	*c.Token.ExpiresAt = at.Add(time.Hour)
	if !g.LastRefreshFailedAt.Equal(at) || !g.RevokedAt.Equal(at) || !g.Token.ExpiresAt.Equal(at) {
		t.Fatalf("the copy wrote through to the original: %v %v %v", g.LastRefreshFailedAt, g.RevokedAt, g.Token.ExpiresAt)
	}
}
