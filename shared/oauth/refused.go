package oauth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentauth/agentauth/shared/domain"
)

// maxRefusedRounds bounds TokenRefused's rounds of read and act on the
// grant: a round is lost only to a concurrent write (a refresh that
// started from an older version, a revocation racing ours), and the next
// read sees its result.
const maxRefusedRounds = 3

// TokenRefused is getAccessToken after an upstream refused the token it
// returned for req (HTTP 401, the token is not honoured): the caller
// sends refused back, and gets what to use instead.
//
//   - While refused is still the grant's token, the grant is refreshed at
//     once, whatever its expiry says: one refresh per grant across every
//     process (the refresh's single flight and lease), so concurrent
//     refusals of one token cost one refresh and all get its result.
//   - When the grant already holds another token (someone refreshed it
//     meanwhile), that one is the answer: nothing is refreshed again.
//   - When the provider refuses the refresh (invalid_grant), or the grant
//     has no refresh token, the grant is revoked — kept as a tombstone
//     with its reason, its tokens deleted — and the answer is
//     authorization_required with a new consent session. An auth.revoked
//     event then goes to req's resume target (domain.AuthRevokedEvent),
//     so the agent instance learns why its call waits for consent again.
//
// Like GetAccessToken it never returns a Go error, and nothing in its
// result but a ready token is secret.
func (m *Manager) TokenRefused(ctx context.Context, req TokenRequest, refused domain.Secret) Result {
	rt := m.app(req.AppRef)
	subject := ""
	if rt != nil {
		subject = resolveSubject(rt.app.SubjectMode, req.Auth)
	}
	if rt == nil || subject == "" {
		// GetAccessToken answers these requests with their error result.
		return m.GetAccessToken(ctx, req)
	}
	id := GrantID(rt.app.Ref(), subject)
	tomb, err := m.renewRefused(ctx, rt, id, refused)
	if err != nil {
		// The reason, not err: a provider's answer is never logged.
		m.log.WarnContext(ctx, "refresh after an upstream refusal failed", "grantId", id, "reason", safeReason(err))
		return ErrorResult(CodeRefreshFailed, fmt.Sprintf("refreshing grant %s after the upstream refused its token failed: %s", id, safeReason(err)))
	}
	res := m.GetAccessToken(ctx, req)
	if tomb != nil && res.Status == StatusAuthorizationRequired {
		m.emitRevoked(ctx, *tomb, res, req.Resume)
	}
	return res
}

// renewRefused brings grant id past the refused token: refreshed, or
// revoked. It returns the grant's tombstone when the grant is revoked
// (by this call or a concurrent one), nil when GetAccessToken has what
// to answer (a newer token, no grant, a grant it reports as unreadable).
func (m *Manager) renewRefused(ctx context.Context, rt *appRuntime, id string, refused domain.Secret) (*domain.Grant, error) {
	for round := 1; round <= maxRefusedRounds; round++ {
		g, err := m.cfg.Store.GetGrant(ctx, id)
		switch {
		case err != nil:
			return nil, nil // GetAccessToken reads it again and answers
		case g.Revoked:
			return &g, nil
		case !m.holds(ctx, g, refused):
			return nil, nil // refreshed since the refused token was handed out
		case g.Token.RefreshToken == nil:
			tomb, err := m.markRevoked(ctx, g, domain.RevokedTokenRefused)
			if errors.Is(err, domain.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("revoke grant %s: %w", id, err)
			}
			m.log.WarnContext(ctx, "upstream refused the access token and the grant has no refresh token: grant revoked", "grantId", id)
			return &tomb, nil
		}
		fresh, err := m.refresh(ctx, rt, g)
		switch {
		case errors.Is(err, errGrantRevoked):
			continue // the next read finds the tombstone
		case err != nil:
			return nil, err
		case fresh.Revoked:
			return &fresh, nil
		case fresh.Version == g.Version:
			// The flight this call joined started from an older version
			// and found ours already written: refresh ours.
			continue
		}
		m.log.InfoContext(ctx, "grant refreshed after an upstream refused its token", "grantId", id, "version", fresh.Version)
		return nil, nil
	}
	return nil, nil
}

// holds reports whether g's access token is refused (compared in constant
// time). A token that does not open counts as not held: GetAccessToken
// then reports the grant unreadable.
func (m *Manager) holds(ctx context.Context, g domain.Grant, refused domain.Secret) bool {
	if g.Token.AccessToken.IsZero() {
		return false
	}
	tok, err := m.cfg.Sealer.Open(ctx, g.Token.AccessToken, domain.GrantBinding(g, domain.FieldAccessToken))
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(tok, []byte(refused.Reveal())) == 1
}

// emitRevoked queues auth.revoked for revoked grant tomb to resume, the
// agent instance whose call now waits on the consent res started. Its id
// is the new session's, so a call run again (after a crash) that gets the
// same session queues it once. Best effort: the consent link is in the
// call's answer whether or not the event is queued.
func (m *Manager) emitRevoked(ctx context.Context, tomb domain.Grant, res Result, resume *domain.ResumeInfo) {
	if resume == nil || resume.AgentName == "" && resume.InstanceKey == "" {
		return
	}
	input, err := json.Marshal(domain.AuthRevokedEvent{
		Type:          "auth.revoked",
		OAuthAppRef:   tomb.OAuthAppRef,
		Provider:      tomb.Provider,
		Subject:       tomb.Subject,
		GrantID:       tomb.ID,
		Reason:        tomb.RevokedReason,
		AuthSessionID: res.AuthSessionID,
	})
	if err != nil {
		return
	}
	md := resumeMetadata("auth.revoked", domain.Session{ID: res.AuthSessionID, Resume: *resume})
	md["grantId"] = tomb.ID
	err = m.cfg.Queue.Enqueue(ctx, domain.Event{
		ID:          "revoked:" + res.AuthSessionID,
		SwarmRef:    resume.SwarmRef,
		InstanceKey: resume.InstanceKey,
		AgentName:   resume.AgentName,
		Input:       string(input),
		Origin:      resume.Origin,
		Auth:        resume.Auth,
		Metadata:    md,
		EnqueuedAt:  m.now().UTC(),
	})
	if err != nil {
		m.log.ErrorContext(ctx, "auth.revoked not queued", "grantId", tomb.ID, "authSessionId", res.AuthSessionID, "err", err)
		return
	}
	m.log.InfoContext(ctx, "auth.revoked queued", "grantId", tomb.ID, "reason", tomb.RevokedReason, "authSessionId", res.AuthSessionID)
}
