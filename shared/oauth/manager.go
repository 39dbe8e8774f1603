package oauth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/sync/singleflight"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
)

// Config holds the Manager's dependencies.
type Config struct {
	Bundle *bundle.Bundle
	Store  domain.Store
	// Sealer seals grants' tokens (KMS envelope encryption in AWS).
	Sealer domain.Sealer
	// SessionSealer seals auth sessions' state, PKCE verifier and device
	// code; nil means Sealer. Sessions live minutes and are opened by the
	// callback function: in AWS a local key from Secrets Manager keeps the
	// callback to one KMS call (sealing the new grant).
	SessionSealer domain.Sealer
	// Queue receives auth.granted events.
	Queue domain.EventQueue
	// StateKeys sign state (first) and verify it (all); at least 32 bytes
	// each.
	StateKeys [][]byte
	// BaseURL is the public URL the provider redirects to, used for apps
	// without redirect.baseUrl (e.g. http://127.0.0.1:8080).
	BaseURL string
	// HTTPClient calls providers; nil means a client with a 10 s timeout.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SessionTTL is how long an auth session stays valid (default 10 min).
	SessionTTL time.Duration
	// ProviderTimeout bounds each call to a provider's token, userinfo or
	// revocation endpoint (default 10 s).
	ProviderTimeout time.Duration
	// RefreshLeaseTTL bounds how long one process may hold a grant's
	// refresh lease (default 30 s).
	RefreshLeaseTTL time.Duration
	// MaxWait bounds a session-status long poll (default and at most
	// MaxWait, 55 s).
	MaxWait time.Duration
	// SessionRetention is how long after its expiry a finished session is
	// kept before the cleanup deletes it (default SessionRetention, 24 h).
	SessionRetention time.Duration
	// TenantClaim is the dot path of the tenant in a request's claims
	// (default domain.DefaultTenantClaim): a session records the tenant of
	// the request that started it, and its grant that of the session that
	// completed it, so the console shows a tenant admin their tenant's.
	TenantClaim string
}

// Manager is the OAuthManager.
type Manager struct {
	cfg     Config
	state   *StateCodec
	apps    map[string]*appRuntime
	flight  singleflight.Group
	owner   string // lease owner id of this process
	now     func() time.Time
	log     *slog.Logger
	devices sync.Map // session id → struct{}: device pollers running here
	wg      sync.WaitGroup
	bg      context.Context // background work (device pollers); ended by Close
	stop    context.CancelFunc
}

// appRuntime is what the manager derives once per app at start.
type appRuntime struct {
	app      *bundle.OAuthApp
	oauth    *oauth2.Config
	template *bundle.Template // nil: provider's built-in builder
	idTokens idTokenVerifier  // set for subjectVerification source idToken
}

