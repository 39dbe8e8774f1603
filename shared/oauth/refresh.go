package oauth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

// refresh renews g's access token. Within one process concurrent callers
// share one flight; across processes the store's lease lets one refresher
// at a time call the provider, and the others wait and read its result.
// The grant's version fences the write: a refresher that lost the lease
// (or raced a new consent) never overwrites a newer token.
func (m *Manager) refresh(ctx context.Context, rt *appRuntime, g domain.Grant) (domain.Grant, error) {
	ch := m.flight.DoChan(g.ID, func() (any, error) {
		// One caller's cancellation must not fail the others sharing the
		// flight; the flight is bounded on its own.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.RefreshLeaseTTL)
		defer cancel()
		return m.refreshLeased(fctx, rt, g)
	})
	select {
	case <-ctx.Done():
		return domain.Grant{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return domain.Grant{}, r.Err
		}
		return r.Val.(domain.Grant), nil
	}
}

func (m *Manager) refreshLeased(ctx context.Context, rt *appRuntime, seen domain.Grant) (domain.Grant, error) {
	key := "refresh/" + seen.ID
	backoff := 25 * time.Millisecond
	for {
		err := m.cfg.Store.AcquireLease(ctx, key, m.owner, m.cfg.RefreshLeaseTTL)
		if err == nil {
			break
		}
		if !errors.Is(err, domain.ErrConflict) {
			return domain.Grant{}, fmt.Errorf("acquire refresh lease: %w", err)
		}
		// Someone else is refreshing: wait for their write.
		select {
		case <-ctx.Done():
			return domain.Grant{}, fmt.Errorf("wait for refresh lease: %w", ctx.Err())
		case <-time.After(backoff):
		}
		if backoff < 400*time.Millisecond {
			backoff *= 2
		}
		if cur, err := m.cfg.Store.GetGrant(ctx, seen.ID); err == nil && moved(cur, seen) {
			return cur, nil
		}
	}
	defer func() {
		if err := m.cfg.Store.ReleaseLease(context.WithoutCancel(ctx), key, m.owner); err != nil {
			m.log.WarnContext(ctx, "release refresh lease", "grantId", seen.ID, "err", err)
		}
	}()

	// Double-check under the lease: another process may have refreshed
	// between our read and our lease.
	cur, err := m.cfg.Store.GetGrant(ctx, seen.ID)
	if err != nil {
		return domain.Grant{}, fmt.Errorf("re-read grant %s: %w", seen.ID, err)
	}
	if moved(cur, seen) {
		return cur, nil
	}
	if cur.Revoked || cur.Token.RefreshToken == nil {
		return cur, nil
	}
	rtok, err := m.cfg.Sealer.Open(ctx, *cur.Token.RefreshToken, domain.GrantBinding(cur, domain.FieldRefreshToken))
	if err != nil {
		return domain.Grant{}, fmt.Errorf("open refresh token of %s: %w", cur.ID, err)
	}

	pctx, cancel := m.providerCtx(ctx)
	defer cancel()
	started := m.now()
	src := rt.oauth.TokenSource(pctx, &oauth2.Token{RefreshToken: string(rtok), Expiry: time.Unix(1, 0)})
	tok, err := src.Token()
	if err != nil {
		if providerCode(err) == "invalid_grant" {
			m.log.WarnContext(ctx, "refresh token rejected, revoking grant", "grantId", cur.ID)
			if _, rerr := m.markRevoked(ctx, cur, domain.RevokedRefreshRejected); rerr != nil {
				return domain.Grant{}, fmt.Errorf("revoke grant %s after invalid_grant: %w", cur.ID, rerr)
			}
			return domain.Grant{}, errGrantRevoked
		}
		err = atProvider("refresh "+cur.ID, err)
		m.recordRefreshFailure(ctx, cur, err)
		return domain.Grant{}, err
	}
	next, err := m.applyToken(ctx, cur, tok, started)
	if err != nil {
		if errors.Is(err, errProvider) {
			m.recordRefreshFailure(ctx, cur, err) // an answer without a token
		}
		return domain.Grant{}, err
	}
	written, err := m.cfg.Store.PutGrant(ctx, next, cur.Version)
	if errors.Is(err, domain.ErrConflict) {
		// A newer write (a new consent) won; it is the truth.
		return m.cfg.Store.GetGrant(ctx, cur.ID)
	}
	if err != nil {
		return domain.Grant{}, fmt.Errorf("store refreshed grant %s: %w", cur.ID, err)
	}
	m.log.InfoContext(ctx, "grant refreshed", "grantId", cur.ID, "version", written.Version)
	return written, nil
}

