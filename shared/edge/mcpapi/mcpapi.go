// Package mcpapi serves agentauth's tool plane over the Model Context
// Protocol, on the official Go SDK: tools/list is the caller's discovery
// manifest, and tools/call runs through the same tool hooks as POST
// /v1/tools/invoke — the caller's catalog, the tool's scopes (fail
// closed), the per-(principal, tool) rate limit, schema validation, the
// content-free audit (via "mcp").
//
// The caller is the one each request's verified token names, never the
// one that opened its session: every tools/list and tools/call is
// answered from the principal of its own request (the session is bound to
// the token's subject; scopes, tenant, skills and OAuth subjects are the
// request's). A session lives until it idles out, its client deletes it
// or the token that opened it expires; sessions are capped per principal
// and in all, and initialize is rate limited per principal.
//
// A tool error is a result with isError and the tool's (truncated)
// message; a refusal (forbidden, rate limited) is such a result too,
// never a hang or a bare protocol error. A tool that needs the user's
// consent answers a client that declared URL-mode elicitation with
// URLElicitationRequiredError (-32042) carrying the authorization URL and
// the auth session as the elicitation id; other clients get an isError
// result with the link. A call retried after the consent runs.
//
// This package never returns or logs a token or a session id, and never
// logs a tool's arguments or output.
package mcpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/discovery"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/tools/skills"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// Tools is the tool plane as the MCP server uses it
// (shared/edge/toolsapi.API: the same calls the REST routes make).
type Tools interface {
	Manifest(ctx context.Context, p domain.Principal, route string) []discovery.ToolManifestEntry
	Call(ctx context.Context, p domain.Principal, toolName, callID string, args json.RawMessage, via string) toolhooks.Outcome
	SearchSkills(ctx context.Context, p domain.Principal, q string, topK int) []skills.Result
}

// Via is the audit events' via of a call made over MCP.
const Via = "mcp"

// Config configures the MCP server.
type Config struct {
	Tools Tools
	// Version is the server's version in the initialize answer (the
	// bundle revision).
	Version string
	// Consents reports when a consent is over, for
	// notifications/elicitation/complete (nil: none sent).
	Consents Consents
	// Revision names the tool plane's current state (the bundle and
	// uploads revision): the sessions' tool lists are resolved again only
	// when it changed, so an idle session costs no resolution (and no
	// metrics line). Nil: they are resolved every ManifestEvery.
	Revision func(ctx context.Context) string
	// WatchEvery and ManifestEvery pace what a session-keeping server
	// watches (watch.go; defaults 1 s and 5 s).
	WatchEvery, ManifestEvery time.Duration
	// Now is the clock of token expiry and the initialize rate limit
	// (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
}

// Server builds the MCP server of each session (or, stateless, of each
// request).
type Server struct {
	cfg Config
	// sdkLog is cfg.Log as the SDK gets it (sdkLogger).
	sdkLog *slog.Logger

	mu      sync.Mutex
	leftOut map[string]bool // tools already logged as left out of the list
}

// New returns the MCP server builder.
func New(cfg Config) (*Server, error) {
	if cfg.Tools == nil {
		return nil, errors.New("mcpapi: the tool plane is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WatchEvery <= 0 {
		cfg.WatchEvery = defaultWatchEvery
	}
	if cfg.ManifestEvery <= 0 {
		cfg.ManifestEvery = defaultManifestEvery
	}
	return &Server{cfg: cfg, sdkLog: sdkLogger(cfg.Log), leftOut: map[string]bool{}}, nil
}

// newMCPServer builds the SDK server of one session. It has no side
// effect: no goroutine, no resolution; the session is watched once it has
// initialized (watch.go). tools/list and tools/call are answered by the
// middleware, from each request's caller, never from tools registered on
// the server: its registry only carries the list_changed signal.
func (s *Server) newMCPServer(sess *session) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "agentauth", Title: "agentauth tool plane", Version: s.cfg.Version},
		&mcp.ServerOptions{
			Logger: s.sdkLog,
			// The SDK's default (logging) plus tools, which no registered
			// tool announces here; list_changed only where a session can
			// hear it.
			Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{ListChanged: !sess.stateless}},
		})
	sess.srv = srv
	srv.AddReceivingMiddleware(s.middleware(sess))
	return srv
}

