package oauth

import (
	"context"
	"testing"
)

// A session records the tenant its request's claims name, and the grant
// its consent makes carries it: the console shows a tenant admin theirs.
func TestSessionAndGrantCarryTheRequestsTenant(t *testing.T) {
	for _, tc := range []struct {
		name, claim string
		claims      map[string]any
		want        string
	}{
		{"default claim", "", map[string]any{"tenant_id": "acme"}, "acme"},
		{"configured path", "org.id", map[string]any{"org": map[string]any{"id": "globex"}, "tenant_id": "acme"}, "globex"},
		{"no tenant", "", map[string]any{"sub": "alice"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			m, err := New(Config{Bundle: h.bundle, Store: h.store, Sealer: h.keyring, Queue: h.queue,
				StateKeys: h.keyring.DerivedKeys("state"), BaseURL: "http://127.0.0.1:8080", Now: h.clock.Now, TenantClaim: tc.claim})
			if err != nil {
				t.Fatal(err)
			}
			h.m = m
			res := h.request("global", func(r *TokenRequest) { r.Auth.Claims = tc.claims })
			if res.Status != StatusAuthorizationRequired {
				t.Fatalf("want authorization_required, got %+v", res)
			}
			s, err := h.store.GetSession(context.Background(), res.AuthSessionID)
			if err != nil || s.Tenant != tc.want {
				t.Fatalf("session tenant %q (%v), want %q", s.Tenant, err, tc.want)
			}
			code, state := h.p.approve(res.AuthorizationURL, "demo:team:T1")
			out, err := m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], map[string][]string{"code": {code}, "state": {state}})
			if err != nil {
				t.Fatal(err)
			}
			g, err := h.store.GetGrant(context.Background(), out.GrantID)
			if err != nil || g.Tenant != tc.want {
				t.Fatalf("grant tenant %q (%v), want %q", g.Tenant, err, tc.want)
			}
		})
	}
}
