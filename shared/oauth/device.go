package oauth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/oauth2"

	"github.com/agentauth/agentauth/shared/domain"
)

// prepareDeviceSession asks the provider for a device code (RFC 8628) and
// fills the session's sealed device code and the user's prompt.
func (m *Manager) prepareDeviceSession(ctx context.Context, rt *appRuntime, s *domain.Session) (*DeviceCodePrompt, error) {
	cfg := *rt.oauth
	cfg.Scopes = s.RequestedScopes
	var opts []oauth2.AuthCodeOption
	if rt.oauth.Endpoint.AuthStyle == oauth2.AuthStyleInParams {
		// x/oauth2 sends only client_id to the device endpoint; providers
		// that want client_secret_post there get it as a parameter.
		opts = append(opts, oauth2.SetAuthURLParam("client_secret", rt.app.ClientSecret.Reveal()))
	}
	pctx, cancel := m.providerCtx(ctx)
	defer cancel()
	da, err := cfg.DeviceAuth(pctx, opts...)
	if err != nil {
		return nil, atProvider("device authorization", err)
	}
	if da.DeviceCode == "" || da.UserCode == "" || da.VerificationURI == "" {
		return nil, fmt.Errorf("%w: device authorization response lacks device_code, user_code or verification_uri", errProvider)
	}
	sealed, err := m.cfg.SessionSealer.Seal(ctx, []byte(da.DeviceCode), domain.SessionBinding(*s, domain.FieldDeviceCode))
	if err != nil {
		return nil, fmt.Errorf("seal device code: %w", err)
	}
	interval := int(da.Interval)
	if interval <= 0 {
		interval = 5 // RFC 8628 §3.2 default
	}
	// x/oauth2 reports expiry on the wall clock; records use ours.
	expiry := s.ExpiresAt
	if !da.Expiry.IsZero() {
		if e := m.now().Add(time.Until(da.Expiry)).UTC(); e.Before(expiry) {
			expiry = e
		}
	}
	s.ExpiresAt = expiry
	s.Flow = domain.SessionFlow{
		Type: domain.FlowDeviceCode,
		DeviceCode: &domain.DeviceCodeInfo{
			DeviceCode:              sealed,
			VerificationURI:         da.VerificationURI,
			VerificationURIComplete: da.VerificationURIComplete,
			UserCode:                da.UserCode,
			Interval:                interval,
			ExpiresAt:               expiry,
		},
	}
	s.AuthorizationURL = da.VerificationURI
	if da.VerificationURIComplete != "" {
		s.AuthorizationURL = da.VerificationURIComplete
	}
	return &DeviceCodePrompt{VerificationURI: da.VerificationURI, UserCode: da.UserCode, Interval: interval}, nil
}

// startDevicePoller polls the token endpoint for a device session in the
// background, honouring interval and slow_down, until the user approves,
// denies or the code expires. One poller per session per process.
func (m *Manager) startDevicePoller(sessionID string) {
	if _, running := m.devices.LoadOrStore(sessionID, struct{}{}); running {
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer m.devices.Delete(sessionID)
		m.pollDevice(m.bg, sessionID)
	}()
}

func (m *Manager) pollDevice(ctx context.Context, id string) {
	s, err := m.cfg.Store.GetSession(ctx, id)
	if err != nil || s.Status != domain.SessionPending || s.Flow.DeviceCode == nil {
		return
	}
	rt := m.app(s.OAuthAppRef)
	if rt == nil {
		m.settle(ctx, s, domain.SessionFailed, ReasonInternal)
		return
	}
	d := s.Flow.DeviceCode
	code, err := m.cfg.SessionSealer.Open(ctx, d.DeviceCode, domain.SessionBinding(s, domain.FieldDeviceCode))
	if err != nil {
		m.log.ErrorContext(ctx, "device code does not open", "authSessionId", s.ID, "err", err)
		m.settle(ctx, s, domain.SessionFailed, ReasonInternal)
		return
	}
	cfg := *rt.oauth
	cfg.Scopes = s.RequestedScopes
	pctx := context.WithValue(ctx, oauth2.HTTPClient, m.cfg.HTTPClient)
	tok, err := cfg.DeviceAccessToken(pctx, &oauth2.DeviceAuthResponse{
		DeviceCode:      string(code),
		UserCode:        d.UserCode,
		VerificationURI: d.VerificationURI,
		Expiry:          time.Now().Add(d.ExpiresAt.Sub(m.now())),
		Interval:        int64(d.Interval),
	})
	if err != nil {
		err = atProvider("device access token", err)
		switch {
		case ctx.Err() != nil:
			return // shutting down: the next start resumes polling
		case errors.Is(err, context.DeadlineExceeded) || providerCode(err) == "expired_token":
			m.settle(ctx, s, domain.SessionExpired, ReasonSessionExpired)
		default:
			m.log.WarnContext(ctx, "device authorization failed", "authSessionId", s.ID, "reason", safeReason(err))
			m.settle(ctx, s, domain.SessionFailed, ReasonProviderError+":"+providerCodeOr(err, "unknown_error"))
		}
		return
	}
	// The call blocks for as long as the user takes to approve: the token's
	// lifetime counts from the response (late by one poll's round trip at
	// most), not from when polling started.
	issued := m.now()
	if _, err := m.finish(ctx, rt, s, tok, issued); err != nil {
		m.log.WarnContext(ctx, "device authorization not completed", "authSessionId", s.ID, "err", err)
	}
}

func providerCodeOr(err error, def string) string {
	if c := providerCode(err); c != "" {
		return c
	}
	return def
}

// ResumeDevicePollers restarts polling for pending device sessions, e.g.
// after a restart of the local server.
func (m *Manager) ResumeDevicePollers(ctx context.Context) (int, error) {
	sessions, _, err := m.cfg.Store.ListSessions(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	now := m.now()
	for _, s := range sessions {
		if s.Status == domain.SessionPending && s.Flow.DeviceCode != nil && now.Before(s.ExpiresAt) {
			m.startDevicePoller(s.ID)
			n++
		}
	}
	return n, nil
}

// Close stops background pollers and waits for them (bounded by ctx).
func (m *Manager) Close(ctx context.Context) error {
	m.stop()
	done := make(chan struct{})
	go func() { m.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
