package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// TestConsoleSignInThroughTheProvider signs operators in with the
// project's OAuth core (oauth.SignIn) against the demo provider's
// agentauth-console client, through its real login and consent pages in
// Chromium: the console's role claims, chosen by login name, arrive in the
// verified ID token.
func TestConsoleSignInThroughTheProvider(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)

	// The console's callback: the browser lands here with code and state.
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "<!DOCTYPE html><title>callback</title>signed in")
	}))
	t.Cleanup(callback.Close)
	redirect := callback.URL + "/console/auth/callback"

	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{Env: []string{"PROVIDER_CONSOLE_REDIRECTS=" + redirect}})
	browser := e2ekit.StartBrowser(t)

	signIn, err := oauth.NewSignIn(oauth.SignInConfig{
		Issuer:       p.Issuer,
		ClientID:     "agentauth-console",
		ClientSecret: domain.NewSecret("console-secret"),
		RedirectURL:  redirect,
		Keys:         [][]byte{[]byte("e2e-console-signin-key-0123456789abcdef")},
	})
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		login  string
		roles  []any  // nil: no agentauth_roles claim
		tenant string // "": no tenant_id claim
	}{
		{login: "admin", roles: []any{"agentauth:platform-admin"}},
		{login: "acme-admin", roles: []any{"agentauth:admin"}, tenant: "acme"},
		{login: "demo-admin", roles: []any{"agentauth:admin"}, tenant: "demo"},
		{login: "alice"},
	} {
		t.Run(tc.login, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			authURL, pending, err := signIn.Begin(ctx, "/console/grants")
			if err != nil {
				t.Fatal(err)
			}
			res, err := browser.Authorize(ctx, authURL, tc.login)
			if err != nil {
				t.Fatalf("browser: %v", err)
			}
			if !strings.HasPrefix(res.FinalURL, redirect+"?") {
				t.Fatalf("browser ended at %s (status %d), want the callback", e2ekit.RedactURL(res.FinalURL), res.Status)
			}
			u, err := url.Parse(res.FinalURL)
			if err != nil {
				t.Fatal(err)
			}
			got, err := signIn.Finish(ctx, u.Query(), pending)
			if err != nil {
				t.Fatalf("Finish: %v", err)
			}
			if got.ReturnTo != "/console/grants" || got.Claims["sub"] != tc.login || got.Claims["aud"] != "agentauth-console" {
				t.Fatalf("signed in as %+v", got)
			}
			if d := time.Until(got.Expiry); d < 50*time.Minute || d > 61*time.Minute {
				t.Fatalf("ID token expires in %s, want the provider's hour", d)
			}
			roles, hasRoles := got.Claims["agentauth_roles"]
			if tc.roles == nil && hasRoles || tc.roles != nil && !reflect.DeepEqual(roles, tc.roles) {
				t.Fatalf("agentauth_roles = %#v, want %#v", roles, tc.roles)
			}
			tenant, hasTenant := got.Claims["tenant_id"]
			if tc.tenant == "" && hasTenant || tc.tenant != "" && tenant != tc.tenant {
				t.Fatalf("tenant_id = %#v, want %q", tenant, tc.tenant)
			}

			// The callback works once: the provider refuses the code again.
			_, err = signIn.Finish(ctx, u.Query(), pending)
			var se *oauth.SignInError
			if !errors.As(err, &se) || se.Reason != oauth.SignInExchangeFailed {
				t.Fatalf("replayed callback: %v, want exchange_failed", err)
			}
			if code := u.Query().Get("code"); code == "" || strings.Contains(err.Error(), code) {
				t.Fatalf("error %q names the code", err)
			}
		})
	}
}
