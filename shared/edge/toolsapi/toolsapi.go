// Package toolsapi serves the tool plane's HTTP routes — tool discovery
// and its live stream, skill search, tool invocation through the hooks,
// and (behind a flag) the RFC 0064 conformance seam and capability
// document — as net/http handlers for the local server and the tools
// function.
//
// Every route but the capability document needs a verified JWT, turned
// into one domain.Principal where the request is authenticated; who the
// caller is, its scopes, tenant and skill allow list come only from it,
// never from query parameters. It answers in the edge's one vocabulary
// (shared/edge/httpx) and maps the tool hooks' verdicts to HTTP statuses
// in one place. It must never write a raw tool argument, a token or a
// stack trace to a response or a log.
package toolsapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/observe/metrics"
	"github.com/agentauth/agentauth/shared/tools/discovery"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/tools/skills"
	"github.com/agentauth/agentauth/shared/tools/toolcatalog"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
)

// Verifier checks a bearer JWT (jwtauth.Verifier in production).
type Verifier interface {
	Verify(ctx context.Context, raw string) (jwtauth.Claims, error)
}

// DefaultSubjectsClaim is the claim that carries the turn's OAuth subjects
// ({"global": "...", "user": "..."}) for the tokens of http tools.
const DefaultSubjectsClaim = jwtauth.DefaultSubjectsClaim

// Config wires the API.
type Config struct {
	Verifier Verifier
	Plane    *toolplane.Plane
	// Runner runs tools of transport http; nil: they end in an error.
	Runner *httptool.Runner
	// Native are implementations of native tools by tool id (a native
	// tool without one ends in E_TOOL_TRANSPORT_UNSUPPORTED).
	Native map[string]toolhooks.Invoker
	Hooks  *toolhooks.Hooks
	// TenantClaim, SkillsClaim and SubjectsClaim are claim paths (default
	// tenant_id, skills, agentauth_subjects).
	TenantClaim, SkillsClaim, SubjectsClaim string
	// Seam enables the RFC 0064 conformance seam and capability document.
	Seam    bool
	Metrics metrics.Recorder
	Log     *slog.Logger
	// StreamEvery is how often GET /v1/agents/stream re-evaluates the
	// caller's manifest and token (default 5 s); Stream bounds the stream
	// (keep-alive and maximum duration, httpx's defaults).
	StreamEvery time.Duration
	Stream      httpx.StreamLimits
}

// API is the tool plane's router.
type API struct {
	cfg   Config
	paths jwtauth.ClaimPaths
}

// New checks cfg.
func New(cfg Config) (*API, error) {
	if cfg.Verifier == nil || cfg.Plane == nil || cfg.Hooks == nil {
		return nil, errors.New("toolsapi: verifier, plane and hooks are required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.Nop{}
	}
	if cfg.StreamEvery <= 0 {
		cfg.StreamEvery = DefaultStreamEvery
	}
	if cfg.Stream.Gate == nil {
		cfg.Stream.Gate = httpx.NewStreamGate(0, 0)
	}
	return &API{cfg: cfg, paths: jwtauth.ClaimPaths{Tenant: cfg.TenantClaim, Skills: cfg.SkillsClaim, Subjects: cfg.SubjectsClaim}.WithDefaults()}, nil
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	for pattern, h := range a.routes() {
		mux.Handle(pattern, h)
	}
}

// Patterns are the routes Register adds, sorted (GET / lists them).
func (a *API) Patterns() []string { return slices.Sorted(maps.Keys(a.routes())) }

// routes are the API's handlers by ServeMux pattern.
func (a *API) routes() map[string]http.Handler {
	routes := map[string]http.Handler{
		"GET /v1/agents/tools":  a.authed(a.tools),
		"GET /v1/agents/stream": a.authed(a.stream),
		"GET /v1/agents/skills": a.authed(a.skills),
		"POST /v1/tools/invoke": a.authed(a.invoke),
	}
	for path, kind := range map[string]string{"skills": domain.TenantKindSkill, "tools": domain.TenantKindTool} {
		routes["POST /v1/admin/tenants/{tenant}/"+path] = a.authed(a.admin(kind, a.upload))
		routes["GET /v1/admin/tenants/{tenant}/"+path] = a.authed(a.admin(kind, a.listUploads))
		routes["DELETE /v1/admin/tenants/{tenant}/"+path+"/{name}"] = a.authed(a.admin(kind, a.deleteUpload))
	}
	if a.cfg.Seam {
		routes["POST /v1/host/sample/toolhooks/invoke"] = a.authed(a.seam)
		routes["GET /.well-known/openwop"] = http.HandlerFunc(a.capabilities)
	}
	return routes
}

// Handler serves the routes alone, with request ids, a JSON 405 (with
// Allow) for a route asked with another method and a JSON 404 for
// anything else (as httpapi serves them when they are mounted there).
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	a.Register(mux)
	mux.Handle("/", httpx.Unmatched(mux))
	return httpx.Observe(a.cfg.Log, mux)
}

