package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/edge/toolsapi"
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
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call /mcp. A request with another Origin is refused (403): the
	// transport spec's defence against DNS rebinding. A request without
	// one (no browser) passes.
	AllowedOrigins []string
	// Stateless serves every request on its own: no session the next
	// request (maybe another Lambda) would need; answers are JSON, never
	// a stream. Off (agentauth serve), sessions live in the process and
	// the server can notify them.
	Stateless bool
	// Sessions bounds the sessions of a session-keeping server.
	Sessions SessionLimits
	// Streams caps the open GET streams per caller and in all: the
	// process's one gate, which every stream route shares (nil: one of
	// its own, with the default caps).
	Streams *httpx.StreamGate
}

// Route paths.
const (
	Path = "/mcp"
	// metadataPath is RFC 9728's well-known URI; a client may also ask
	// for it with the resource's path appended.
	metadataPath = "/.well-known/oauth-protected-resource"
)

// MaxBody bounds a request to /mcp: a call's arguments take the tool
// plane's one limit, POST /v1/tools/invoke's.
const MaxBody = toolsapi.MaxToolBody

// sessionlessRevision is the first MCP revision without initialize
// (SEP-2575): a request at it or later is the SDK's to answer (a
// session-keeping transport refuses it with -32022, listing what it
// negotiates). The SDK's own constant is not exported.
const sessionlessRevision = "2026-07-28"

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
	h, err := s.handler(hc)
	if err != nil {
		return nil, err
	}
	return h.register, nil
}

// routes is the /mcp handler and what it keeps (tests look inside).
type routes struct {
	metadataPath string
	prm          http.Handler
	mcp          http.Handler
	reg          *registry   // nil when stateless
	events       *eventStore // nil when stateless
}

func (rt *routes) register(mux *http.ServeMux) {
	mux.Handle("GET "+metadataPath, rt.prm)
	mux.Handle("GET "+rt.metadataPath, rt.prm)
	mux.Handle(Path, rt.mcp)
}

func (s *Server) handler(hc HTTPConfig) (*routes, error) {
	if hc.Verifier == nil || hc.Resource == "" {
		return nil, errors.New("mcpapi: a JWT verifier and the resource URL are required")
	}
	ru, err := url.Parse(hc.Resource)
	if err != nil || ru.Scheme == "" || ru.Host == "" || ru.Fragment != "" {
		return nil, errors.New("mcpapi: the resource must be an absolute URL without a fragment (RFC 8707)")
	}
	origins, err := ParseOrigins(hc.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	lim, err := hc.Sessions.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("mcpapi: the initialize rate: %w", err)
	}
	metadataURL := ru.Scheme + "://" + ru.Host + metadataPath + strings.TrimSuffix(ru.Path, "/")
	rt := &routes{metadataPath: metadataPath + strings.TrimSuffix(ru.Path, "/")}
	rt.prm = auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               hc.Resource,
		AuthorizationServers:   hc.AuthorizationServers,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "agentauth tool plane",
	})

	g := &gate{stateless: hc.Stateless, keepAlive: lim.KeepAlive, versions: negotiated(hc.Stateless), streams: hc.Streams}
	if g.streams == nil {
		g.streams = httpx.NewStreamGate(0, 0)
	}
	if g.keepAlive <= 0 {
		g.keepAlive = httpx.DefaultKeepAlive
	}
	opts := &mcp.StreamableHTTPOptions{Stateless: hc.Stateless, JSONResponse: hc.Stateless, Logger: s.sdkLog, MaxRequestBodyBytes: MaxBody}
	if !hc.Stateless {
		if g.reg, err = newRegistry(s, lim); err != nil {
			return nil, err
		}
		rt.reg = g.reg
		rt.events = newEventStore(lim.EventBytes, g.reg.closed)
		opts.EventStore, opts.SessionTimeout = rt.events, lim.IdleTimeout
	}
	// The server of a session is built for the request that opens it
	// (the gate hands it a slot); the SDK also asks for a server on every
	// other request, for its protocol versions only: the probe answers.
	probe := s.newMCPServer(&session{stateless: hc.Stateless})
	sdk := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		slot, ok := r.Context().Value(slotKey{}).(*serverSlot)
		if !ok {
			return probe
		}
		if slot.srv == nil {
			sess := &session{stateless: hc.Stateless}
			if g.reg != nil {
				sess.onInitialized = g.reg.register
			}
			slot.srv = s.newMCPServer(sess)
		}
		return slot.srv
	}, opts)
	// The SDK's bearer middleware binds a stateful session to the caller
	// who opened it (TokenInfo.UserID: the token's subject): another
	// subject's token with that Mcp-Session-Id is refused. Its TokenInfo
	// carries each request's principal and context (request and trace
	// ids) to the handlers. It reads the
	// principal the check below has already built; the token is verified
	// once.
	bind := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		p, ok := principalFrom(ctx)
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.Subject, Scopes: p.Scopes, Extra: map[string]any{principalExtra: p, requestExtra: ctx}}, nil
	}, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metadataURL, AllowMissingExpiration: true})
	g.next = bind(sdk)
	rt.mcp = checkOrigin(origins, s.bearer(hc, metadataURL, g))
	return rt, nil
}