// New checks cfg and prepares every app of the bundle.
func New(cfg Config) (*Manager, error) {
	switch {
	case cfg.Bundle == nil:
		return nil, errors.New("oauth: no bundle")
	case cfg.Store == nil:
		return nil, errors.New("oauth: no store")
	case cfg.Sealer == nil:
		return nil, errors.New("oauth: no sealer")
	case cfg.Queue == nil:
		return nil, errors.New("oauth: no event queue")
	}
	codec, err := NewStateCodec(cfg.StateKeys)
	if err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	if cfg.SessionSealer == nil {
		cfg.SessionSealer = cfg.Sealer
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.ProviderTimeout <= 0 {
		cfg.ProviderTimeout = 10 * time.Second
	}
	if cfg.MaxWait <= 0 || cfg.MaxWait > MaxWait {
		cfg.MaxWait = MaxWait
	}
	if cfg.RefreshLeaseTTL <= 0 {
		cfg.RefreshLeaseTTL = 30 * time.Second
	}
	if cfg.SessionRetention <= 0 {
		cfg.SessionRetention = SessionRetention
	}
	var owner [8]byte
	_, _ = rand.Read(owner[:])
	m := &Manager{
		cfg:   cfg,
		state: codec,
		apps:  make(map[string]*appRuntime, len(cfg.Bundle.OAuthApps)),
		owner: hex.EncodeToString(owner[:]),
		now:   cfg.Now,
		log:   cfg.Logger,
	}
	m.bg, m.stop = context.WithCancel(context.Background())
	for name, app := range cfg.Bundle.OAuthApps {
		rt, err := m.prepareApp(app)
		if err != nil {
			return nil, fmt.Errorf("oauth: OAuthApp/%s: %w", name, err)
		}
		m.apps[name] = rt
	}
	return m, nil
}

func (m *Manager) prepareApp(app *bundle.OAuthApp) (*appRuntime, error) {
	style := oauth2.AuthStyleAutoDetect
	switch app.AuthStyle {
	case "header":
		style = oauth2.AuthStyleInHeader
	case "params":
		style = oauth2.AuthStyleInParams
	default:
		if app.Flow == bundle.FlowDeviceCode {
			// Auto-detect retries every failed token request with the
			// other style, and while the user has not approved yet every
			// poll fails (authorization_pending): it would poll twice per
			// interval. Device clients send their id in the body.
			style = oauth2.AuthStyleInParams
		}
	}
	rt := &appRuntime{
		app: app,
		oauth: &oauth2.Config{
			ClientID:     app.ClientID,
			ClientSecret: app.ClientSecret.Reveal(),
			Endpoint: oauth2.Endpoint{
				AuthURL:       app.Endpoints.AuthorizationURL,
				TokenURL:      app.Endpoints.TokenURL,
				DeviceAuthURL: app.Endpoints.DeviceAuthorizationURL,
				AuthStyle:     style,
			},
			RedirectURL: app.CallbackURL(m.cfg.BaseURL),
			Scopes:      app.Scopes,
		},
	}
	if sv := app.SubjectVerification; sv != nil && !sv.InsecureSkip {
		if sv.Template != "" {
			t, err := bundle.ParseTemplate(sv.Template)
			if err != nil {
				return nil, fmt.Errorf("subjectVerification.template: %w", err)
			}
			rt.template = t
		}
		if sv.Source == bundle.VerifyIDToken {
			rt.idTokens = newOIDCVerifier(sv.Issuer, sv.JWKSURL, app.ClientID, m.cfg.HTTPClient)
		}
	}
	return rt, nil
}

// appNotFound says that ref names no OAuthApp of the bundle, and which
// one it likely misspells (the caller is a trusted runtime, which may
// know the bundle's app names).
func (m *Manager) appNotFound(ref domain.ObjectRef) string {
	msg := fmt.Sprintf("%s is not in the bundle", ref)
	if ref.Kind != "OAuthApp" {
		return msg + " (an OAuthApp reference is OAuthApp/<name>)"
	}
	names := slices.Sorted(maps.Keys(m.apps))
	if near := domain.Suggest(ref.Name, names); near != "" {
		msg += fmt.Sprintf(" (did you mean OAuthApp/%s?)", near)
	}
	return msg
}

// app returns the runtime of the OAuthApp ref names, or nil.
func (m *Manager) app(ref domain.ObjectRef) *appRuntime {
	if ref.Kind != "OAuthApp" {
		return nil
	}
	return m.apps[ref.Name]
}

// providerCtx carries our HTTP client into x/oauth2 and bounds the call.
func (m *Manager) providerCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, m.cfg.HTTPClient)
	return context.WithTimeout(ctx, m.cfg.ProviderTimeout)
}

