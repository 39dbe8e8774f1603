package toolsapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
)

// BenchmarkToolsRoute is GET /v1/agents/tools end to end in the process:
// ES256 JWT verification (keys cached), the cached resolution and the JSON
// answer.
func BenchmarkToolsRoute(b *testing.B) {
	iss := jwttest.Start(b)
	v, err := jwtauth.New(jwtauth.Config{JWKSURL: iss.URL, Issuer: jwttest.Issuer, Audience: jwttest.Audience})
	if err != nil {
		b.Fatal(err)
	}
	h := newHarness(b, v, false).h
	tok := iss.Mint(b, map[string]any{"sub": "alice", "scope": "tools:echo", "tenant_id": "a"})
	req := httptest.NewRequest("GET", "/v1/agents/tools", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	}
}