// negotiated is the protocol revisions the server negotiates: a
// session-keeping transport not the sessionless ones.
func negotiated(stateless bool) []string {
	vs := mcp.SupportedProtocolVersions()
	if stateless {
		return vs
	}
	t := &mcp.StreamableServerTransport{}
	return slices.DeleteFunc(vs, func(v string) bool { return !t.SupportsProtocolVersion(v) })
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

// ParseOrigins reads allowed browser origins, each scheme://host[:port]
// (http or https, no path), as a set of their canonical forms.
func ParseOrigins(list []string) (map[string]bool, error) {
	set := map[string]bool{}
	for _, o := range list {
		c, ok := canonicalOrigin(o)
		if !ok {
			return nil, fmt.Errorf("mcpapi: allowed origin %q: want scheme://host[:port], http or https, without a path", o)
		}
		set[c] = true
	}
	return set, nil
}

// canonicalOrigin is an origin in lower case, or false when it is not
// one (the opaque origin "null" is none).
func canonicalOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), true
}

// checkOrigin refuses a request whose Origin header (sent by browsers) is
// not an allowed origin, before anything else: a page on another origin,
// maybe reaching a local server through DNS rebinding, gets nothing.
func checkOrigin(allowed map[string]bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if vs := r.Header.Values("Origin"); len(vs) > 0 {
			c, ok := canonicalOrigin(vs[0])
			if len(vs) > 1 || !ok || !allowed[c] {
				httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden,
					"requests from this browser origin are refused: the MCP server answers only the origins it is configured to allow (Origin validation against DNS rebinding); clients that are not browsers send no Origin")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// gate is what the server checks before the SDK sees a request: the
// protocol revision, the body's size, and — keeping sessions — that a
// request without a session is an initialize, the initialize rate, the
// session caps, the stream caps (the process's stream gate); it gives the
// SDK's writes a stream writer.
type gate struct {
	next      http.Handler
	stateless bool
	keepAlive time.Duration
	versions  []string
	reg       *registry
	streams   *httpx.StreamGate
}

// serverSlot carries the server the SDK builds a request's session on.
type serverSlot struct{ srv *mcp.Server }

type slotKey struct{}

func withSlot(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), slotKey{}, &serverSlot{}))
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, _ := principalFrom(r.Context())
	if v := r.Header.Get("Mcp-Protocol-Version"); v != "" && v < sessionlessRevision && !slices.Contains(g.versions, v) {
		data, _ := json.Marshal(mcp.UnsupportedProtocolVersionData{Supported: g.versions, Requested: v[:min(len(v), 40)]})
		writeRPCError(w, http.StatusBadRequest, nil, mcp.CodeUnsupportedProtocolVersion, fmt.Sprintf(
			"Bad Request: unsupported MCP-Protocol-Version %.40q; this server negotiates %s", v, strings.Join(g.versions, ", ")), data)
		return
	}
	if r.ContentLength > MaxBody {
		httpx.WriteError(w, r, http.StatusRequestEntityTooLarge, httpx.CodePayloadTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxBody))
		return
	}
	switch {
	case g.stateless:
		if r.Method == http.MethodPost {
			r = withSlot(r)
		}
		g.next.ServeHTTP(w, r)
	case r.Method == http.MethodGet:
		// The standalone stream, or a resumed one: an event stream like
		// the tools and turn streams, under the same caps.
		leave, ok := g.streams.Enter(toolsapi.StreamPrincipal(p))
		if !ok {
			g.streams.RefuseTooManyStreams(w, r)
			return
		}
		defer leave()
		g.serve(w, r, g.keepAlive)
	case r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "":
		g.open(w, r, p)
	case r.Method == http.MethodPost:
		g.serve(w, r, 0)
	default:
		g.next.ServeHTTP(w, r)
	}
}

