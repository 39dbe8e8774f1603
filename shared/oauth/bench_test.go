package oauth

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/filestore"
)

// BenchmarkGetAccessTokenReady measures the warm ready path on the
// embedded backends: filesystem store (stat-validated cache), AES-GCM open.
// Budget: 50 µs and 150 allocations per op on a 2-core machine.
func BenchmarkGetAccessTokenReady(b *testing.B) {
	home := b.TempDir()
	st, err := filestore.New(home)
	if err != nil {
		b.Fatal(err)
	}
	kr, _, err := aesseal.Ensure(home, "", false)
	if err != nil {
		b.Fatal(err)
	}
	bun := testBundle(b, "http://127.0.0.1:1")
	m, err := New(Config{Bundle: bun, Store: st, Sealer: kr, Queue: &memQueue{}, StateKeys: kr.DerivedKeys("state"),
		BaseURL: "http://127.0.0.1:8080", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	ref := appRef("global")
	id := GrantID(ref, "demo:team:T1")
	at, _ := kr.Seal(ctx, []byte("access-token-value-of-a-typical-length-0123456789"), domain.Binding{Record: "grant", RecordID: id, Field: "accessToken"})
	rt, _ := kr.Seal(ctx, []byte("refresh-token-value"), domain.Binding{Record: "grant", RecordID: id, Field: "refreshToken"})
	exp := time.Now().Add(24 * time.Hour).UTC()
	if _, err := st.PutGrant(ctx, domain.Grant{ID: id, Provider: "demo", OAuthAppRef: ref, Subject: "demo:team:T1", Flow: domain.FlowAuthorizationCode,
		ScopesGranted: []string{"read", "write"}, Token: domain.GrantToken{TokenType: "Bearer", AccessToken: at, RefreshToken: &rt, ExpiresAt: &exp, IssuedAt: time.Now()}}, 0); err != nil {
		b.Fatal(err)
	}
	req := TokenRequest{AppRef: ref, Auth: auth("demo:team:T1", "")}
	if r := m.GetAccessToken(ctx, req); r.Status != StatusReady {
		b.Fatalf("warm-up: %+v", r)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if r := m.GetAccessToken(ctx, req); r.Status != StatusReady {
			b.Fatalf("%+v", r)
		}
	}
}