// GetAccessToken is ctx.oauth.getAccessToken: ready, authorization_required
// or error. It never returns a Go error: every failure is an error result,
// and nothing in a result other than a ready token is secret.
func (m *Manager) GetAccessToken(ctx context.Context, req TokenRequest) Result {
	rt := m.app(req.AppRef)
	if rt == nil {
		return ErrorResult(CodeOAuthAppNotFound, m.appNotFound(req.AppRef))
	}
	app := rt.app
	minTTL := DefaultMinTTLSeconds
	if req.MinTTLSeconds != nil {
		minTTL = *req.MinTTLSeconds
		if minTTL < 0 || minTTL > MaxMinTTLSeconds {
			return ErrorResult(CodeConfigurationError, fmt.Sprintf("minTtlSeconds must be between 0 and %d, got %d", MaxMinTTLSeconds, minTTL))
		}
	}
	subject := resolveSubject(app.SubjectMode, req.Auth)
	if subject == "" {
		return ErrorResult(CodeSubjectUnavailable, fmt.Sprintf("turn.auth.subjects.%s is required for %s (subjectMode %s)", app.SubjectMode, req.AppRef, app.SubjectMode))
	}
	scopes := req.Scopes
	if len(scopes) == 0 {
		scopes = app.Scopes
	}
	if !IsSubset(scopes, app.Scopes) {
		return ErrorResult(CodeScopeNotAllowed, fmt.Sprintf("requested scopes %s are not a subset of %s scopes %s", quoteList(scopes), req.AppRef, quoteList(app.Scopes)))
	}

	grantID := GrantID(app.Ref(), subject)
	g, err := m.cfg.Store.GetGrant(ctx, grantID)
	revokedNow := false
	switch {
	case errors.Is(err, domain.ErrNotFound):
		// no grant yet: ask the user
	case errors.Is(err, domain.ErrCorrupt):
		m.log.ErrorContext(ctx, "grant unreadable", "grantId", grantID, "err", err)
		return ErrorResult(CodeGrantUnreadable, fmt.Sprintf("grant %s cannot be read; an operator must inspect it", grantID))
	case err != nil:
		m.log.ErrorContext(ctx, "grant read failed", "grantId", grantID, "err", err)
		return ErrorResult(CodeGrantUnreadable, fmt.Sprintf("grant %s could not be read", grantID))
	default:
		if res, declined := notGrantedAgain(grantScopes{g.Revoked, g.ScopesRequested, g.ScopesGranted}, scopes); declined {
			return res
		}
		res, done := m.fromGrant(ctx, rt, g, scopes, minTTL)
		if done {
			return res
		}
		if !g.Revoked {
			// Ask for what the grant already had too, so a narrower
			// request never narrows the grant others rely on.
			scopes = unionWithin(scopes, g.ScopesGranted, app.Scopes)
		}
		revokedNow = res.Status == statusRevokedNow
	}
	res := m.startSession(ctx, rt, subject, scopes, req)
	if revokedNow && res.Status == StatusAuthorizationRequired {
		// This request's refresh was refused and revoked the grant: the
		// consent it starts is announced to its resume target.
		if tomb, err := m.cfg.Store.GetGrant(ctx, grantID); err == nil && tomb.Revoked {
			m.emitRevoked(ctx, tomb, res, req.Resume)
		}
	}
	return res
}

// statusRevokedNow is fromGrant's Result.Status (never a caller's) when
// its refresh was refused and revoked the grant.
const statusRevokedNow = "revoked_now"

// fromGrant answers from an existing grant. done is false when the user
// must authorize again (revoked, too narrow, expired without refresh,
// refresh token rejected — then the Result's status is statusRevokedNow).
func (m *Manager) fromGrant(ctx context.Context, rt *appRuntime, g domain.Grant, scopes []string, minTTL int) (Result, bool) {
	if g.Revoked || !IsSubset(apiScopes(scopes), g.ScopesGranted) {
		return Result{}, false
	}
	now := m.now()
	if TokenValid(g, minTTL, now) || youngShortLived(g, minTTL, now) {
		return m.ready(ctx, g, scopes, minTTL)
	}
	if g.Token.RefreshToken == nil {
		return Result{}, false
	}
	fresh, err := m.refresh(ctx, rt, g)
	switch {
	case errors.Is(err, errGrantRevoked):
		return Result{Status: statusRevokedNow}, false
	case err != nil:
		m.log.WarnContext(ctx, "refresh failed", "grantId", g.ID, "err", err)
		return ErrorResult(CodeRefreshFailed, fmt.Sprintf("refreshing grant %s failed: %s", g.ID, safeReason(err))), true
	}
	if fresh.Revoked {
		return Result{}, false
	}
	return m.ready(ctx, fresh, scopes, minTTL)
}

// youngShortLived reports whether g's token was issued with a lifetime no
// longer than minTTL and still has more than half of it left. Such a
// provider can never hand out a token that lives minTTL; refreshing on
// every call would only hammer it (and rotate the refresh token each
// time). So a short-lived token is refreshed once half its lifetime is
// gone: one refresh per grant per half lifetime, decided from the stored
// grant alone, so it holds across processes. The answer then says the
// token is shorter than asked.
func youngShortLived(g domain.Grant, minTTL int, now time.Time) bool {
	if g.Revoked || g.Token.ExpiresAt == nil || g.Token.IssuedAt.IsZero() {
		return false
	}
	life := g.Token.ExpiresAt.Sub(g.Token.IssuedAt)
	if life <= 0 || life > time.Duration(minTTL)*time.Second {
		return false
	}
	return g.Token.ExpiresAt.Sub(now) > life/2
}

