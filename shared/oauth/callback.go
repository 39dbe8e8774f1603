package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
)

// Callback failure reasons, shown on the callback page and stored as the
// session's statusReason. They are codes, never provider text.
const (
	ReasonMissingState         = "missing_state"
	ReasonInvalidState         = "invalid_state"
	ReasonSessionNotFound      = "session_not_found"
	ReasonSessionAlreadyUsed   = "session_already_used"
	ReasonSessionExpired       = "session_expired"
	ReasonWrongCallback        = "wrong_callback"
	ReasonProviderError        = "provider_error"
	ReasonMissingCode          = "missing_code"
	ReasonTokenExchangeFailed  = "token_exchange_failed"
	ReasonTokenExchangeTimeout = "token_exchange_timeout"
	ReasonSubjectMismatch      = "subject_mismatch"
	ReasonSubjectUnverifiable  = "subject_unverifiable"
	ReasonInternal             = "internal_error"
)

// CallbackError is a failed callback: Reason is a code from the list above;
// ProviderCode is the provider's RFC 6749 error code when it sent one.
type CallbackError struct {
	Reason       string
	ProviderCode string
	SessionID    string
}

func (e *CallbackError) Error() string {
	if e.ProviderCode != "" {
		return "callback failed: " + e.Reason + " (" + e.ProviderCode + ")"
	}
	return "callback failed: " + e.Reason
}

// CallbackOutcome is a successful callback.
type CallbackOutcome struct {
	SessionID   string
	GrantID     string
	OAuthAppRef domain.ObjectRef
	Provider    string
	Subject     string
	// ScopesNotGranted: asked for, not granted by the provider.
	ScopesNotGranted []string
}

