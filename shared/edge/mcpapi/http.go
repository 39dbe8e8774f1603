package mcpapi

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
)

// Verifier checks a bearer JWT (jwtauth.Verifier, configured with this
// resource as the audience).
type Verifier interface {
	Verify(ctx context.Context, raw string) (jwtauth.Claims, error)
}

// HTTPConfig is how the MCP server is served over Streamable HTTP.
type HTTPConfig struct {
	// Verifier accepts only JWTs whose audience is Resource (RFC 8707:
	// a token for another resource — the REST tool routes' audience,
	// another server — is refused).
	Verifier Verifier
	// Paths are the claim paths of the caller's tenant, skills and OAuth
	// subjects (the tool routes' own).
	Paths jwtauth.ClaimPaths
	// Resource is this server's resource identifier: its URL,
	// <public URL>/mcp.
	Resource string
	// AuthorizationServers issue the JWTs (the JWT issuer), for the
	// protected resource metadata.
	AuthorizationServers []string
	// Stateless serves every request on its own: no session the next
	// request (maybe another Lambda) would need; answers are JSON, never
	// a stream. Off (agentauth serve), sessions live in the process and
	// the server can notify them.
	Stateless bool
}

// Route paths.
const (
	Path = "/mcp"
	// metadataPath is RFC 9728's well-known URI; a client may also ask
	// for it with the resource's path appended.
	metadataPath = "/.well-known/oauth-protected-resource"
)

// Register adds /mcp and the protected resource metadata to mux.
func (s *Server) Register(mux *http.ServeMux, hc HTTPConfig) error {
	register, err := s.Routes(hc)
	if err != nil {
		return err
	}
	register(mux)
	return nil
}

// Routes checks hc and builds the handlers once; the function it returns
// adds them to a mux (the app mounts it on every handler it builds).
func (s *Server) Routes(hc HTTPConfig) (func(*http.ServeMux), error) {
	if hc.Verifier == nil || hc.Resource == "" {
		return nil, errors.New("mcpapi: a JWT verifier and the resource URL are required")
	}
	ru, err := url.Parse(hc.Resource)
	if err != nil || ru.Scheme == "" || ru.Host == "" || ru.Fragment != "" {
		return nil, errors.New("mcpapi: the resource must be an absolute URL without a fragment (RFC 8707)")
	}
	metadataURL := ru.Scheme + "://" + ru.Host + metadataPath + strings.TrimSuffix(ru.Path, "/")
	prm := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               hc.Resource,
		AuthorizationServers:   hc.AuthorizationServers,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "agentauth tool plane",
	})

	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		p, ok := principalFrom(r.Context())
		if !ok {
			return nil // not reached: the bearer check comes first
		}
		c := s.newCaller(r.Context(), p)
		if !hc.Stateless {
			// A new session's server: it can be told of changes.
			go c.watch(s.cfg.Consents, s.cfg.WatchEvery, s.cfg.ManifestEvery)
		}
		return c.srv
	}, &mcp.StreamableHTTPOptions{Stateless: hc.Stateless, JSONResponse: hc.Stateless, Logger: s.cfg.Log})
	// The SDK's bearer middleware binds a stateful session to the caller
	// who opened it (TokenInfo.UserID): another caller's token with that
	// Mcp-Session-Id is refused. It reads the principal the check below
	// has already built; the token is verified once.
	bind := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p, ok := principalFrom(ctx)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.Subject, Scopes: p.Scopes}, nil
	}, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadataURL, AllowMissingExpiration: true})
	mcpHandler := s.bearer(hc, metadataURL, bind(h))
	return func(mux *http.ServeMux) {
		mux.Handle("GET "+metadataPath, prm)
		mux.Handle("GET "+metadataPath+strings.TrimSuffix(ru.Path, "/"), prm)
		mux.Handle(Path, mcpHandler)
	}, nil
}

type principalKey struct{}

func principalFrom(ctx context.Context) (domain.Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(domain.Principal)
	return p, ok
}

// bearer verifies the request's JWT for this resource and puts the
// caller's principal in the context; a refusal is a 401 with the edge's
// error body, its reason code, and the WWW-Authenticate challenge that
// points an MCP client at the protected resource metadata (RFC 9728 §5.1).
func (s *Server) bearer(hc HTTPConfig, metadataURL string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := jwtauth.BearerToken(r)
		var c jwtauth.Claims
		if err == nil {
			c, err = hc.Verifier.Verify(r.Context(), raw)
		}
		refused, reason := false, ""
		switch {
		case err != nil:
			// Fail closed: an error without a reason code refuses too.
			refused, reason = true, jwtauth.Reason(err)
			if reason == "" {
				reason = "rejected"
			}
		case c.Subject() == "":
			refused, reason = true, jwtauth.ReasonMalformed
		}
		if refused {
			challenge := `Bearer resource_metadata="` + metadataURL + `"`
			if raw != "" {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			httpx.WriteErrorDetails(w, r, http.StatusUnauthorized, httpx.CodeUnauthenticated,
				"a valid bearer JWT for this resource is required", map[string]any{"reason": reason})
			return
		}
		p := jwtauth.NewPrincipal(c, hc.Paths)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}