// MaxToolBody bounds an invocation's body: a tool's arguments may be
// larger than the edge's default.
const MaxToolBody = 256 << 10

// authed verifies the bearer JWT and hands the handler the caller's
// principal; the reason code of a refusal is in the 401 body, never the
// token.
func (a *API) authed(h func(http.ResponseWriter, *http.Request, domain.Principal)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, refused := a.authenticate(r)
		if refused != nil {
			httpx.WriteErrorDetails(w, r, http.StatusUnauthorized, httpx.CodeUnauthenticated, refused.message, map[string]any{"reason": refused.reason})
			return
		}
		h(w, r, p)
	})
}

// refusal is why a request's JWT was refused: a safe message and the
// jwtauth reason code.
type refusal struct{ message, reason string }

// authenticate verifies the request's bearer JWT and builds the caller's
// principal, here and nowhere else (a stream calls it again as it runs).
func (a *API) authenticate(r *http.Request) (domain.Principal, *refusal) {
	raw, err := jwtauth.BearerToken(r)
	if err == nil {
		var c jwtauth.Claims
		if c, err = a.cfg.Verifier.Verify(r.Context(), raw); err == nil {
			if c.Subject() == "" {
				return domain.Principal{}, &refusal{"the token names no subject", jwtauth.ReasonMalformed}
			}
			return jwtauth.NewPrincipal(c, a.paths), nil
		}
	}
	msg := httpx.AgentJWT.Refusal(r) // the runtime token sent here says so
	if msg == "" {
		msg = "a valid bearer JWT is required"
	}
	return domain.Principal{}, &refusal{msg, jwtauth.Reason(err)}
}

// adminFlags reads include_disabled and skip_cache, which only admins may set.
func adminFlags(r *http.Request, p domain.Principal) (toolcatalog.Options, bool) {
	q := r.URL.Query()
	opts := toolcatalog.Options{IncludeDisabled: q.Get("include_disabled") == "true", SkipCache: q.Get("skip_cache") == "true"}
	if (opts.IncludeDisabled || opts.SkipCache) && !p.Admin {
		return opts, false
	}
	return opts, true
}

// flagsOrRefuse is adminFlags, answering the 403 itself when the caller
// may not set them; ok reports whether the route goes on.
func flagsOrRefuse(w http.ResponseWriter, r *http.Request, p domain.Principal) (toolcatalog.Options, bool) {
	opts, ok := adminFlags(r, p)
	if !ok {
		httpx.WriteError(w, r, http.StatusForbidden, httpx.CodeForbidden, "include_disabled and skip_cache need the agentauth:admin scope")
	}
	return opts, ok
}

func (a *API) tools(w http.ResponseWriter, r *http.Request, p domain.Principal) {
	opts, ok := flagsOrRefuse(w, r, p)
	if !ok {
		return
	}
	httpx.WriteJSON(w, http.StatusOK, a.manifest(r.Context(), p, opts, "tools"))
}

// manifest is GET /v1/agents/tools's answer, {"data": [entries]}: the
// tools stream sends the same value.
func (a *API) manifest(ctx context.Context, p domain.Principal, opts toolcatalog.Options, route string) map[string]any {
	_, res := a.resolve(ctx, p, opts, route)
	manifest := res.Manifest
	if manifest == nil {
		manifest = []discovery.ToolManifestEntry{}
	}
	return map[string]any{"data": manifest}
}

// resolve is the caller's manifest at the plane's current snapshot, with
// the metrics of the resolution.
func (a *API) resolve(ctx context.Context, p domain.Principal, opts toolcatalog.Options, route string) (*toolplane.Snapshot, toolcatalog.Resolution) {
	snap := a.cfg.Plane.Snapshot(ctx) // picks up other processes' uploads
	start := time.Now()
	res := a.cfg.Plane.Catalog().Resolve(p.Claims, opts) // policies may match any claim
	a.cfg.Metrics.Resolution(ctx, metrics.Resolution{Denied: len(res.Access.GroupIDs) == 0, Tools: len(res.Manifest),
		Duration: time.Since(start), Cached: res.Cached, Route: route})
	return snap, res
}

