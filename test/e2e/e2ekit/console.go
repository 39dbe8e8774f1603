package e2ekit

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// ConsoleClient is the demo provider's agentauth-console client (operator
// sign-in to agentauth's console) as provider.mjs defines it, with
// redirectURIs: ProviderOptions.Clients replaces the provider's default
// clients, so a test that needs its own clients and the console adds this
// one to them.
func ConsoleClient(redirectURIs ...string) Client {
	return Client{
		ClientID:                "agentauth-console",
		ClientSecret:            "console-secret",
		ClientName:              "agentauth console",
		RedirectURIs:            redirectURIs,
		GrantTypes:              []string{GrantAuthorizationCode},
		ResponseTypes:           []string{"code"},
		TokenEndpointAuthMethod: "client_secret_basic",
	}
}

// Drive opens start in this session's tab and works through the
// provider's login and consent pages (signing in as login), each at most
// once, until done reports that the browser has arrived. Use it for a
// sign-in a relying party starts itself (its sign-in route redirects to
// the provider), where Authorize, which stops on leaving the start URL's
// origin, does not fit.
func (s *Session) Drive(ctx context.Context, start, login string, done func(Result) bool) (Result, error) {
	return s.drive(ctx, "drive", start, login, done)
}

// Tab returns the session tab's chromedp context, bounded by ctx and the
// browser's timeout, for driving the page with chromedp directly (while
// no other call uses the session). Call the cancel func when done.
func (s *Session) Tab(ctx context.Context) (context.Context, context.CancelFunc) {
	return boundCtx(ctx, s.ctx, s.b.timeout())
}

const depsHintAxe = "run `make e2e-deps` (or `npm ci` in test/e2e/axe)"

// AxePath is axe-core's browser build, installed from test/e2e/axe's
// package-lock.json.
func AxePath() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "test", "e2e", "axe", "node_modules", "axe-core", "axe.min.js"), nil
}

// RequireAxe skips the test when axe-core is not installed (or fails it
// when E2E_REQUIRE=1).
func RequireAxe(t testing.TB) {
	t.Helper()
	p, err := AxePath()
	if err == nil {
		_, err = os.Stat(p)
	}
	if err != nil {
		skipOrFail(t, fmt.Errorf("e2ekit: axe-core is missing (%v): %s", err, depsHintAxe))
	}
}

// AxeScript reads axe-core's browser build, for injecting into a page.
func AxeScript() (string, error) {
	p, err := AxePath()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("e2ekit: read axe-core: %w: %s", err, depsHintAxe)
	}
	return string(b), nil
}

// The console's confirm dialogs, word for word: Session.Click accepts
// only the dialog it is told to expect, so the local and the deployed
// console tests name the same texts.
const (
	ConfirmRevokeGrant = "Revoke this grant? The agent will need the user's consent again."
	ConfirmTerminate   = "Terminate this instance? It takes no more turns."
	ConfirmDelete      = "Delete this instance and its history? This cannot be undone."
)

// InstanceAction is a button on an instance's console page: the dialog
// it asks ("" for none), the flash after it ("Done: <Flash>.") and the
// instance's status then, on the page and in the runtime API.
type InstanceAction struct{ Button, Dialog, Flash, Status string }

// InstanceLifecycle is pause, resume and terminate, in the order a test
// clicks them on one instance.
func InstanceLifecycle() []InstanceAction {
	return []InstanceAction{
		{"#pause", "", "paused", "paused"},
		{"#resume", "", "resumed", "active"},
		{"#terminate", ConfirmTerminate, "terminated", "terminated"},
	}
}
