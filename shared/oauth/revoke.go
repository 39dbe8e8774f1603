package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

// Provider revocation outcomes of RevokeResult.
const (
	ProviderRevoked       = "revoked"
	ProviderNotConfigured = "not_configured"
	ProviderFailed        = "failed"
)

// RevokeResult says what a revocation did.
type RevokeResult struct {
	GrantID string `json:"grantId"`
	// Provider is revoked, not_configured (no revokeUrl) or failed (the
	// grant is revoked here all the same).
	Provider string `json:"providerRevocation"`
}

// ErrUnknownApp: the reference names no OAuthApp of the bundle.
var ErrUnknownApp = errors.New("unknown OAuthApp")

// RevokeGrant revokes the grant of (ref, subject): first locally, so the
// token is never handed out again, then at the provider's revokeUrl
// (RFC 7009) when configured. ErrNotFound when there is no grant.
func (m *Manager) RevokeGrant(ctx context.Context, ref domain.ObjectRef, subject string) (RevokeResult, error) {
	rt := m.app(ref)
	if rt == nil {
		return RevokeResult{}, fmt.Errorf("%w: %s", ErrUnknownApp, ref)
	}
	id := GrantID(rt.app.Ref(), subject)
	for attempt := 0; ; attempt++ {
		g, err := m.cfg.Store.GetGrant(ctx, id)
		if err != nil {
			return RevokeResult{}, fmt.Errorf("revoke %s: %w", id, err)
		}
		var access, refresh []byte
		if !g.Token.AccessToken.IsZero() {
			access, _ = m.cfg.Sealer.Open(ctx, g.Token.AccessToken, domain.GrantBinding(g, domain.FieldAccessToken))
		}
		if g.Token.RefreshToken != nil {
			refresh, _ = m.cfg.Sealer.Open(ctx, *g.Token.RefreshToken, domain.GrantBinding(g, domain.FieldRefreshToken))
		}
		if !g.Revoked {
			_, err = m.markRevoked(ctx, g, domain.RevokedByRequest)
			if errors.Is(err, domain.ErrConflict) && attempt < 3 {
				continue // a refresh landed in between: revoke its result
			}
			if err != nil {
				return RevokeResult{}, fmt.Errorf("revoke %s: %w", id, err)
			}
		}
		res := RevokeResult{GrantID: id, Provider: ProviderNotConfigured}
		if rt.app.Endpoints.RevokeURL != "" {
			res.Provider = ProviderRevoked
			// Revoking the refresh token ends the whole grant at most
			// providers; the access token is revoked too for the rest.
			if len(refresh) > 0 && !m.revokeAtProvider(ctx, rt, string(refresh), "refresh_token") {
				res.Provider = ProviderFailed
			}
			if len(access) > 0 && !m.revokeAtProvider(ctx, rt, string(access), "access_token") {
				res.Provider = ProviderFailed
			}
		}
		m.log.InfoContext(ctx, "grant revoked", "grantId", id, "providerRevocation", res.Provider)
		return res, nil
	}
}

// revokeAtProvider is an RFC 7009 revocation request. x/oauth2 has no
// revocation call, so it is written here: a form POST with the token, its
// type hint and the client's credentials.
func (m *Manager) revokeAtProvider(ctx context.Context, rt *appRuntime, token, hint string) bool {
	if rt.app.Endpoints.RevokeURL == "" || token == "" {
		return false
	}
	pctx, cancel := m.providerCtx(ctx)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	if rt.oauth.Endpoint.AuthStyle == oauth2.AuthStyleInParams {
		form.Set("client_id", rt.app.ClientID)
		form.Set("client_secret", rt.app.ClientSecret.Reveal())
	}
	req, err := http.NewRequestWithContext(pctx, http.MethodPost, rt.app.Endpoints.RevokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rt.oauth.Endpoint.AuthStyle != oauth2.AuthStyleInParams {
		req.SetBasicAuth(url.QueryEscape(rt.app.ClientID), url.QueryEscape(rt.app.ClientSecret.Reveal()))
	}
	resp, err := m.cfg.HTTPClient.Do(req)
	if err != nil {
		m.log.WarnContext(ctx, "provider revocation failed", "oauthApp", rt.app.Name, "tokenType", hint, "reason", safeReason(atProvider("revocation", err)))
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		m.log.WarnContext(ctx, "provider revocation refused", "oauthApp", rt.app.Name, "tokenType", hint, "status", resp.StatusCode)
		return false
	}
	return true
}