func (a *API) skills(w http.ResponseWriter, r *http.Request, p domain.Principal) {
	q := r.URL.Query()
	topK := 0
	if v := q.Get("top_k"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > skills.MaxTopK {
			httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, fmt.Sprintf("top_k must be a whole number between 1 and %d", skills.MaxTopK))
			return
		}
		topK = n
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"data": a.SearchSkills(r.Context(), p, q.Get("q"), topK)})
}

// SearchSkills is the skills the caller may read, ranked for the query
// (spec 003: the bundle's, its tenant's on its allow list): GET
// /v1/agents/skills and the MCP server's search_skills tool. Never nil.
func (a *API) SearchSkills(ctx context.Context, p domain.Principal, q string, topK int) []skills.Result {
	res := a.cfg.Plane.Snapshot(ctx).Skills.Search(skills.Query{Text: q, TopK: topK, TenantID: p.Tenant, AllowedSkillNames: p.AllowedSkills})
	if res == nil {
		res = []skills.Result{}
	}
	return res
}

type invokeRequest struct {
	ToolName string          `json:"toolName"`
	Args     json.RawMessage `json:"args"`
	CallID   string          `json:"callId"`
}

func (a *API) invoke(w http.ResponseWriter, r *http.Request, p domain.Principal) {
	var req invokeRequest
	if !httpx.DecodeJSON(w, r, MaxToolBody, &req) {
		return
	}
	if req.ToolName == "" {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, `request body: "toolName" is required`)
		return
	}
	if req.CallID == "" {
		req.CallID = newCallID()
	} else if len(req.CallID) > 128 {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, `request body: "callId" must be at most 128 characters`)
		return
	}
	out := a.Call(r.Context(), p, req.ToolName, req.CallID, req.Args, "")
	a.answer(w, r, out, map[string]any{"toolCalled": out.ToolCalled, "toolReturned": out.ToolReturned, "result": out.Result})
}

// Manifest is the caller's discovery manifest at the plane's current
// snapshot: what GET /v1/agents/tools lists, and the MCP server's
// tools/list.
func (a *API) Manifest(ctx context.Context, p domain.Principal, route string) []discovery.ToolManifestEntry {
	_, res := a.resolve(ctx, p, toolcatalog.Options{}, route)
	return res.Manifest
}

// Call runs one call of the caller through the tool hooks — the caller's
// catalog, the tool's scopes, the rate limit, schema validation, the
// content-free audit — as POST /v1/tools/invoke does; via names another
// edge that made it ("mcp"; "" for the REST route), for the audit event.
func (a *API) Call(ctx context.Context, p domain.Principal, toolName, callID string, args json.RawMessage, via string) toolhooks.Outcome {
	// The caller's catalog: the tools its policies let it see.
	snap, res := a.resolve(ctx, p, toolcatalog.Options{}, "invoke")
	catalog := make([]string, 0, len(res.Manifest))
	var ids []string
	for _, e := range res.Manifest {
		catalog = append(catalog, e.Name)
		if e.Name == toolName {
			ids = append(ids, e.ToolID)
		}
	}
	// The one choice of a call's tool (the turn plane makes it the same
	// way): not in the catalog, ambiguous, or this tool and its runner.
	tool, run := snap.Invocable(toolName, ids, func(id string, e toolplane.Entry) toolhooks.Invoker {
		switch e.Tool.Transport {
		case bundle.TransportHTTP:
			if a.cfg.Runner != nil {
				return a.cfg.Runner.CallInvoker(e.Tool, httptool.Call{Auth: p.TurnAuth, Tenant: e.Tenant != "", Via: startedBy(via)})
			}
		case bundle.TransportNative:
			return a.cfg.Native[id]
		}
		return nil
	})
	return a.cfg.Hooks.Invoke(ctx, toolhooks.Call{
		AgentID: p.AgentID, ToolName: toolName, CallID: callID, Principal: p.Subject, Tenant: p.Tenant,
		Args: args, GrantedScopes: p.Scopes, Catalog: catalog, Via: via,
	}, tool, run)
}

// startedBy is what a consent a call starts records as its origin: the
// edge that named itself (mcp), else the tool routes.
func startedBy(via string) string {
	if via == "" {
		return domain.StartedByTool
	}
	return via
}

