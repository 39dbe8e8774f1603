package app

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
)

// The console is served by the runtime handler (serve, gettoken) and not
// by the callback or tools handlers; its client secret by reference is
// read through the backends' secrets, and a missing one stops the build
// naming the variable.
func TestConsoleMounted(t *testing.T) {
	opts := Options{RuntimeAuth: httpapi.BearerToken{Token: domain.NewSecret("tok")}}
	cfg := setup(t, teamApp)
	cfg.Console = &config.Console{Issuer: "https://login.example.com", ClientID: "console", SecretName: "demo", SecretKey: "clientSecret"}
	a, err := build(t, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	get := func(h http.Handler, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec
	}
	for name, h := range map[string]http.Handler{"serve": a.Handler(), "gettoken": a.RuntimeHandler()} {
		if rec := get(h, "/console/"); rec.Code != http.StatusSeeOther || !strings.HasPrefix(rec.Header().Get("Location"), "/console/signin") {
			t.Errorf("%s: GET /console/ %d %s", name, rec.Code, rec.Header().Get("Location"))
		}
	}
	if rec := get(a.CallbackHandler(), "/console/"); rec.Code != http.StatusNotFound {
		t.Errorf("callback function: GET /console/ %d", rec.Code)
	}
	cfg = setup(t, teamApp)
	cfg.Console = &config.Console{Issuer: "https://login.example.com", ClientID: "console", SecretName: "missing", SecretKey: "clientSecret"}
	if _, err := build(t, cfg, opts); err == nil || !strings.Contains(err.Error(), config.ConsoleClientSecretRef) {
		t.Fatalf("a missing client secret: %v", err)
	}
}

func TestLoopbackHTTP(t *testing.T) {
	for base, want := range map[string]bool{
		"http://127.0.0.1:8080": true, "http://localhost:8080": true, "http://[::1]:8080": true,
		"http://abc123.execute-api.localhost:4566": true,
		"https://127.0.0.1":                        false, "http://auth.example": false, "http://localhost.example.com": false, "": false,
	} {
		if got := loopbackHTTP(base); got != want {
			t.Errorf("loopbackHTTP(%q) = %v, want %v", base, got, want)
		}
	}
}