// ready opens g's access token into a ready result for a request of
// scopes; TTLShorterThanRequested is set when the token has no more than
// minTTL seconds left, Refreshable when the grant has a refresh token,
// ScopesNotGranted to the requested protocol scopes the grant lacks.
func (m *Manager) ready(ctx context.Context, g domain.Grant, scopes []string, minTTL int) (Result, bool) {
	tok, err := m.cfg.Sealer.Open(ctx, g.Token.AccessToken, domain.GrantBinding(g, domain.FieldAccessToken))
	if err != nil {
		m.log.ErrorContext(ctx, "grant access token does not open", "grantId", g.ID, "keyId", g.Token.AccessToken.KeyID, "err", err)
		return ErrorResult(CodeGrantUnreadable, fmt.Sprintf("grant %s cannot be decrypted; an operator must inspect it", g.ID)), true
	}
	return Result{
		Status:      StatusReady,
		AccessToken: domain.NewSecret(string(tok)),
		TokenType:   g.Token.TokenType,
		ExpiresAt:   g.Token.ExpiresAt,
		Scopes:      g.ScopesGranted,
		// The provider issues shorter tokens than minTTL asks for.
		TTLShorterThanRequested: !TokenValid(g, minTTL, m.now()),
		Refreshable:             g.Token.RefreshToken != nil,
		ScopesNotGranted:        missingScopes(scopes, g.ScopesGranted),
	}, true
}

// TokenValid is the spec's isTokenValid: not revoked, and either no expiry
// or more than minTTL seconds left.
func TokenValid(g domain.Grant, minTTL int, now time.Time) bool {
	if g.Revoked {
		return false
	}
	if g.Token.ExpiresAt == nil {
		return true
	}
	return g.Token.ExpiresAt.Sub(now) > time.Duration(minTTL)*time.Second
}

func resolveSubject(mode string, auth domain.TurnAuth) string {
	if auth.Subjects == nil {
		return ""
	}
	switch mode {
	case domain.SubjectModeGlobal:
		return auth.Subjects.Global
	case domain.SubjectModeUser:
		return auth.Subjects.User
	}
	return ""
}

// maxStartAttempts bounds startSession's rounds of lookup and create: a
// create loses to a concurrent one only when the key is taken, and the
// next lookup finds the winner.
const maxStartAttempts = 3

// startSession answers authorization_required: with the pending session an
// earlier request for the same consent started (same app, subject, scopes
// and resume target: domain.SessionReuseKey) while it has more than
// domain.SessionReuseMargin left, else with a new one. Sessions no longer
// pile up while the user has not consented yet (issue 9.11). Of
// concurrent requests for one consent, the store lets one create the
// session and the others find it, so all get the same link.
func (m *Manager) startSession(ctx context.Context, rt *appRuntime, subject string, scopes []string, req TokenRequest) Result {
	var resume domain.ResumeInfo
	if req.Resume != nil {
		resume = *req.Resume
	}
	key := domain.SessionReuseKey(rt.app.Ref(), subject, scopes, resume)
	for attempt := 1; ; attempt++ {
		if res, ok := m.reuseSession(ctx, key); ok {
			return res
		}
		res, err := m.newSession(ctx, rt, subject, scopes, resume, key, m.tenantOf(req.Auth), req.Via)
		if err == nil || attempt == maxStartAttempts || !errors.Is(err, domain.ErrConflict) {
			return res
		}
		// Another request took the key meanwhile: answer with its session.
	}
}