// moved reports whether cur, read again, holds another token or state
// than seen: another refresh, a new consent or a revocation came first,
// and cur is the answer. A write that only recorded a failed refresh
// (recordRefreshFailure) changes the version but not the token: the
// refresh is still to do.
func moved(cur, seen domain.Grant) bool {
	return cur.Version != seen.Version &&
		(cur.Revoked != seen.Revoked || cur.Token.AccessToken != seen.Token.AccessToken)
}

// recordRefreshFailure counts the failed refresh of g (err, the
// provider's failure) on the grant, for the operator: a write fenced by
// the version g was read at, best effort. A conflict means another
// writer (a refresh, a consent, a revocation) came first and its record
// is newer; any failure of the write is logged and the refresh's own
// error is what the caller gets. UpdatedAt is left alone: it says when
// the token last changed (the console's last refresh, the sweep's test
// of an interrupted exchange).
func (m *Manager) recordRefreshFailure(ctx context.Context, g domain.Grant, err error) {
	at := m.now().UTC()
	g.RefreshFailures++
	g.LastRefreshError = refreshFailureCode(err)
	g.LastRefreshFailedAt = &at
	if _, werr := m.cfg.Store.PutGrant(ctx, g, g.Version); werr != nil && !errors.Is(werr, domain.ErrConflict) {
		m.log.WarnContext(ctx, "failed refresh not recorded on the grant", "grantId", g.ID, "err", werr)
	}
}

// applyToken returns g with tok sealed into it. A provider that does not
// rotate refresh tokens keeps the old one. A token obtained ends a run
// of failed refreshes.
func (m *Manager) applyToken(ctx context.Context, g domain.Grant, tok *oauth2.Token, issued time.Time) (domain.Grant, error) {
	if tok.AccessToken == "" {
		return domain.Grant{}, fmt.Errorf("%w: token response for %s has no access_token", errProvider, g.ID)
	}
	at, err := m.cfg.Sealer.Seal(ctx, []byte(tok.AccessToken), domain.GrantBinding(g, domain.FieldAccessToken))
	if err != nil {
		return domain.Grant{}, fmt.Errorf("seal access token of %s: %w", g.ID, err)
	}
	g.Token.AccessToken = at
	if tok.RefreshToken != "" {
		rt, err := m.cfg.Sealer.Seal(ctx, []byte(tok.RefreshToken), domain.GrantBinding(g, domain.FieldRefreshToken))
		if err != nil {
			return domain.Grant{}, fmt.Errorf("seal refresh token of %s: %w", g.ID, err)
		}
		g.Token.RefreshToken = &rt
	}
	g.Token.TokenType = tokenType(tok)
	g.Token.IssuedAt = issued.UTC()
	// Expiry counts from issued, on our clock: when we asked (code
	// exchange, refresh: it errs early) or, for the device flow, when the
	// token response arrived.
	g.Token.ExpiresAt = nil
	switch {
	case tok.ExpiresIn > 0:
		e := issued.Add(time.Duration(tok.ExpiresIn) * time.Second).UTC()
		g.Token.ExpiresAt = &e
	case !tok.Expiry.IsZero():
		e := tok.Expiry.UTC()
		g.Token.ExpiresAt = &e
	}
	// No scope in the answer means what was asked (RFC 6749 §5.1).
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		asked := g.ScopesRequested
		if len(asked) == 0 {
			asked = g.ScopesGranted
		}
		g.ScopesGranted = grantedScopes(g.Provider, s, asked)
	}
	g.UpdatedAt = m.now().UTC()
	g.Revoked, g.RevokedAt, g.RevokedReason = false, nil, ""
	g.RefreshFailures, g.LastRefreshError, g.LastRefreshFailedAt = 0, "", nil
	return g, nil
}

func tokenType(tok *oauth2.Token) string {
	if tok.TokenType == "" {
		return "bearer"
	}
	return tok.TokenType
}

// markRevoked revokes g locally, for reason (domain.Revoked…): sealed
// tokens are dropped, so a revoked grant holds nothing usable; the record
// stays as a tombstone that says when and why. The write is fenced by g's
// version (ErrConflict when another write came first).
func (m *Manager) markRevoked(ctx context.Context, g domain.Grant, reason string) (domain.Grant, error) {
	now := m.now().UTC()
	g.Revoked, g.RevokedAt, g.RevokedReason, g.UpdatedAt = true, &now, reason, now
	g.Token.AccessToken = domain.EncryptedValue{}
	g.Token.RefreshToken = nil
	return m.cfg.Store.PutGrant(ctx, g, g.Version)
}
