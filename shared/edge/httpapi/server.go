package httpapi

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/oauth"
)

// CallerAuth decides whether a request comes from a trusted runtime.
type CallerAuth interface {
	Authenticate(r *http.Request) error
}

// BearerToken authenticates callers by a shared runtime token, compared in
// constant time (the local server's credential).
type BearerToken struct{ Token domain.Secret }

// ErrUnauthenticated: no valid caller credential.
var ErrUnauthenticated = errors.New("unauthenticated")

// ErrNotThisRuntimeToken: a bearer token was sent, but not the one this
// server takes (a stale export after a reset, another home's).
var ErrNotThisRuntimeToken = fmt.Errorf("%w: not this server's runtime token", ErrUnauthenticated)

// Authenticate checks "Authorization: Bearer <token>".
func (b BearerToken) Authenticate(r *http.Request) error {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || b.Token.IsZero() {
		return ErrUnauthenticated
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(b.Token.Reveal())) != 1 {
		return ErrNotThisRuntimeToken
	}
	return nil
}

// GatewayAuthorized trusts the request because API Gateway already checked
// the caller (IAM authorization on the route). Use it only behind such a
// gateway.
type GatewayAuthorized struct{}

// Authenticate always succeeds.
func (GatewayAuthorized) Authenticate(*http.Request) error { return nil }

// Server serves the OAuth routes.
type Server struct {
	mgr    *oauth.Manager
	bundle *bundle.Bundle
	caller CallerAuth
	log    *slog.Logger
	extra  []mounted
	// runtimeExtra are mounted with the runtime routes only.
	runtimeExtra []mounted
	// about is what GET / says besides the routes.
	about About
}

// mounted is a set of routes from another package and how GET /
// describes them.
type mounted struct {
	register func(*http.ServeMux)
	parts    []Part
}

// Mount adds routes (the tool plane's) to the handlers built after the
// call; they get the same request ids, logging and JSON 404s and 405s.
// parts describe them on GET /.
func (s *Server) Mount(register func(*http.ServeMux), parts ...Part) {
	s.extra = append(s.extra, mounted{register, parts})
}

// MountRuntime adds routes that belong with the runtime routes only (the
// turn routes): the runtime function and the local server serve them, the
// public callback function and the tools function never do.
func (s *Server) MountRuntime(register func(*http.ServeMux), parts ...Part) {
	s.runtimeExtra = append(s.runtimeExtra, mounted{register, parts})
}

// SetAbout sets what GET / says of the process, for the handlers built
// after the call.
func (s *Server) SetAbout(a About) { s.about = a }

// MountedHandler serves only the mounted routes and health: the tools
// function.
func (s *Server) MountedHandler() http.Handler { return s.routes(false, false) }