// reuseSession answers with the pending session that holds key, if any.
// A session whose link cannot be rebuilt (its state no longer opens) is
// failed, which frees the key for a new one.
func (m *Manager) reuseSession(ctx context.Context, key string) (Result, bool) {
	s, err := m.cfg.Store.FindPendingSession(ctx, key, m.now())
	if errors.Is(err, domain.ErrNotFound) {
		return Result{}, false
	}
	if err != nil {
		// Starting a new session is still right; a store that cannot
		// read the key will refuse or replace it.
		m.log.WarnContext(ctx, "pending session lookup failed", "err", err)
		return Result{}, false
	}
	link, err := m.linkOf(ctx, s)
	if err != nil {
		m.log.WarnContext(ctx, "pending session's link cannot be rebuilt; starting another", "authSessionId", s.ID, "err", err)
		m.settle(ctx, s, domain.SessionFailed, ReasonInternal)
		return Result{}, false
	}
	if s.Flow.DeviceCode != nil {
		// No-op while this process polls it; after a restart, this
		// resumes polling so the user's approval is seen.
		m.startDevicePoller(s.ID)
	}
	m.log.InfoContext(ctx, "auth session reused", "authSessionId", s.ID, "oauthApp", s.OAuthAppRef.Name, "flow", s.Flow.Type)
	return authorizationRequired(s, link), true
}

// newSession creates an auth session holding key, started by a request of
// tenant that came through via. The error is set when the session was not
// stored (then Result is an error result); ErrConflict means another
// session holds key.
func (m *Manager) newSession(ctx context.Context, rt *appRuntime, subject string, scopes []string, resume domain.ResumeInfo, key, tenant, via string) (Result, error) {
	app := rt.app
	now := m.now().UTC()
	s := domain.Session{
		ID:              domain.NewSessionID(),
		Provider:        app.Provider,
		OAuthAppRef:     app.Ref(),
		SubjectMode:     app.SubjectMode,
		Subject:         subject,
		RequestedScopes: append([]string(nil), scopes...),
		Status:          domain.SessionPending,
		CreatedAt:       now,
		ExpiresAt:       now.Add(m.cfg.SessionTTL),
		Resume:          resume,
		ReuseKey:        key,
		Tenant:          tenant,
		StartedBy:       via,
	}
	var err error
	link := ""
	if app.Flow == bundle.FlowDeviceCode {
		_, err = m.prepareDeviceSession(ctx, rt, &s)
		link = s.AuthorizationURL
	} else {
		link, err = m.prepareCodeSession(ctx, rt, &s, now)
	}
	if err != nil {
		m.log.ErrorContext(ctx, "auth session not started", "oauthApp", app.Name, "err", err)
		if errors.Is(err, errProvider) {
			return ErrorResult(CodeConfigurationError, fmt.Sprintf("%s: the provider refused to start authorization: %s", app.Ref(), safeReason(err))), err
		}
		return ErrorResult(CodeConfigurationError, fmt.Sprintf("%s: could not start an auth session", app.Ref())), err
	}
	if err := m.cfg.Store.CreateSession(ctx, s); err != nil {
		if !errors.Is(err, domain.ErrConflict) {
			m.log.ErrorContext(ctx, "auth session not stored", "authSessionId", s.ID, "err", err)
		}
		return ErrorResult(CodeConfigurationError, "could not store the auth session"), err
	}
	if s.Flow.DeviceCode != nil {
		m.startDevicePoller(s.ID)
	}
	m.log.InfoContext(ctx, "auth session started", "authSessionId", s.ID, "oauthApp", app.Name, "flow", s.Flow.Type, "subjectMode", s.SubjectMode, "startedBy", s.StartedBy)
	return authorizationRequired(s, link), nil
}

// tenantOf is the tenant a request's claims name ("" when none).
func (m *Manager) tenantOf(auth domain.TurnAuth) string {
	path := m.cfg.TenantClaim
	if path == "" {
		path = domain.DefaultTenantClaim
	}
	t, _ := domain.ClaimText(auth.Claims, path)
	return t
}

// authorizationRequired is the answer that sends the user to session s
// through link, the same for a new session and a reused one.
func authorizationRequired(s domain.Session, link string) Result {
	var prompt *DeviceCodePrompt
	if d := s.Flow.DeviceCode; d != nil {
		prompt = &DeviceCodePrompt{VerificationURI: d.VerificationURI, UserCode: d.UserCode, Interval: d.Interval}
	}
	return Result{
		Status:           StatusAuthorizationRequired,
		AuthSessionID:    s.ID,
		AuthorizationURL: link,
		SessionExpiresAt: s.ExpiresAt,
		Message:          promptMessage(s.Provider, prompt),
		DeviceCode:       prompt,
	}
}