// errNoCaller answers a request that reached a server without a verified
// caller (not reached over HTTP: the bearer check comes first).
var errNoCaller = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the request names no verified caller"}

// middleware answers tools/list and tools/call as the request's caller,
// and registers a session that initialized for the watch.
func (s *Server) middleware(sess *session) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "initialize", "tools/list", "tools/call":
			default:
				return next(ctx, method, req)
			}
			p, ok := sess.principalOf(req)
			if !ok {
				return nil, errNoCaller
			}
			sess.seen(p)
			ctx = withRequest(ctx, req)
			switch method {
			case "tools/list":
				return s.listTools(ctx, sess, p), nil
			case "tools/call":
				ctr, _ := req.(*mcp.CallToolRequest)
				if ctr == nil || ctr.Params == nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs params"}
				}
				r, err := s.callTool(ctx, sess, p, ctr)
				if err != nil {
					return nil, err // not a nil *CallToolResult in a non-nil Result
				}
				return typed(req, r), nil
			}
			res, err := next(ctx, method, req)
			if err == nil && sess.onInitialized != nil {
				if ss, _ := req.GetSession().(*mcp.ServerSession); ss != nil {
					sess.onInitialized(sess, ss, p)
				}
			}
			return res, err
		}
	}
}

// completeResult is a tools/call result for a client on protocol
// 2026-07-28 or later, which requires "resultType" (SEP-2322): the SDK
// sets it only on results its own tool handlers return, and this
// server's middleware answers tools/call itself. The SDK keeps the field
// unexported, so the wire form is written here.
type completeResult struct{ *mcp.CallToolResult }

func (r completeResult) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(r.CallToolResult)
	if err != nil || !bytes.HasPrefix(b, []byte("{")) || bytes.Contains(b, []byte(`"resultType"`)) {
		return b, err
	}
	if string(b) == "{}" {
		return []byte(`{"resultType":"complete"}`), nil
	}
	return append([]byte(`{"resultType":"complete",`), b[1:]...), nil
}

// typed marks r complete for a client whose protocol needs the mark.
func typed(req mcp.Request, r *mcp.CallToolResult) mcp.Result {
	ss, _ := req.GetSession().(*mcp.ServerSession)
	if ss == nil {
		return r
	}
	if ip := ss.InitializeParams(); ip == nil || ip.ProtocolVersion < sessionlessRevision {
		return r
	}
	return completeResult{r}
}