// New returns a Server.
func New(mgr *oauth.Manager, b *bundle.Bundle, caller CallerAuth, log *slog.Logger) (*Server, error) {
	if mgr == nil || b == nil || caller == nil {
		return nil, errors.New("httpapi: manager, bundle and caller auth are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{mgr: mgr, bundle: b, caller: caller, log: log}, nil
}

// Handler returns the router with every route (the local server).
func (s *Server) Handler() http.Handler { return s.routes(true, true) }

// RuntimeHandler serves only the runtime routes (token, sessions, revoke,
// pending, health): the gettoken function behind IAM authorization.
func (s *Server) RuntimeHandler() http.Handler { return s.routes(true, false) }

// CallbackHandler serves only the apps' callback paths and health: the
// public callback function.
func (s *Server) CallbackHandler() http.Handler { return s.routes(false, true) }

// Only serves the routes register adds, and health: a function that
// serves one route (the turn function's event stream).
func (s *Server) Only(register func(*http.ServeMux)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	register(mux)
	mux.Handle("/", httpx.Unmatched(mux))
	return httpx.Observe(s.log, mux)
}

func (s *Server) routes(runtime, callbacks bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	var parts []Part
	if runtime {
		routes := []struct {
			pattern string
			h       http.HandlerFunc
		}{
			{"POST /v1/oauth/token", s.token},
			{"GET /v1/oauth/sessions/{id}", s.session},
			{"POST /v1/oauth/revoke", s.revoke},
			{"GET /v1/oauth/pending", s.pending},
		}
		p := Part{Name: "OAuth runtime", Credential: httpx.RuntimeToken.Name(), Doc: "README.md#http-api"}
		for _, rt := range routes {
			mux.Handle(rt.pattern, s.runtime(rt.h))
			p.Routes = append(p.Routes, rt.pattern)
		}
		parts = append(parts, p)
	}
	if callbacks {
		p := Part{Name: "OAuth callbacks", Credential: "none (public)", Doc: "README.md#the-bundle-oauthapp-reference"}
		for _, app := range s.bundle.OAuthApps {
			if app.Redirect.CallbackPath != "" {
				mux.Handle("GET "+app.Redirect.CallbackPath, s.callback(app))
				p.Routes = append(p.Routes, "GET "+app.Redirect.CallbackPath)
			}
		}
		if len(p.Routes) > 0 {
			slices.Sort(p.Routes)
			parts = append(parts, p)
		}
	}
	for _, m := range s.extra {
		m.register(mux)
		parts = append(parts, m.parts...)
	}
	if runtime {
		for _, m := range s.runtimeExtra {
			m.register(mux)
			parts = append(parts, m.parts...)
		}
	}
	parts = append(parts, Part{Name: "health", Routes: []string{"GET /healthz"}, Credential: "none (public)", Doc: "README.md#http-api"})
	for i := range parts {
		parts[i].Routes = slices.SortedStableFunc(slices.Values(parts[i].Routes), byPath)
	}
	mux.Handle("GET /{$}", s.index(parts))
	mux.Handle("/", httpx.Unmatched(mux))
	return httpx.Observe(s.log, mux)
}

// byPath orders ServeMux patterns ("GET /v1/x", "/mcp") by path, then
// method.
func byPath(a, b string) int {
	am, ap := splitPattern(a)
	bm, bp := splitPattern(b)
	if c := strings.Compare(ap, bp); c != 0 {
		return c
	}
	return strings.Compare(am, bm)
}

func splitPattern(p string) (method, path string) {
	if m, rest, ok := strings.Cut(p, " "); ok {
		return m, rest
	}
	return "", p
}

// runtime guards a route for trusted runtime callers.
func (s *Server) runtime(h http.HandlerFunc) http.Handler { return RequireCaller(s.caller, h) }

// RequireCaller guards h for trusted runtime callers: the runtime routes
// here and those mounted beside them (the turn routes) refuse a caller
// alike.
func RequireCaller(caller CallerAuth, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := caller.Authenticate(r); err != nil {
			msg := httpx.RuntimeToken.Refusal(r) // an agent JWT sent here says so
			switch {
			case msg != "":
			case errors.Is(err, ErrNotThisRuntimeToken):
				msg = "the bearer token sent is not this server's runtime token: `agentauth runtime-token` prints the one it takes (AGENTAUTH_RUNTIME_TOKEN, else <home>/runtime-token; a reset makes a new one)"
			default:
				msg = "a valid runtime credential is required (Authorization: Bearer <runtime token>)"
			}
			httpx.WriteError(w, r, http.StatusUnauthorized, httpx.CodeUnauthenticated, msg)
			return
		}
		h(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "bundleRevision": s.revision(r.Context())})
}

type tokenRequest struct {
	OAuthAppRef   json.RawMessage `json:"oauthAppRef"`
	Scopes        []string        `json:"scopes"`
	MinTTLSeconds *int            `json:"minTtlSeconds"`
	Turn          *struct {
		Auth   domain.TurnAuth `json:"auth"`
		Origin map[string]any  `json:"origin"`
		Resume *struct {
			SwarmRef    *domain.ObjectRefLike `json:"swarmRef"`
			InstanceKey string                `json:"instanceKey"`
			AgentName   string                `json:"agentName"`
		} `json:"resume"`
	} `json:"turn"`
}

// tokenResponse is the wire OAuthTokenResult.
type tokenResponse struct {
	Status           string                  `json:"status"`
	AccessToken      string                  `json:"accessToken,omitempty"`
	TokenType        string                  `json:"tokenType,omitempty"`
	ExpiresAt        *time.Time              `json:"expiresAt,omitempty"`
	Scopes           []string                `json:"scopes,omitempty"`
	TTLShorter       bool                    `json:"ttlShorterThanRequested,omitempty"`
	Refreshable      *bool                   `json:"refreshable,omitempty"`
	ScopesNotGranted []string                `json:"scopesNotGranted,omitempty"`
	AuthSessionID    string                  `json:"authSessionId,omitempty"`
	AuthorizationURL string                  `json:"authorizationUrl,omitempty"`
	Message          string                  `json:"message,omitempty"`
	DeviceCode       *oauth.DeviceCodePrompt `json:"deviceCode,omitempty"`
	Error            *oauth.ResultError      `json:"error,omitempty"`
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	var req tokenRequest
	if !httpx.DecodeJSON(w, r, httpx.DefaultMaxBody, &req) {
		return
	}
	if len(req.OAuthAppRef) == 0 || string(req.OAuthAppRef) == "null" {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, `request body: "oauthAppRef" is required ("OAuthApp/<name>" or {"kind","name"})`)
		return
	}
	tr := oauth.TokenRequest{Scopes: req.Scopes, MinTTLSeconds: req.MinTTLSeconds, Via: domain.StartedByREST}
	if req.Turn != nil {
		tr.Auth = req.Turn.Auth
		if rs := req.Turn.Resume; rs != nil {
			var missing []string
			if rs.SwarmRef == nil {
				missing = append(missing, "swarmRef")
			}
			if rs.InstanceKey == "" {
				missing = append(missing, "instanceKey")
			}
			if rs.AgentName == "" {
				missing = append(missing, "agentName")
			}
			if len(missing) > 0 {
				httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, "request body: turn.resume needs "+strings.Join(missing, ", "))
				return
			}
			if k := rs.SwarmRef.Kind; k != "Swarm" {
				// Events are delivered by swarm name: a resume target of
				// another kind would wake the swarm of that name.
				httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, fmt.Sprintf(`request body: turn.resume.swarmRef must name a Swarm ("Swarm/<name>"), not a %q`, k))
				return
			}
			tr.Resume = &domain.ResumeInfo{
				SwarmRef:    rs.SwarmRef.ObjectRef,
				InstanceKey: rs.InstanceKey,
				AgentName:   rs.AgentName,
				Origin:      req.Turn.Origin,
				Auth:        req.Turn.Auth,
			}
		}
	}
	var res oauth.Result
	var ref domain.ObjectRefLike
	if err := httpx.Unmarshal(req.OAuthAppRef, &ref); err != nil {
		res = oauth.ErrorResult(oauth.CodeOAuthAppNotFound, "oauthAppRef: "+strings.TrimPrefix(err.Error(), "json: "))
	} else if ref.Kind != "OAuthApp" {
		res = oauth.ErrorResult(oauth.CodeOAuthAppNotFound, fmt.Sprintf("oauthAppRef: kind must be OAuthApp, not %q", ref.Kind))
	} else {
		tr.AppRef = ref.ObjectRef
		res = s.mgr.GetAccessToken(r.Context(), tr)
	}
	resp := tokenResponse{Status: res.Status, Error: res.Error}
	switch res.Status {
	case oauth.StatusReady:
		// The one place a token leaves agentauth.
		resp.AccessToken = res.AccessToken.Reveal()
		resp.TokenType, resp.ExpiresAt, resp.Scopes = res.TokenType, res.ExpiresAt, res.Scopes
		resp.TTLShorter = res.TTLShorterThanRequested
		resp.Refreshable, resp.ScopesNotGranted = &res.Refreshable, res.ScopesNotGranted
	case oauth.StatusAuthorizationRequired:
		exp := res.SessionExpiresAt
		resp.AuthSessionID, resp.AuthorizationURL, resp.ExpiresAt = res.AuthSessionID, res.AuthorizationURL, &exp
		resp.Message, resp.DeviceCode = res.Message, res.DeviceCode
	case oauth.StatusError:
		s.log.InfoContext(r.Context(), "token request answered with an error", "code", res.Error.Code)
	}
	httpx.WriteJSON(w, http.StatusOK, resp)
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, fmt.Sprintf("wait must be a whole number of seconds between 0 and %d", int(s.mgr.MaxWait().Seconds())))
			return
		}
		wait = min(time.Duration(n)*time.Second, s.mgr.MaxWait())
	}
	st, err := s.mgr.SessionStatus(r.Context(), id, wait)
	switch {
	case errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrInvalidID):
		httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound, "no auth session "+strconv.Quote(id))
	case err != nil:
		s.log.ErrorContext(r.Context(), "session status failed", "authSessionId", id, "err", err)
		httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "")
	default:
		httpx.WriteJSON(w, http.StatusOK, st)
	}
}

