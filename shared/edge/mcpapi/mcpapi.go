// Package mcpapi serves agentauth's tool plane over the Model Context
// Protocol, on the official Go SDK: tools/list is the caller's discovery
// manifest, and tools/call runs through the same tool hooks as POST
// /v1/tools/invoke — the caller's catalog, the tool's scopes (fail
// closed), the per-(principal, tool) rate limit, schema validation, the
// content-free audit (via "mcp").
//
// A tool error is a result with isError and the tool's (truncated)
// message; a refusal (forbidden, rate limited) is such a result too,
// never a hang or a bare protocol error. A tool that needs the user's
// consent answers a client that declared URL-mode elicitation with
// URLElicitationRequiredError (-32042) carrying the authorization URL and
// the auth session as the elicitation id; other clients get an isError
// result with the link. A call retried after the consent runs.
//
// This package never returns or logs a token, and never logs a tool's
// arguments or output.
package mcpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

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
	// WatchEvery and ManifestEvery pace what a session-keeping server
	// watches (watch.go; defaults 1 s and 5 s).
	WatchEvery, ManifestEvery time.Duration
	Log                       *slog.Logger
}

// Server builds the MCP server of each caller.
type Server struct {
	cfg Config
}

// New returns the MCP server builder.
func New(cfg Config) (*Server, error) {
	if cfg.Tools == nil {
		return nil, errors.New("mcpapi: the tool plane is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg}, nil
}

// caller is one caller's MCP server, with what a session-keeping server
// watches for it (watch.go): the tools it listed, the consents it sent
// URL elicitations for.
type caller struct {
	s   *Server
	p   domain.Principal
	srv *mcp.Server

	mu      sync.Mutex
	listed  map[string]string // tool name → the tool as listed (JSON), to see changes
	pending map[string]bool   // elicitation ids (auth sessions) not yet complete
}

// newCaller builds the MCP server of one caller: its tools, each call
// through the tool hooks as p. A tool whose input schema is not a JSON
// object (MCP requires one) is left out, and logged.
func (s *Server) newCaller(ctx context.Context, p domain.Principal) *caller {
	c := &caller{s: s, p: p, listed: map[string]string{}, pending: map[string]bool{},
		srv: mcp.NewServer(&mcp.Implementation{Name: "agentauth", Title: "agentauth tool plane", Version: s.cfg.Version},
			&mcp.ServerOptions{Logger: s.cfg.Log})}
	c.sync(ctx, s.cfg.Tools.Manifest(ctx, p, "mcp"))
	return c
}

// sync makes the server's tools the manifest's: new and changed tools are
// (re)added, gone ones removed — and the SDK tells the sessions that can
// hear it (notifications/tools/list_changed). It reports whether anything
// changed.
func (c *caller) sync(ctx context.Context, manifest []discovery.ToolManifestEntry) bool {
	want := map[string]*mcp.Tool{}
	handlers := map[string]mcp.ToolHandler{}
	for _, e := range manifest {
		t, err := toolOf(e)
		if err != nil {
			c.s.cfg.Log.WarnContext(ctx, "tool left out of the MCP tool list", "tool", e.Name, "err", err)
			continue
		}
		want[e.Name], handlers[e.Name] = t, c.handler(e.Name)
	}
	if _, taken := want[SkillsTool]; taken {
		c.s.cfg.Log.WarnContext(ctx, "a tool named like the skills search hides it", "tool", SkillsTool)
	} else {
		want[SkillsTool], handlers[SkillsTool] = skillsSearch, c.searchSkills()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := false
	var gone []string
	for name := range c.listed {
		if _, ok := want[name]; !ok {
			gone = append(gone, name)
			delete(c.listed, name)
		}
	}
	if len(gone) > 0 {
		c.srv.RemoveTools(gone...)
		changed = true
	}
	for name, t := range want {
		b, _ := json.Marshal(t)
		if c.listed[name] == string(b) {
			continue
		}
		c.listed[name] = string(b)
		c.srv.AddTool(t, handlers[name])
		changed = true
	}
	return changed
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
func (c *caller) searchSkills() mcp.ToolHandler {
	s, p := c.s, c.p
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var in struct {
			Q    string `json:"q"`
			TopK *int   `json:"top_k"`
		}
		dec := json.NewDecoder(bytes.NewReader(req.Params.Arguments))
		dec.DisallowUnknownFields()
		if len(req.Params.Arguments) > 0 {
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

// handler runs a call of tool name through the tool hooks as the caller.
func (c *caller) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		out := c.s.cfg.Tools.Call(ctx, c.p, name, newCallID(), req.Params.Arguments, Via)
		return c.result(ctx, req, out)
	}
}

// result is the MCP answer to an outcome of the hooks.
func (c *caller) result(ctx context.Context, req *mcp.CallToolRequest, out toolhooks.Outcome) (*mcp.CallToolResult, error) {
	s := c.s
	if r, refused := toolhooks.RefusalResult(out, "the caller", toolhooks.DefaultErrorMessageLimit); refused {
		return errorResult(r), nil
	}
	switch {
	case out.Result == nil:
		s.cfg.Log.ErrorContext(ctx, "tool hooks gave no result", "verdict", string(out.Verdict))
		return errorResult(toolhooks.ErrorResult("Internal", toolhooks.CodeTool, "the call ended without a result", toolhooks.DefaultErrorMessageLimit)), nil
	case out.Verdict == toolhooks.VerdictOK && out.Result.Status == toolhooks.ResultAuthorizationRequired:
		return c.consent(req, *out.Result)
	case out.Verdict == toolhooks.VerdictOK:
		return okResult(*out.Result), nil
	}
	return errorResult(*out.Result), nil
}

// consent answers a call whose tool needs the user's consent: URL
// elicitation for a client that declared it, else an isError result with
// the link and the authorization_required object.
func (c *caller) consent(req *mcp.CallToolRequest, r toolhooks.Result) (*mcp.CallToolResult, error) {
	var a httptool.Authorization
	if json.Unmarshal(r.Authorization, &a) != nil || a.AuthorizationURL == "" {
		return errorResult(toolhooks.ErrorResult("AuthError", toolhooks.CodeTool, "the tool needs the user's consent but named no authorization link", toolhooks.DefaultErrorMessageLimit)), nil
	}
	msg := a.Message
	if msg == "" {
		msg = "This tool needs your authorization"
	}
	if elicitsURL(req) {
		if a.AuthSessionID != "" {
			c.mu.Lock()
			c.pending[a.AuthSessionID] = true // watch.go tells the session when it completes
			c.mu.Unlock()
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