// listing is the caller's tools as MCP lists them: the manifest's tools
// whose input schema is a JSON object (MCP requires one; the others are
// left out, and logged once), and search_skills unless a tool of the
// caller's takes its name; sorted by name.
func (s *Server) listing(ctx context.Context, manifest []discovery.ToolManifestEntry) []*mcp.Tool {
	tools := make([]*mcp.Tool, 0, len(manifest)+1)
	hidden := false
	for _, e := range manifest {
		t, err := toolOf(e)
		if err != nil {
			s.logLeftOut(ctx, e.Name, err)
			continue
		}
		hidden = hidden || e.Name == SkillsTool
		tools = append(tools, t)
	}
	if hidden {
		s.logLeftOut(ctx, SkillsTool, errors.New("a tool named like the skills search hides it"))
	} else {
		tools = append(tools, skillsSearch)
	}
	slices.SortFunc(tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	return tools
}

// logLeftOut logs a tool left out of the list once per process (the list
// is resolved on every tools/list), up to a bound.
func (s *Server) logLeftOut(ctx context.Context, name string, why error) {
	s.mu.Lock()
	seen := s.leftOut[name]
	if !seen {
		if len(s.leftOut) >= 1024 {
			clear(s.leftOut)
		}
		s.leftOut[name] = true
	}
	s.mu.Unlock()
	if !seen {
		s.cfg.Log.WarnContext(ctx, "tool left out of the MCP tool list", "tool", name, "err", why)
	}
}

// fingerprint names a tool list, to see a change.
func fingerprint(tools []*mcp.Tool) string {
	b, _ := json.Marshal(tools)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// listTools answers tools/list: the request's caller's tools. The list
// is private to the caller (cacheScope), and what the session was last
// told, for the watch's list_changed.
func (s *Server) listTools(ctx context.Context, sess *session, p domain.Principal) *mcp.ListToolsResult {
	tools := s.listing(ctx, s.cfg.Tools.Manifest(ctx, p, "mcp"))
	sess.listed(fingerprint(tools), p)
	return &mcp.ListToolsResult{Tools: tools, Cacheable: mcp.Cacheable{CacheScope: "private"}}
}

// callTool answers tools/call as the request's caller: a tool its list
// does not have is the protocol's unknown-tool error (-32602), as the SDK
// answers it; the others run through the tool hooks.
func (s *Server) callTool(ctx context.Context, sess *session, p domain.Principal, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	name := req.Params.Name
	found := false // as listing lists it: a tool whose schema MCP cannot carry is not there
	for _, e := range s.cfg.Tools.Manifest(ctx, p, "mcp") {
		if _, err := toolOf(e); err == nil && e.Name == name {
			found = true
			break
		}
	}
	switch {
	case name == SkillsTool && !found:
		return s.searchSkills(ctx, p, req.Params.Arguments)
	case !found:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	out := s.cfg.Tools.Call(ctx, p, name, newCallID(), req.Params.Arguments, Via)
	return s.result(ctx, sess, req, out)
}

// SkillsTool is the name of the skills search the server adds to every
// caller's tools. Skills are served as a search tool rather than as MCP
// resources: spec 003's rule is ranked retrieval by query (the bundle's
// skills and the caller's tenant's on its allow list), which a
// resources/list — no query, every skill at once — cannot express, and
// every MCP client calls tools, while support for resources varies.
const SkillsTool = "search_skills"

var skillsSearch = &mcp.Tool{
	Name:  SkillsTool,
	Title: "Search skills",
	Description: "Find the skills (how-to instructions) relevant to a task, ranked by relevance: the platform's and your tenant's " +
		"that you may read. Each result has its name, description and content.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"q":{"type":"string","description":"what the task is about"},` +
		`"top_k":{"type":"integer","minimum":1,"maximum":` + strconv.Itoa(skills.MaxTopK) + `,"description":"how many results at most (default 10)"}},` +
		`"additionalProperties":false}`),
	Annotations: &mcp.ToolAnnotations{Title: "Search skills", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(bool)},
}

// searchSkills answers search_skills: the caller's skills for q.
func (s *Server) searchSkills(ctx context.Context, p domain.Principal, args json.RawMessage) (*mcp.CallToolResult, error) {
	var in struct {
		Q    string `json:"q"`
		TopK *int   `json:"top_k"`
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	if len(args) > 0 {
		if err := dec.Decode(&in); err != nil {
			return errorResult(toolhooks.ErrorResult("InvalidArgs", toolhooks.CodeInvalidArgs,
				`the arguments must be {"q": string, "top_k"?: integer}`, toolhooks.DefaultErrorMessageLimit)), nil
		}
	}
	topK := 0
	if in.TopK != nil {
		if *in.TopK < 1 || *in.TopK > skills.MaxTopK {
			return errorResult(toolhooks.ErrorResult("InvalidArgs", toolhooks.CodeInvalidArgs,
				fmt.Sprintf("top_k must be from 1 to %d", skills.MaxTopK), toolhooks.DefaultErrorMessageLimit)), nil
		}
		topK = *in.TopK
	}
	b, err := json.Marshal(map[string]any{"data": s.cfg.Tools.SearchSkills(ctx, p, in.Q, topK)})
	if err != nil {
		return nil, err
	}
	return okResult(toolhooks.Result{Status: "ok", Output: b}), nil
}

// toolOf is a manifest entry as an MCP tool.
func toolOf(e discovery.ToolManifestEntry) (*mcp.Tool, error) {
	schema := e.InputSchema
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	var probe struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(schema, &probe); err != nil || probe.Type != "object" {
		return nil, errors.New(`its input schema is not {"type": "object", …}`)
	}
	t := &mcp.Tool{Name: e.Name, Description: e.Description, InputSchema: schema}
	if a := e.Annotations; a != nil {
		t.Annotations = &mcp.ToolAnnotations{Title: a.Title, DestructiveHint: a.DestructiveHint, OpenWorldHint: a.OpenWorldHint}
		// The SDK's two plain booleans: false is MCP's default for both.
		t.Annotations.ReadOnlyHint = a.ReadOnlyHint != nil && *a.ReadOnlyHint
		t.Annotations.IdempotentHint = a.IdempotentHint != nil && *a.IdempotentHint
		if a.Title != "" {
			t.Title = a.Title
		}
	}
	return t, nil
}

// result is the MCP answer to an outcome of the hooks.
func (s *Server) result(ctx context.Context, sess *session, req *mcp.CallToolRequest, out toolhooks.Outcome) (*mcp.CallToolResult, error) {
	if r, refused := toolhooks.RefusalResult(out, "the caller", toolhooks.DefaultErrorMessageLimit); refused {
		return errorResult(r), nil
	}
	switch {
	case out.Result == nil:
		s.cfg.Log.ErrorContext(ctx, "tool hooks gave no result", "verdict", string(out.Verdict))
		return errorResult(toolhooks.ErrorResult("Internal", toolhooks.CodeTool, "the call ended without a result", toolhooks.DefaultErrorMessageLimit)), nil
	case out.Verdict == toolhooks.VerdictOK && out.Result.Status == toolhooks.ResultAuthorizationRequired:
		return consent(sess, req, *out.Result)
	case out.Verdict == toolhooks.VerdictOK:
		return okResult(*out.Result), nil
	}
	return errorResult(*out.Result), nil
}

// consent answers a call whose tool needs the user's consent: URL
// elicitation for a client that declared it, else an isError result with
// the link and the authorization_required object.
func consent(sess *session, req *mcp.CallToolRequest, r toolhooks.Result) (*mcp.CallToolResult, error) {
	var a httptool.Authorization
	if json.Unmarshal(r.Authorization, &a) != nil || a.AuthorizationURL == "" {
		return errorResult(toolhooks.ErrorResult("AuthError", toolhooks.CodeTool, "the tool needs the user's consent but named no authorization link", toolhooks.DefaultErrorMessageLimit)), nil
	}
	// The sentences below end the message: its own final period would
	// make two.
	msg := strings.TrimRight(strings.TrimSpace(a.Message), ".")
	if msg == "" {
		msg = "This tool needs your authorization"
	}
	if elicitsURL(req) {
		if a.AuthSessionID != "" {
			sess.elicited(a.AuthSessionID) // watch.go tells the session when it completes
		}
		return nil, mcp.URLElicitationRequiredError([]*mcp.ElicitParams{{
			Mode: "url", URL: a.AuthorizationURL, ElicitationID: a.AuthSessionID,
			Message: msg + " — open the link, approve access, then call the tool again.",
		}})
	}
	return &mcp.CallToolResult{
		IsError:           true,
		Content:           []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("authorization_required: %s. Open %s, approve access, then call the tool again.", msg, a.AuthorizationURL)}},
		StructuredContent: map[string]any{"status": toolhooks.ResultAuthorizationRequired, "authorization": r.Authorization},
	}, nil
}

// elicitsURL reports whether the calling client declared URL-mode
// elicitation: with the request (protocol 2026-07-28, so also on a
// stateless server) or when its session initialized.
func elicitsURL(req *mcp.CallToolRequest) bool {
	if req == nil {
		return false
	}
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil && caps.Elicitation.URL != nil
}

// okResult is a tool's output: as text (JSON) for every client, and as
// structured content when it is a JSON object.
func okResult(r toolhooks.Result) *mcp.CallToolResult {
	out := r.Output
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}}
	var obj map[string]any
	if json.Unmarshal(out, &obj) == nil && obj != nil {
		res.StructuredContent = obj
	}
	return res
}

// errorResult is an error result: isError, the error's (already
// truncated) message as text, and the error object as structured content.
func errorResult(r toolhooks.Result) *mcp.CallToolResult {
	msg := "the tool failed"
	if r.Error != nil {
		msg = r.Error.Message
	}
	res := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
	if r.Error != nil {
		res.StructuredContent = map[string]any{"status": "error", "error": r.Error}
	}
	return res
}

// newCallID names a call in the audit events (MCP requests carry no id the
// caller chose for the call).
func newCallID() string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return "mcp-" + hex.EncodeToString(b)
}