type revokeRequest struct {
	OAuthAppRef *domain.ObjectRefLike `json:"oauthAppRef"`
	Subject     string                `json:"subject"`
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	var req revokeRequest
	if !httpx.DecodeJSON(w, r, httpx.DefaultMaxBody, &req) {
		return
	}
	if req.OAuthAppRef == nil || req.Subject == "" {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, `request body: "oauthAppRef" and "subject" are required`)
		return
	}
	res, err := s.mgr.RevokeGrant(r.Context(), req.OAuthAppRef.ObjectRef, req.Subject)
	switch {
	case errors.Is(err, oauth.ErrUnknownApp):
		httpx.WriteError(w, r, http.StatusNotFound, oauth.CodeOAuthAppNotFound, req.OAuthAppRef.String()+" is not in the bundle")
	case errors.Is(err, domain.ErrNotFound):
		httpx.WriteError(w, r, http.StatusNotFound, "grantNotFound", "no grant for "+req.OAuthAppRef.String()+" and that subject")
	case err != nil:
		s.log.ErrorContext(r.Context(), "revoke failed", "err", err)
		httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "")
	default:
		httpx.WriteJSON(w, http.StatusOK, struct {
			Revoked bool `json:"revoked"`
			oauth.RevokeResult
		}{true, res})
	}
}

