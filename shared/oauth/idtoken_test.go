package oauth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
)

// idTokenSigner signs RS256 id_tokens for the fake provider, as an OpenID
// provider does, and publishes its key at the provider's /jwks.
type idTokenSigner struct {
	t      *testing.T
	issuer string
	signer jose.Signer
}

var (
	idTokenKeyOnce sync.Once
	idTokenKey     *rsa.PrivateKey
)

func newIDTokenSigner(t *testing.T, p *fakeProvider) *idTokenSigner {
	t.Helper()
	idTokenKeyOnce.Do(func() {
		var err error
		if idTokenKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			t.Fatal(err)
		}
	})
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: idTokenKey, KeyID: "idt-1"}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	jwks, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &idTokenKey.PublicKey, KeyID: "idt-1", Algorithm: "RS256", Use: "sig"}}})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.jwks = jwks
	p.mu.Unlock()
	return &idTokenSigner{t: t, issuer: p.URL(), signer: signer}
}

// sign returns an id_token for sub with nonce ("" leaves the claim out).
// go-oidc checks expiry on the wall clock, so times are real ones.
func (s *idTokenSigner) sign(sub, nonce string) string {
	now := time.Now()
	claims := map[string]any{"iss": s.issuer, "aud": "client-1", "sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		s.t.Fatal(err)
	}
	jws, err := s.signer.Sign(payload)
	if err != nil {
		s.t.Fatal(err)
	}
	raw, err := jws.CompactSerialize()
	if err != nil {
		s.t.Fatal(err)
	}
	return raw
}

// oidcHarness is a harness whose only app verifies the subject from the
// id_token.
func oidcHarness(t *testing.T) (*harness, *idTokenSigner) {
	t.Helper()
	h := newHarness(t)
	idp := newIDTokenSigner(t, h.p)
	doc := `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: oidc}
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: user
  client:
    clientId: {value: client-1}
    clientSecret: {value: secret-1}
  endpoints:
    authorizationUrl: ` + h.p.URL() + `/authorize
    tokenUrl: ` + h.p.URL() + `/token
    revokeUrl: ` + h.p.URL() + `/revoke
  scopes: [openid, read]
  redirect: {callbackPath: /oauth/callback/oidc}
  subjectVerification: {source: idToken, issuer: "` + h.p.URL() + `", jwksUrl: "` + h.p.URL() + `/jwks", template: "demo:user:{sub}"}
`
	b, err := bundle.Parse([]bundle.File{{Name: "oidc.yaml", Data: []byte(doc)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h.bundle = b
	h.m = h.newManager(h.store)
	return h, idp
}

// The id_token's nonce binds the token response to this session: a wrong,
// missing or replayed nonce is refused, no grant is written and the tokens
// go back to the provider (issue 9.17).
func TestIDTokenNonce(t *testing.T) {
	otherSession := "as-00000000000000000000000000000000"
	for _, tc := range []struct {
		name  string
		nonce func(h *harness, asked string) string // the nonce the provider puts into the id_token
	}{
		{"nonce of another session", func(h *harness, _ string) string { return h.m.state.nonceFor(otherSession) }},
		{"nonce made up", func(*harness, string) string { return "bm9uY2U" }},
		{"nonce altered", func(_ *harness, asked string) string {
			last := "A"
			if strings.HasSuffix(asked, last) {
				last = "B"
			}
			return asked[:len(asked)-1] + last
		}},
		{"no nonce", func(*harness, string) string { return "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, idp := oidcHarness(t)
			h.p.idToken = func(sub, asked string) string { return idp.sign(sub, tc.nonce(h, asked)) }
			nonceRefused(t, h)
		})
	}

	t.Run("id_token replayed from an earlier session", func(t *testing.T) {
		h, idp := oidcHarness(t)
		var first string
		h.p.idToken = func(sub, asked string) string { first = idp.sign(sub, asked); return first }
		if res := h.consent("oidc", "alice"); res.Status != StatusReady {
			t.Fatalf("first consent: %+v", res)
		}
		// Revoked, so the next request asks again: the same user, a new
		// session, and the provider's answer carries the first session's
		// id_token (signature, issuer, audience and expiry still valid).
		if _, err := h.m.RevokeGrant(context.Background(), appRef("oidc"), "demo:user:alice"); err != nil {
			t.Fatal(err)
		}
		h.p.mu.Lock()
		h.p.revoked = nil
		h.p.mu.Unlock()
		h.p.idToken = func(string, string) string { return first }
		before := grantOf(t, h).Version
		nonceRefused(t, h)
		if after := grantOf(t, h); after.Version != before {
			t.Fatalf("the replayed id_token wrote the grant: version %d → %d", before, after.Version)
		}
	})

	t.Run("own nonce is accepted", func(t *testing.T) {
		h, idp := oidcHarness(t)
		h.p.idToken = idp.sign
		if res := h.consent("oidc", "alice"); res.Status != StatusReady {
			t.Fatalf("consent: %+v", res)
		}
	})
}

func grantOf(t *testing.T, h *harness) domain.Grant {
	t.Helper()
	g, err := h.store.GetGrant(context.Background(), GrantID(appRef("oidc"), "demo:user:alice"))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// nonceRefused runs one consent as alice and checks that the callback
// refuses it: subject_unverifiable, session failed, no new grant, no
// event, both tokens revoked at the provider.
func nonceRefused(t *testing.T, h *harness) {
	t.Helper()
	events := len(h.queue.list())
	res := h.request("oidc")
	if res.Status != StatusAuthorizationRequired {
		t.Fatalf("want authorization_required, got %+v", res)
	}
	if u, _ := url.Parse(res.AuthorizationURL); u.Query().Get("nonce") != h.m.state.nonceFor(res.AuthSessionID) {
		t.Fatalf("authorization URL lacks the session's nonce: %s", res.AuthorizationURL)
	}
	code, state := h.p.approve(res.AuthorizationURL, "alice")
	_, err := h.m.HandleCallback(context.Background(), h.bundle.OAuthApps["oidc"], url.Values{"code": {code}, "state": {state}})
	var ce *CallbackError
	if !errors.As(err, &ce) || ce.Reason != ReasonSubjectUnverifiable {
		t.Fatalf("callback err = %v, want %s", err, ReasonSubjectUnverifiable)
	}
	s, err := h.store.GetSession(context.Background(), res.AuthSessionID)
	if err != nil || s.Status != domain.SessionFailed || s.StatusReason != ReasonSubjectUnverifiable {
		t.Fatalf("session %s/%s %v, want failed/%s", s.Status, s.StatusReason, err, ReasonSubjectUnverifiable)
	}
	if g, err := h.store.GetGrant(context.Background(), GrantID(appRef("oidc"), "demo:user:alice")); err == nil && !g.Revoked {
		t.Fatal("a usable grant exists after a refused nonce")
	}
	if len(h.queue.list()) != events {
		t.Fatal("a refused nonce queued auth.granted")
	}
	h.p.mu.Lock()
	revoked := strings.Join(h.p.revoked, ",")
	h.p.mu.Unlock()
	if revoked != "refresh_token,access_token" {
		t.Fatalf("provider saw revocations %q, want both tokens given back", revoked)
	}
	if !strings.Contains(h.logs.String(), "nonce") {
		t.Fatalf("the log does not say the nonce was refused: %s", h.logs.String())
	}
}