// HandleCallback completes the session named by the callback's state for
// the app that owns callbackPath. Any failure is a *CallbackError; the
// session is marked failed or expired where one was found, and no grant is
// written.
func (m *Manager) HandleCallback(ctx context.Context, app *bundle.OAuthApp, q url.Values) (CallbackOutcome, error) {
	state := q.Get("state")
	if state == "" {
		return CallbackOutcome{}, &CallbackError{Reason: ReasonMissingState}
	}
	payload, err := m.state.Parse(state)
	if err != nil {
		m.log.WarnContext(ctx, "callback with invalid state", "oauthApp", app.Name)
		return CallbackOutcome{}, &CallbackError{Reason: ReasonInvalidState}
	}
	fail := func(reason string) error { return &CallbackError{Reason: reason, SessionID: payload.SessionID} }

	s, err := m.cfg.Store.GetSession(ctx, payload.SessionID)
	if errors.Is(err, domain.ErrNotFound) {
		return CallbackOutcome{}, fail(ReasonSessionNotFound)
	}
	if err != nil {
		m.log.ErrorContext(ctx, "callback session read failed", "authSessionId", payload.SessionID, "err", err)
		return CallbackOutcome{}, fail(ReasonInternal)
	}
	// The signature proves we issued the state; equality with the sealed
	// copy proves it is this session's current state.
	stored, err := m.cfg.SessionSealer.Open(ctx, s.Flow.State, domain.SessionBinding(s, domain.FieldState))
	if err != nil || !domain.NewSecret(string(stored)).Equal(domain.NewSecret(state)) {
		m.log.WarnContext(ctx, "callback state does not match its session", "authSessionId", s.ID)
		return CallbackOutcome{}, fail(ReasonInvalidState)
	}
	if s.OAuthAppRef != app.Ref() {
		m.log.WarnContext(ctx, "callback on another app's path", "authSessionId", s.ID, "path", app.Redirect.CallbackPath)
		return CallbackOutcome{}, fail(ReasonWrongCallback)
	}
	switch s.Status {
	case domain.SessionPending:
	case domain.SessionExpired:
		return CallbackOutcome{}, fail(ReasonSessionExpired)
	default:
		m.log.WarnContext(ctx, "callback replayed", "authSessionId", s.ID, "status", string(s.Status))
		return CallbackOutcome{}, fail(ReasonSessionAlreadyUsed)
	}
	if !m.now().Before(s.ExpiresAt) {
		m.settle(ctx, s, domain.SessionExpired, ReasonSessionExpired)
		return CallbackOutcome{}, fail(ReasonSessionExpired)
	}
	if perr := q.Get("error"); perr != "" {
		code := "unknown_error"
		if oauthErrorCode.MatchString(perr) {
			code = perr
		}
		m.settle(ctx, s, domain.SessionFailed, ReasonProviderError+":"+code)
		return CallbackOutcome{}, &CallbackError{Reason: ReasonProviderError, ProviderCode: code, SessionID: s.ID}
	}
	code := q.Get("code")
	if code == "" {
		m.settle(ctx, s, domain.SessionFailed, ReasonMissingCode)
		return CallbackOutcome{}, fail(ReasonMissingCode)
	}
	// Claim the session before the code leaves agentauth: one conditional
	// write, pending → exchanging. Every other copy of this callback
	// either loses this write or reads the session exchanging, and never
	// reaches the provider — a provider that detects a reused code would
	// revoke the winner's token.
	s, err = m.claim(ctx, s)
	if errors.Is(err, domain.ErrConflict) {
		m.log.WarnContext(ctx, "callback replayed while the first copy runs", "authSessionId", payload.SessionID)
		return CallbackOutcome{}, fail(ReasonSessionAlreadyUsed)
	}
	if err != nil {
		m.log.ErrorContext(ctx, "callback could not claim its session", "authSessionId", payload.SessionID, "err", err)
		return CallbackOutcome{}, fail(ReasonInternal)
	}

	rt := m.app(s.OAuthAppRef)
	verifier, err := m.cfg.SessionSealer.Open(ctx, s.Flow.PKCE.CodeVerifier, domain.SessionBinding(s, domain.FieldCodeVerifier))
	if err != nil {
		m.log.ErrorContext(ctx, "code verifier does not open", "authSessionId", s.ID, "err", err)
		m.settle(ctx, s, domain.SessionFailed, ReasonInternal)
		return CallbackOutcome{}, fail(ReasonInternal)
	}
	pctx, cancel := m.providerCtx(ctx)
	issued := m.now()
	cfg := *rt.oauth
	cfg.Scopes = s.RequestedScopes
	tok, err := cfg.Exchange(pctx, code, oauth2.VerifierOption(string(verifier)))
	cancel()
	if err != nil {
		err = atProvider("code exchange", err)
		reason := ReasonTokenExchangeFailed
		if errors.Is(err, context.DeadlineExceeded) {
			reason = ReasonTokenExchangeTimeout
		}
		m.log.WarnContext(ctx, "code exchange failed", "authSessionId", s.ID, "reason", safeReason(err))
		m.settle(ctx, s, domain.SessionFailed, reason)
		return CallbackOutcome{}, &CallbackError{Reason: reason, ProviderCode: providerCode(err), SessionID: s.ID}
	}
	return m.finish(ctx, rt, s, tok, issued)
}