// pendingQuery is what GET /v1/oauth/pending must name: the whole resume
// target, as the token request's turn.resume names it.
const pendingQuery = `swarmRef ("Swarm/<name>", as sent in turn.resume.swarmRef), instanceKey and agentName are required`

// pending answers the auth.pending block of one resume target. The
// target is the whole of (swarmRef, instanceKey, agentName): a caller that
// leaves the swarm out is refused, never answered with every swarm's
// links for that instance key and agent — those links are live consents
// (issue 17).
func (s *Server) pending(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sw, ik, an := q.Get("swarmRef"), q.Get("instanceKey"), q.Get("agentName")
	var missing []string
	for _, p := range []struct{ name, value string }{{"swarmRef", sw}, {"instanceKey", ik}, {"agentName", an}} {
		if p.value == "" {
			missing = append(missing, p.name)
		}
	}
	if len(missing) > 0 {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest,
			"query parameters: missing "+strings.Join(missing, ", ")+"; "+pendingQuery)
		return
	}
	ref, err := domain.ParseObjectRef(sw, "")
	if err != nil {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, "query parameter swarmRef: "+err.Error())
		return
	}
	block, err := s.mgr.PendingBlock(r.Context(), domain.ResumeTarget{SwarmRef: ref, InstanceKey: ik, AgentName: an})
	if err != nil {
		s.log.ErrorContext(r.Context(), "auth.pending failed", "err", err)
		httpx.WriteError(w, r, http.StatusInternalServerError, httpx.CodeInternal, "")
		return
	}
	httpx.WriteJSON(w, http.StatusOK, block)
}