// serve hands the request to the SDK through a stream writer.
func (g *gate) serve(w http.ResponseWriter, r *http.Request, keepAlive time.Duration) {
	sw, r := newStreamWriter(w, r, keepAlive)
	defer sw.end()
	g.next.ServeHTTP(sw, r)
}

// open serves a POST without a session: an initialize (rate limited per
// caller, within the caps) opens one; a request of the sessionless
// revisions goes to the SDK; anything else is 400, as the transport spec
// has it — the SDK would open a session for it and answer 200 with an
// error of code 0.
func (g *gate) open(w http.ResponseWriter, r *http.Request, p domain.Principal) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		httpx.WriteError(w, r, http.StatusRequestEntityTooLarge, httpx.CodePayloadTooLarge, fmt.Sprintf("request body larger than %d bytes", MaxBody))
		return
	case err != nil:
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, "request body could not be read")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	m, ok := peek(body)
	switch {
	case !ok:
		writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeParseError, "Bad Request: the body is not a JSON-RPC message", nil)
		return
	case m.sessionless || r.Header.Get("Mcp-Protocol-Version") >= sessionlessRevision:
		g.serve(w, withSlot(r), 0)
		return
	case !m.initialize:
		writeRPCError(w, http.StatusBadRequest, m.id, jsonrpc.CodeInvalidRequest,
			"Bad Request: Mcp-Session-Id header is required: send initialize first, then the session id it answers with every request", nil)
		return
	}
	if refused := g.reg.allowInitialize(r.Context(), p.Subject); refused != nil {
		refuse(w, refused, m.id)
		return
	}
	release, refused := g.reg.reserve(p.Subject)
	if refused != nil {
		refuse(w, refused, m.id)
		return
	}
	defer release()
	g.serve(w, withSlot(r), 0)
}

// peeked is what the gate reads of a POST's JSON-RPC message(s).
type peeked struct {
	initialize  bool
	sessionless bool            // a message names a revision in its _meta (SEP-2575)
	id          json.RawMessage // the first request's id
}

func peek(body []byte) (peeked, bool) {
	var msgs []json.RawMessage
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		if json.Unmarshal(body, &msgs) != nil || len(msgs) == 0 {
			return peeked{}, false
		}
	} else {
		msgs = []json.RawMessage{body}
	}
	var out peeked
	for _, raw := range msgs {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(raw, &m) != nil {
			return peeked{}, false
		}
		out.initialize = out.initialize || m.Method == "initialize"
		_, named := m.Params.Meta[mcp.MetaKeyProtocolVersion]
		out.sessionless = out.sessionless || named
		if out.id == nil && len(m.ID) > 0 && m.Method != "" {
			out.id = m.ID
		}
	}
	return out, true
}

// refuse answers a refusal of the caps or the rate limit as a JSON-RPC
// error, which MCP clients show, with Retry-After when there is one.
func refuse(w http.ResponseWriter, f *refusal, id json.RawMessage) {
	if f.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(f.retryAfter.Seconds()))))
	}
	writeRPCError(w, f.status, id, codeLimit, f.message, nil)
}

// codeLimit is the JSON-RPC error code of a refusal by a cap or a rate
// limit (the implementation-defined server error range).
const codeLimit = -32000

// writeRPCError answers a JSON-RPC error response (id null when the
// request's is unknown) with status.
func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, message string, data json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	type rpcError struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data,omitempty"`
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, message, data}})
}

// sdkLogger is log as the SDK gets it: its lines about each session's
// life (Info) are Debug, and no line carries a session id — an id is
// what another caller's request would need, with the token, to use the
// session.
func sdkLogger(log *slog.Logger) *slog.Logger {
	return slog.New(sdkHandler{log.Handler()})
}

type sdkHandler struct{ h slog.Handler }

func (x sdkHandler) level(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (x sdkHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return x.h.Enabled(ctx, x.level(l))
}

func (x sdkHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, x.level(r.Level), r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		if !isSessionID(a.Key) {
			out.AddAttrs(a)
		}
		return true
	})
	return x.h.Handle(ctx, out)
}

func (x sdkHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return sdkHandler{x.h.WithAttrs(slices.DeleteFunc(slices.Clone(as), func(a slog.Attr) bool { return isSessionID(a.Key) }))}
}

func (x sdkHandler) WithGroup(name string) slog.Handler { return sdkHandler{x.h.WithGroup(name)} }

func isSessionID(key string) bool {
	k := strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(key))
	return k == "sessionid" || k == "mcpsessionid"
}
