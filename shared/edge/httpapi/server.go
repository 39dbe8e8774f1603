package httpapi

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
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

// Authenticate checks "Authorization: Bearer <token>".
func (b BearerToken) Authenticate(r *http.Request) error {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || b.Token.IsZero() {
		return ErrUnauthenticated
	}
	if subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(b.Token.Reveal())) != 1 {
		return ErrUnauthenticated
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
	extra  []func(*http.ServeMux)
}

// Mount adds routes (the tool plane's) to the handlers built after the
// call; they get the same request ids, logging and JSON 404s.
func (s *Server) Mount(register func(*http.ServeMux)) { s.extra = append(s.extra, register) }

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

func (s *Server) routes(runtime, callbacks bool) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	if runtime {
		mux.Handle("POST /v1/oauth/token", s.runtime(s.token))
		mux.Handle("GET /v1/oauth/sessions/{id}", s.runtime(s.session))
		mux.Handle("POST /v1/oauth/revoke", s.runtime(s.revoke))
		mux.Handle("GET /v1/oauth/pending", s.runtime(s.pending))
	}
	if callbacks {
		for _, app := range s.bundle.OAuthApps {
			if app.Redirect.CallbackPath != "" {
				mux.Handle("GET "+app.Redirect.CallbackPath, s.callback(app))
			}
		}
	}
	for _, register := range s.extra {
		register(mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, http.StatusNotFound, "notFound", "no route for "+r.Method+" "+r.URL.Path)
	})
	return s.observe(mux)
}

// runtime guards a route for trusted runtime callers.
func (s *Server) runtime(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.caller.Authenticate(r); err != nil {
			writeError(w, r, http.StatusUnauthorized, "unauthenticated", "a valid runtime credential is required (Authorization: Bearer <runtime token>)")
			return
		}
		h(w, r)
	})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "bundleRevision": s.bundle.Revision})
}

// maxBody bounds request bodies.
const maxBody = 64 << 10

// decodeBody reads a JSON object strictly: unknown fields and trailing
// data are errors that name what was wrong.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		writeError(w, r, http.StatusUnsupportedMediaType, "invalidRequest", "Content-Type must be application/json")
		return false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, r, http.StatusRequestEntityTooLarge, "invalidRequest", fmt.Sprintf("request body larger than %d bytes", maxBody))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, r, http.StatusBadRequest, "invalidRequest", "request body: "+jsonProblem(err))
		return false
	}
	if dec.More() {
		writeError(w, r, http.StatusBadRequest, "invalidRequest", "request body: unexpected data after the JSON object")
		return false
	}
	return true
}

// jsonProblem describes a decode error by position and field, never by
// echoing the input.
func jsonProblem(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, te.Type.String(), te.Value)
	case errors.Is(err, io.EOF):
		return "empty body; want a JSON object"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "invalid JSON"
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
	AuthSessionID    string                  `json:"authSessionId,omitempty"`
	AuthorizationURL string                  `json:"authorizationUrl,omitempty"`
	Message          string                  `json:"message,omitempty"`
	DeviceCode       *oauth.DeviceCodePrompt `json:"deviceCode,omitempty"`
	Error            *oauth.ResultError      `json:"error,omitempty"`
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	var req tokenRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if len(req.OAuthAppRef) == 0 || string(req.OAuthAppRef) == "null" {
		writeError(w, r, http.StatusBadRequest, "invalidRequest", `request body: "oauthAppRef" is required ("OAuthApp/<name>" or {"kind","name"})`)
		return
	}
	tr := oauth.TokenRequest{Scopes: req.Scopes, MinTTLSeconds: req.MinTTLSeconds}
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
				writeError(w, r, http.StatusBadRequest, "invalidRequest", "request body: turn.resume needs "+strings.Join(missing, ", "))
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
	if err := json.Unmarshal(req.OAuthAppRef, &ref); err != nil {
		res = oauth.ErrorResult(oauth.CodeOAuthAppNotFound, "oauthAppRef: "+err.Error())
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
	case oauth.StatusAuthorizationRequired:
		exp := res.SessionExpiresAt
		resp.AuthSessionID, resp.AuthorizationURL, resp.ExpiresAt = res.AuthSessionID, res.AuthorizationURL, &exp
		resp.Message, resp.DeviceCode = res.Message, res.DeviceCode
	case oauth.StatusError:
		s.log.InfoContext(r.Context(), "token request answered with an error", "code", res.Error.Code)
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var wait time.Duration
	if v := r.URL.Query().Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, r, http.StatusBadRequest, "invalidRequest", fmt.Sprintf("wait must be a whole number of seconds between 0 and %d", int(s.mgr.MaxWait().Seconds())))
			return
		}
		wait = min(time.Duration(n)*time.Second, s.mgr.MaxWait())
	}
	st, err := s.mgr.SessionStatus(r.Context(), id, wait)
	switch {
	case errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrInvalidID):
		writeError(w, r, http.StatusNotFound, "notFound", "no auth session "+strconv.Quote(id))
	case err != nil:
		s.log.ErrorContext(r.Context(), "session status failed", "authSessionId", id, "err", err)
		writeError(w, r, http.StatusInternalServerError, "internal", "")
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

type revokeRequest struct {
	OAuthAppRef *domain.ObjectRefLike `json:"oauthAppRef"`
	Subject     string                `json:"subject"`
}

func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	var req revokeRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if req.OAuthAppRef == nil || req.Subject == "" {
		writeError(w, r, http.StatusBadRequest, "invalidRequest", `request body: "oauthAppRef" and "subject" are required`)
		return
	}
	res, err := s.mgr.RevokeGrant(r.Context(), req.OAuthAppRef.ObjectRef, req.Subject)
	switch {
	case errors.Is(err, oauth.ErrUnknownApp):
		writeError(w, r, http.StatusNotFound, oauth.CodeOAuthAppNotFound, req.OAuthAppRef.String()+" is not in the bundle")
	case errors.Is(err, domain.ErrNotFound):
		writeError(w, r, http.StatusNotFound, "grantNotFound", "no grant for "+req.OAuthAppRef.String()+" and that subject")
	case err != nil:
		s.log.ErrorContext(r.Context(), "revoke failed", "err", err)
		writeError(w, r, http.StatusInternalServerError, "internal", "")
	default:
		writeJSON(w, http.StatusOK, struct {
			Revoked bool `json:"revoked"`
			oauth.RevokeResult
		}{true, res})
	}
}

func (s *Server) pending(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ik, an := q.Get("instanceKey"), q.Get("agentName")
	if ik == "" || an == "" {
		writeError(w, r, http.StatusBadRequest, "invalidRequest", "query parameters instanceKey and agentName are required")
		return
	}
	block, err := s.mgr.PendingBlock(r.Context(), ik, an)
	if err != nil {
		s.log.ErrorContext(r.Context(), "auth.pending failed", "err", err)
		writeError(w, r, http.StatusInternalServerError, "internal", "")
		return
	}
	writeJSON(w, http.StatusOK, block)
}
