package httpapi

import (
	"context"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

// A consent the token route starts is stored as started by REST.
func TestTokenRouteConsentStartedByREST(t *testing.T) {
	f := newFixture(t)
	rec := f.do("POST", "/v1/oauth/token", `{"oauthAppRef":"OAuthApp/team","turn":{"auth":{"subjects":{"global":"demo:team:T9"}}}}`, nil)
	m := decode(t, rec)
	id, _ := m["authSessionId"].(string)
	if m["status"] != "authorization_required" || id == "" {
		t.Fatalf("token route: %v", m)
	}
	s, err := f.store.GetSession(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if s.StartedBy != domain.StartedByREST {
		t.Fatalf("StartedBy %q, want %q", s.StartedBy, domain.StartedByREST)
	}
}