// finish verifies the subject of a fresh token, stores the grant and
// completes the session in one store operation, then queues auth.granted.
// Shared by the callback and the device code poller.
func (m *Manager) finish(ctx context.Context, rt *appRuntime, s domain.Session, tok *oauth2.Token, issued time.Time) (CallbackOutcome, error) {
	fail := func(reason string) error { return &CallbackError{Reason: reason, SessionID: s.ID} }
	if err := m.verifySubject(ctx, rt, s, tok); err != nil {
		reason := ReasonSubjectUnverifiable
		if errors.Is(err, errSubjectMismatch) {
			reason = ReasonSubjectMismatch
		}
		m.log.WarnContext(ctx, "subject verification failed", "authSessionId", s.ID, "reason", reason, "err", err)
		m.settle(ctx, s, domain.SessionFailed, reason)
		// The token belongs to someone we will not bind it to: give it back.
		m.revokeAtProvider(ctx, rt, tok.RefreshToken, "refresh_token")
		m.revokeAtProvider(ctx, rt, tok.AccessToken, "access_token")
		return CallbackOutcome{}, fail(reason)
	}
	now := m.now().UTC()
	grantID := GrantID(s.OAuthAppRef, s.Subject)
	flow := s.Flow.Type
	g := domain.Grant{
		ID:              grantID,
		Provider:        s.Provider,
		OAuthAppRef:     s.OAuthAppRef,
		Subject:         s.Subject,
		Flow:            flow,
		ScopesGranted:   append([]string(nil), s.RequestedScopes...),
		ScopesRequested: append([]string(nil), s.RequestedScopes...),
		CreatedAt:       now,
		Tenant:          s.Tenant,
	}
	// From here a failure leaves tokens nobody will store: they go back to
	// the provider (RFC 7009) where it has a revocation endpoint.
	giveBack := func() {
		m.revokeAtProvider(ctx, rt, tok.RefreshToken, "refresh_token")
		m.revokeAtProvider(ctx, rt, tok.AccessToken, "access_token")
	}
	sealed, err := m.applyToken(ctx, g, tok, issued)
	if err != nil {
		m.log.ErrorContext(ctx, "grant not sealed", "authSessionId", s.ID, "err", err)
		m.settle(ctx, s, domain.SessionFailed, ReasonInternal)
		giveBack()
		return CallbackOutcome{}, fail(ReasonInternal)
	}
	done, g, err := m.cfg.Store.CompleteSession(ctx, s.ID, now, sealed)
	switch {
	case errors.Is(err, domain.ErrConflict):
		// The session moved on underneath (the sweep expired it, another
		// poller of a device code won): this path's tokens are not kept.
		m.log.WarnContext(ctx, "session completed elsewhere; tokens given back", "authSessionId", s.ID)
		giveBack()
		return CallbackOutcome{}, fail(ReasonSessionAlreadyUsed)
	case err != nil && m.grantStored(ctx, sealed):
		// The grant is durable but the session could not be marked (a
		// full disk between the two writes of the file store): the consent
		// is kept and the agent is told; the sweep completes the session.
		m.log.ErrorContext(ctx, "grant stored but session not marked completed; the sweep will finish it", "authSessionId", s.ID, "err", err)
		done, g = s, sealed
	case err != nil:
		m.log.ErrorContext(ctx, "session completion failed; nothing stored", "authSessionId", s.ID, "err", err)
		m.settle(ctx, s, domain.SessionFailed, ReasonInternal)
		giveBack()
		return CallbackOutcome{}, fail(ReasonInternal)
	default:
		m.log.InfoContext(ctx, "grant stored", "authSessionId", s.ID, "grantId", g.ID, "version", g.Version)
	}
	if err := m.emitGranted(ctx, done, g); err != nil && done.Status == domain.SessionCompleted {
		m.log.ErrorContext(ctx, "auth.granted not queued; will retry", "authSessionId", s.ID, "err", err)
		done.EventPending = true
		if _, uerr := m.cfg.Store.UpdateSession(ctx, done); uerr != nil {
			m.log.ErrorContext(ctx, "could not record pending auth.granted", "authSessionId", s.ID, "err", uerr)
		}
	}
	out := CallbackOutcome{SessionID: s.ID, GrantID: g.ID, OAuthAppRef: g.OAuthAppRef, Provider: g.Provider, Subject: g.Subject,
		ScopesNotGranted: missingScopes(g.ScopesRequested, g.ScopesGranted)}
	if len(out.ScopesNotGranted) > 0 {
		m.log.WarnContext(ctx, "provider granted fewer scopes than asked", "authSessionId", s.ID, "grantId", g.ID, "notGranted", out.ScopesNotGranted)
	}
	return out, nil
}

// emitGranted queues auth.granted to the session's resume target. The
// session id is the event id, so a retried delivery is queued once.
func (m *Manager) emitGranted(ctx context.Context, s domain.Session, g domain.Grant) error {
	if s.Resume.AgentName == "" && s.Resume.InstanceKey == "" {
		m.log.InfoContext(ctx, "session has no resume target; no auth.granted queued", "authSessionId", s.ID)
		return nil
	}
	input, err := json.Marshal(domain.AuthGrantedEvent{
		Type:             "auth.granted",
		OAuthAppRef:      g.OAuthAppRef,
		Provider:         g.Provider,
		Subject:          g.Subject,
		ScopesGranted:    g.ScopesGranted,
		ScopesNotGranted: missingScopes(g.ScopesRequested, g.ScopesGranted),
		GrantID:          g.ID,
	})
	if err != nil {
		return err
	}
	return m.cfg.Queue.Enqueue(ctx, domain.Event{
		ID:          s.ID,
		SwarmRef:    s.Resume.SwarmRef,
		InstanceKey: s.Resume.InstanceKey,
		AgentName:   s.Resume.AgentName,
		Input:       string(input),
		Origin:      s.Resume.Origin,
		Auth:        s.Resume.Auth,
		Metadata:    resumeMetadata("auth.granted", s),
		EnqueuedAt:  m.now().UTC(),
	})
}