func promptMessage(provider string, d *DeviceCodePrompt) string {
	if d != nil {
		return fmt.Sprintf("Connect your %s account: open %s and enter the code %s. The task continues once you approve.", provider, d.VerificationURI, d.UserCode)
	}
	return fmt.Sprintf("Connect your %s account: open the link and approve access. The task continues once you approve.", provider)
}

// prepareCodeSession fills the PKCE pair, the sealed state and the
// authorization URL of an Authorization Code session, and returns the link
// the user opens. The state is sealed at rest (spec 001 §5.3), so the
// session's stored URL lacks it; linkOf adds it back.
func (m *Manager) prepareCodeSession(ctx context.Context, rt *appRuntime, s *domain.Session, now time.Time) (string, error) {
	verifier := oauth2.GenerateVerifier()
	state := m.state.Encode(s.ID, now)
	sealedVerifier, err := m.cfg.SessionSealer.Seal(ctx, []byte(verifier), domain.SessionBinding(*s, domain.FieldCodeVerifier))
	if err != nil {
		return "", fmt.Errorf("seal code verifier: %w", err)
	}
	sealedState, err := m.cfg.SessionSealer.Seal(ctx, []byte(state), domain.SessionBinding(*s, domain.FieldState))
	if err != nil {
		return "", fmt.Errorf("seal state: %w", err)
	}
	s.Flow = domain.SessionFlow{
		Type: domain.FlowAuthorizationCode,
		PKCE: &domain.PKCE{
			Method:        "S256",
			CodeVerifier:  sealedVerifier,
			CodeChallenge: oauth2.S256ChallengeFromVerifier(verifier),
		},
		State: sealedState,
	}
	s.AuthorizationURL = m.authorizationURL(rt, s, verifier)
	return withState(s.AuthorizationURL, state), nil
}

// authorizationURL builds the spec's URL without its state:
// response_type=code, client_id, redirect_uri, space-joined scope,
// code_challenge (S256), string options as extra parameters, and a nonce
// when the subject is verified from an id_token.
func (m *Manager) authorizationURL(rt *appRuntime, s *domain.Session, verifier string) string {
	cfg := *rt.oauth
	cfg.Scopes = s.RequestedScopes
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)}
	keys := make([]string, 0, len(rt.app.Options))
	for k := range rt.app.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, ok := rt.app.Options[k].(string); ok {
			opts = append(opts, oauth2.SetAuthURLParam(k, v))
		}
	}
	if rt.idTokens != nil {
		opts = append(opts, oauth2.SetAuthURLParam("nonce", m.state.nonceFor(s.ID)))
	}
	return cfg.AuthCodeURL("", opts...)
}

// withState appends the state parameter to a stored authorization URL.
func withState(link, state string) string {
	sep := "&"
	if !strings.Contains(link, "?") {
		sep = "?"
	}
	return link + sep + "state=" + url.QueryEscape(state)
}

// linkOf returns the authorization link of s as the user opens it: the
// stored URL with the session's state, opened from its sealed copy. A code
// session written before the state was kept out of the URL holds it
// already and is returned as stored; so is a device session's
// verification URI.
func (m *Manager) linkOf(ctx context.Context, s domain.Session) (string, error) {
	if s.Flow.Type != domain.FlowAuthorizationCode || s.Flow.State.IsZero() {
		return s.AuthorizationURL, nil
	}
	u, err := url.Parse(s.AuthorizationURL)
	if err != nil {
		return "", fmt.Errorf("session %s: stored authorization URL does not parse", s.ID)
	}
	if u.Query().Has("state") {
		return s.AuthorizationURL, nil
	}
	state, err := m.cfg.SessionSealer.Open(ctx, s.Flow.State, domain.SessionBinding(s, domain.FieldState))
	if err != nil {
		return "", fmt.Errorf("session %s: open state: %w", s.ID, err)
	}
	return withState(s.AuthorizationURL, string(state)), nil
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// unionWithin returns a ∪ (b ∩ allowed), a's order first.
func unionWithin(a, b, allowed []string) []string {
	out := append([]string(nil), a...)
	for _, s := range b {
		if slices.Contains(allowed, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// MaxWait is the longest session-status long poll this manager allows.
func (m *Manager) MaxWait() time.Duration { return m.cfg.MaxWait }
