package oauth

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
)

func TestGrantedScopes(t *testing.T) {
	for _, tc := range []struct {
		provider, raw string
		requested     []string
		want          []string
	}{
		{"demo", "openid profile", []string{"openid", "profile", "offline_access"}, []string{"openid", "profile"}},
		{"github", "repo,gist", []string{"repo", "gist"}, []string{"repo", "gist"}},
		{"slack", "chat:write, channels:read", nil, []string{"chat:write", "channels:read"}},
		{"google", "openid https://www.googleapis.com/auth/userinfo.email https://www.googleapis.com/auth/userinfo.profile", []string{"openid", "email", "profile"}, []string{"openid", "email", "profile"}},
		// An alias maps back only to a scope that was asked in short form.
		{"google", "https://www.googleapis.com/auth/userinfo.email", []string{"https://www.googleapis.com/auth/userinfo.email"}, []string{"https://www.googleapis.com/auth/userinfo.email"}},
		{"Google", "https://www.googleapis.com/auth/userinfo.email", []string{"email"}, []string{"email"}},
		{"demo", "a a  b", nil, []string{"a", "b"}},
		{"demo", " , ", nil, nil},
	} {
		if got := grantedScopes(tc.provider, tc.raw, tc.requested); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %q: %q, want %q", tc.provider, tc.raw, got, tc.want)
		}
	}
}

// TestProviderGrantsFewerScopes: an OpenID provider without prompt=consent
// drops offline_access (OIDC Core §11). Before, every later request asked
// for consent again, forever; now the answer says which scopes are
// missing, a request the grant covers is ready, and the callback and the
// auth.granted event say it too.
func TestProviderGrantsFewerScopes(t *testing.T) {
	h := newHarness(t)
	h.p.grantScope = "read" // the app asks for read write
	res := h.request("global")
	code, state := h.p.approve(res.AuthorizationURL, "team")
	out, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["global"], map[string][]string{"code": {code}, "state": {state}})
	if err != nil || !reflect.DeepEqual(out.ScopesNotGranted, []string{"write"}) {
		t.Fatalf("callback: %+v %v", out, err)
	}
	events := h.queue.list()
	var granted domain.AuthGrantedEvent
	if len(events) != 1 || json.Unmarshal([]byte(events[0].Input), &granted) != nil || !reflect.DeepEqual(granted.ScopesNotGranted, []string{"write"}) {
		t.Fatalf("auth.granted: %+v", events)
	}
	sessionsBefore, _, _ := h.store.ListSessions(context.Background())

	again := h.request("global")
	if again.Status != StatusError || again.Error.Code != CodeScopeNotGranted || !reflect.DeepEqual(again.Error.Scopes, []string{"write"}) ||
		!strings.Contains(again.Error.Message, `"write"`) {
		t.Fatalf("same request again: %+v %+v", again, again.Error)
	}
	sessionsAfter, _, _ := h.store.ListSessions(context.Background())
	if len(sessionsAfter) != len(sessionsBefore) {
		t.Fatalf("a new consent was started: %d sessions, was %d", len(sessionsAfter), len(sessionsBefore))
	}
	if covered := h.request("global", func(r *TokenRequest) { r.Scopes = []string{"read"} }); covered.Status != StatusReady {
		t.Fatalf("a request the grant covers: %+v", covered)
	}
	// After a revocation the user may consent again.
	if _, err := h.m.RevokeGrant(context.Background(), appRef("global"), "demo:team:T1"); err != nil {
		t.Fatal(err)
	}
	if fresh := h.request("global"); fresh.Status != StatusAuthorizationRequired {
		t.Fatalf("after revoke: %+v", fresh)
	}
}

// TestProviderDropsOfflineAccess: an OpenID provider without
// prompt=consent answers a consent for [read, offline_access] with read
// only and no refresh token. offline_access asks for a refresh token, not
// for API access: the request is ready with the token, says it is not
// refreshable and which scope was not granted, and consent is asked again
// only once the token expires (issue 17, item 2). A trimmed API scope is
// still scopeNotGranted.
func TestProviderDropsOfflineAccess(t *testing.T) {
	h := newHarness(t)
	yaml := `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: oidc}
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: global
  client:
    clientId: {value: client-1}
    clientSecret: {value: secret-1}
  endpoints:
    authorizationUrl: ` + h.p.URL() + `/authorize
    tokenUrl: ` + h.p.URL() + `/token
  scopes: [openid, read, write, offline_access]
  redirect: {callbackPath: /oauth/callback/oidc}
`
	b, err := bundle.Parse([]bundle.File{{Name: "apps.yaml", Data: []byte(yaml)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.bundle = b
	h.m = h.newManager(h.store)
	h.p.grantScope, h.p.noRefresh = "openid read write", true
	res := h.request("oidc")
	code, state := h.p.approve(res.AuthorizationURL, "team")
	if _, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["oidc"], map[string][]string{"code": {code}, "state": {state}}); err != nil {
		t.Fatal(err)
	}
	ready := h.request("oidc")
	if ready.Status != StatusReady || ready.AccessToken.Reveal() == "" || ready.Refreshable || !reflect.DeepEqual(ready.ScopesNotGranted, []string{"offline_access"}) {
		t.Fatalf("after a consent without offline_access: %+v %+v", ready, ready.Error)
	}
	// The token expires: no refresh token, so the user is asked again
	// (not scopeNotGranted, not refreshFailed).
	h.clock.Advance(2 * time.Hour)
	if again := h.request("oidc"); again.Status != StatusAuthorizationRequired {
		t.Fatalf("after expiry: %+v %+v", again, again.Error)
	}
	// With offline_access granted and a refresh token, it is refreshable.
	h.p.grantScope, h.p.noRefresh = "openid read write offline_access", false
	res = h.request("oidc")
	code, state = h.p.approve(res.AuthorizationURL, "team")
	if _, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["oidc"], map[string][]string{"code": {code}, "state": {state}}); err != nil {
		t.Fatal(err)
	}
	if full := h.request("oidc"); full.Status != StatusReady || !full.Refreshable || len(full.ScopesNotGranted) != 0 {
		t.Fatalf("a full consent: %+v", full)
	}
	// A trimmed API scope stays scopeNotGranted.
	if _, err := h.m.RevokeGrant(context.Background(), appRef("oidc"), "demo:team:T1"); err != nil {
		t.Fatal(err)
	}
	h.p.grantScope = "openid read offline_access"
	res = h.request("oidc")
	code, state = h.p.approve(res.AuthorizationURL, "team")
	if _, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["oidc"], map[string][]string{"code": {code}, "state": {state}}); err != nil {
		t.Fatal(err)
	}
	if trimmed := h.request("oidc"); trimmed.Status != StatusError || trimmed.Error.Code != CodeScopeNotGranted || !reflect.DeepEqual(trimmed.Error.Scopes, []string{"write"}) {
		t.Fatalf("a trimmed API scope: %+v %+v", trimmed, trimmed.Error)
	}
}