// emitExpired queues auth.expired for a session a turn's tool call parked
// on (its resume names the call); sessions without one need no event.
func (m *Manager) emitExpired(ctx context.Context, s domain.Session) error {
	if s.Resume.TurnID == "" {
		return nil
	}
	input, err := json.Marshal(map[string]any{"type": "auth.expired", "oauthAppRef": s.OAuthAppRef, "subject": s.Subject})
	if err != nil {
		return err
	}
	return m.cfg.Queue.Enqueue(ctx, domain.Event{
		ID: "expired:" + s.ID, SwarmRef: s.Resume.SwarmRef, InstanceKey: s.Resume.InstanceKey, AgentName: s.Resume.AgentName,
		Input: string(input), Origin: s.Resume.Origin, Auth: s.Resume.Auth, Metadata: resumeMetadata("auth.expired", s),
		EnqueuedAt: m.now().UTC(),
	})
}

// claim moves a pending session to exchanging in one versioned write;
// ErrConflict when another writer moved it first.
func (m *Manager) claim(ctx context.Context, s domain.Session) (domain.Session, error) {
	s.Status, s.StatusReason = domain.SessionExchanging, ""
	return m.cfg.Store.UpdateSession(ctx, s)
}

// grantStored reports whether the store holds exactly the grant this
// callback sealed (its access token's ciphertext, whose IV is random, is
// this write's and no other's).
func (m *Manager) grantStored(ctx context.Context, sealed domain.Grant) bool {
	cur, err := m.cfg.Store.GetGrant(ctx, sealed.ID)
	return err == nil && cur.Token.AccessToken == sealed.Token.AccessToken
}

// resumeMetadata is an auth event's metadata: its type, the session, and
// the parked tool call the session's resume names (the turn engine's).
func resumeMetadata(eventType string, s domain.Session) map[string]string {
	md := map[string]string{"eventType": eventType, "authSessionId": s.ID}
	if r := s.Resume; r.TurnID != "" {
		md["turnId"], md["callId"], md["step"] = r.TurnID, r.CallID, strconv.Itoa(r.Step)
	}
	return md
}

// settle moves a pending session to a final status. Losing the race to
// another writer is fine: the session is final either way.
func (m *Manager) settle(ctx context.Context, s domain.Session, status domain.SessionStatus, reason string) {
	s.Status, s.StatusReason = status, reason
	if _, err := m.cfg.Store.UpdateSession(ctx, s); err != nil && !errors.Is(err, domain.ErrConflict) {
		m.log.ErrorContext(ctx, "could not mark session", "authSessionId", s.ID, "status", string(status), "err", err)
	}
}

// reasonText explains each failure reason to the person in the browser.
var reasonText = map[string]string{
	ReasonMissingState:         "The link is incomplete: it has no state parameter.",
	ReasonInvalidState:         "The link was not issued by this service or was altered.",
	ReasonSessionNotFound:      "This authorization request is unknown or was cleaned up.",
	ReasonSessionAlreadyUsed:   "This authorization link was already used. Ask the agent for a new one if you still need to connect.",
	ReasonSessionExpired:       "This authorization request expired. Ask the agent for a new link.",
	ReasonWrongCallback:        "The provider sent you back to the wrong address for this request.",
	ReasonProviderError:        "The provider did not grant access.",
	ReasonMissingCode:          "The provider sent no authorization code.",
	ReasonTokenExchangeFailed:  "The provider refused to issue a token.",
	ReasonTokenExchangeTimeout: "The provider did not answer in time. Ask the agent for a new link and try again.",
	ReasonSubjectMismatch:      "You signed in as a different account than the one this request is for. Nothing was stored; sign in with the right account.",
	ReasonSubjectUnverifiable:  "Your account could not be verified with the provider. Nothing was stored.",
	ReasonInternal:             "Something went wrong on our side. Nothing was stored.",
}

// ReasonText is what the callback page tells the person in the browser
// of a failure reason ("" for one it does not know): the console shows an
// operator the same words the user saw.
func ReasonText(reason string) string { return reasonText[reason] }