// hookStatus is the one mapping of a hook verdict to an HTTP status. A
// verdict it does not know is a 500: never let an unknown refusal
// through as a 200.
func hookStatus(v toolhooks.Verdict) int {
	switch v {
	case toolhooks.VerdictOK, toolhooks.VerdictError:
		return http.StatusOK // the result is the answer, an error result too
	case toolhooks.VerdictForbidden:
		return http.StatusForbidden
	case toolhooks.VerdictRateLimited:
		return http.StatusTooManyRequests
	case toolhooks.VerdictUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// answer writes an outcome: 200, 403 forbidden, 429 rate_limited
// (Retry-After), 503 when the limit could not be checked. The events (and
// the result) stay in the body beside the error object.
func (a *API) answer(w http.ResponseWriter, r *http.Request, out toolhooks.Outcome, body map[string]any) {
	status := hookStatus(out.Verdict)
	tool := out.ToolCalled.ToolName
	switch out.Verdict {
	case toolhooks.VerdictOK, toolhooks.VerdictError:
	case toolhooks.VerdictForbidden:
		body["error"] = httpx.NewProblem(r, status, httpx.CodeForbidden, "the caller lacks a scope this tool requires",
			map[string]any{"scope": "tool", "toolName": tool, "requiredScopes": out.RequiredScopes})
	case toolhooks.VerdictRateLimited:
		secs := int(out.RetryAfter.Round(time.Second) / time.Second)
		if secs < 1 {
			secs = 1
		}
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		body["error"] = httpx.NewProblem(r, status, codeRateLimited, "too many calls of this tool; retry after Retry-After seconds",
			map[string]any{"scope": "tool", "toolName": tool})
	case toolhooks.VerdictUnavailable:
		body["error"] = httpx.NewProblem(r, status, codeUnavailable, "", nil)
	default:
		a.cfg.Log.ErrorContext(r.Context(), "tool hooks gave an unknown verdict", "verdict", string(out.Verdict))
		body["error"] = httpx.NewProblem(r, status, httpx.CodeInternal, "", nil)
	}
	httpx.WriteJSON(w, status, body)
}

// Error codes of the tool hooks' refusals (RFC 0064's wire names).
const (
	codeRateLimited = "rate_limited"
	codeUnavailable = "unavailable"
)

type seamRequest struct {
	Principal                  string          `json:"principal"`
	ToolName                   string          `json:"toolName"`
	RequiredScopes             []string        `json:"requiredScopes"`
	GrantedScopes              []string        `json:"grantedScopes"`
	Args                       json.RawMessage `json:"args"`
	SimulateRateLimitExhausted bool            `json:"simulateRateLimitExhausted"`
	SimulateToolError          bool            `json:"simulateToolError"`
}

// exhausted is the seam's limiter when asked to simulate exhaustion.
type exhausted struct{}

func (exhausted) Allow(context.Context, string, string) (bool, time.Duration, error) {
	return false, time.Second, nil
}

// seam is RFC 0064's conformance seam: it runs a synthetic tool through the
// real hooks and answers {toolCalled, toolReturned} on 200, 403 and 429.
func (a *API) seam(w http.ResponseWriter, r *http.Request, _ domain.Principal) {
	var req seamRequest
	if !httpx.DecodeJSON(w, r, MaxToolBody, &req) {
		return
	}
	if req.Principal == "" || req.ToolName == "" {
		httpx.WriteError(w, r, http.StatusBadRequest, httpx.CodeInvalidRequest, `request body: "principal" and "toolName" are required`)
		return
	}
	hooks := *a.cfg.Hooks
	if req.SimulateRateLimitExhausted {
		hooks.Limiter = exhausted{}
	}
	run := func(context.Context, json.RawMessage) (json.RawMessage, error) {
		if req.SimulateToolError {
			return nil, errors.New("simulated tool error")
		}
		return json.RawMessage(`{"ok":true}`), nil
	}
	out := hooks.Invoke(r.Context(), toolhooks.Call{AgentID: jwtauth.DefaultAgentID, ToolName: req.ToolName, CallID: newCallID(),
		Principal: req.Principal, Args: req.Args, GrantedScopes: req.GrantedScopes},
		toolhooks.Tool{Name: req.ToolName, RequiredScopes: req.RequiredScopes, Transport: "native"}, run)
	a.answer(w, r, out, map[string]any{"toolCalled": out.ToolCalled, "toolReturned": out.ToolReturned})
}

func (a *API) capabilities(w http.ResponseWriter, _ *http.Request) {
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"capabilities": map[string]any{"toolHooks": map[string]bool{
		"supported": true, "prePostEvents": true, "perToolAuthorization": true, "perToolRateLimit": a.cfg.Hooks.Limiter != nil,
	}}})
}

func newCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call-" + hex.EncodeToString(b[:])
}
