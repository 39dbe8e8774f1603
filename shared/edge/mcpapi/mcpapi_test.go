package mcpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/tools/discovery"
	"github.com/agentauth/agentauth/shared/tools/skills"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

var yes, no = true, false

// fakeTools is a hand-written tool plane: a fixed manifest, and each tool
// answering one kind of outcome. It records the calls it was asked.
type fakeTools struct {
	mu    sync.Mutex
	calls []string // tool, via, args, subject
	// callers are the principals of the calls and searches, in order;
	// requestIDs the request ids (httpx) of the calls' contexts.
	callers    []domain.Principal
	requestIDs []string
	// manifests counts the manifests resolved.
	manifests int
	// granted makes whoami run (the consent happened); extra lists one
	// more tool (an upload).
	granted, extra bool
	// consentMessage is whoami's consent message.
	consentMessage string
	// quiet records nothing (a benchmark's many calls).
	quiet bool
}

// scopedTool is listed only to a caller with the profile.read scope.
const scopedTool = "scoped"

func (f *fakeTools) Manifest(_ context.Context, p domain.Principal, _ string) []discovery.ToolManifestEntry {
	obj := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	f.mu.Lock()
	extra := f.extra
	f.manifests++
	f.mu.Unlock()
	var more []discovery.ToolManifestEntry
	if extra {
		more = append(more, discovery.ToolManifestEntry{ToolID: "acme:uploaded", Name: "uploaded", Description: "a tenant's upload", InputSchema: obj})
	}
	if slices.Contains(p.Scopes, "profile.read") {
		more = append(more, discovery.ToolManifestEntry{ToolID: "demo:scoped", Name: scopedTool, Description: "needs profile.read to be seen", InputSchema: obj})
	}
	return append(more, []discovery.ToolManifestEntry{
		{ToolID: "demo:echo", Name: "echo", Description: "says it back", InputSchema: obj,
			Annotations: &discovery.ToolAnnotations{Title: "Echo", ReadOnlyHint: &yes, OpenWorldHint: &no}},
		{ToolID: "demo:fail", Name: "fail", Description: "always fails", InputSchema: obj},
		{ToolID: "demo:locked", Name: "locked", Description: "needs a scope", InputSchema: obj},
		{ToolID: "demo:busy", Name: "busy", Description: "rate limited", InputSchema: obj},
		{ToolID: "demo:whoami", Name: "whoami", Description: "who the user is", InputSchema: obj},
		{ToolID: "demo:odd", Name: "odd", Description: "a schema MCP cannot carry", InputSchema: json.RawMessage(`{"type":"string"}`)},
	}...)
}

func (f *fakeTools) SearchSkills(_ context.Context, p domain.Principal, q string, topK int) []skills.Result {
	f.mu.Lock()
	f.calls = append(f.calls, fmt.Sprintf("skills %q %d %s", q, topK, p.Subject))
	f.callers = append(f.callers, p)
	f.mu.Unlock()
	return []skills.Result{{Skill: skills.Skill{Name: "refunds", Description: "how to refund", Content: "step 1"}, RelevanceScore: 0.9}}
}

func (f *fakeTools) Call(ctx context.Context, p domain.Principal, name, callID string, args json.RawMessage, via string) toolhooks.Outcome {
	f.mu.Lock()
	if !f.quiet {
		f.calls = append(f.calls, name+" "+via+" "+string(args)+" "+p.Subject)
		f.callers = append(f.callers, p)
		f.requestIDs = append(f.requestIDs, httpx.RequestID(ctx))
	}
	granted, message := f.granted, f.consentMessage
	f.mu.Unlock()
	if message == "" {
		message = "Connect your demo account"
	}
	ok := func(out string) toolhooks.Outcome {
		return toolhooks.Outcome{Verdict: toolhooks.VerdictOK, Result: &toolhooks.Result{Status: "ok", Output: json.RawMessage(out)}}
	}
	switch name {
	case "echo", scopedTool:
		return ok(`{"said":` + string(args) + `}`)
	case "fail":
		r := toolhooks.ErrorResult("UpstreamError", "E_UPSTREAM", "the upstream answered 502", 40)
		return toolhooks.Outcome{Verdict: toolhooks.VerdictError, Result: &r}
	case "locked":
		return toolhooks.Outcome{Verdict: toolhooks.VerdictForbidden, RequiredScopes: []string{"orders.write"}}
	case "busy":
		return toolhooks.Outcome{Verdict: toolhooks.VerdictRateLimited, RetryAfter: 1500 * time.Millisecond}
	case "whoami":
		if granted {
			return ok(`{"name":"Alice"}`)
		}
		authz, _ := json.Marshal(map[string]string{"oauthAppRef": "OAuthApp/demo-user", "authSessionId": "as-123",
			"authorizationUrl": "https://idp.example/auth?client_id=x&state=s", "message": message})
		return toolhooks.Outcome{Verdict: toolhooks.VerdictOK, Result: &toolhooks.Result{Status: toolhooks.ResultAuthorizationRequired, Authorization: authz}}
	}
	return toolhooks.Outcome{Verdict: "unheard-of"}
}

// connect runs the caller's MCP server and a client over the SDK's
// in-memory transport; urlElicitation declares the client capability.
func connect(t *testing.T, tools *fakeTools, urlElicitation bool) *mcp.ClientSession {
	t.Helper()
	s, err := New(Config{Tools: tools, Version: "rev-1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	srv := s.newMCPServer(&session{fixed: &domain.Principal{Subject: "agent-7"}})
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	opts := &mcp.ClientOptions{}
	if urlElicitation {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestToolsList(t *testing.T) {
	cs := connect(t, &fakeTools{}, false)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
		switch tl.Name {
		case "echo":
			schema, _ := json.Marshal(tl.InputSchema)
			a := tl.Annotations
			if tl.Description != "says it back" || !strings.Contains(string(schema), `"q":{"type":"string"}`) ||
				a == nil || a.Title != "Echo" || !a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint || a.DestructiveHint != nil || tl.Title != "Echo" {
				t.Fatalf("echo: %q %s %+v", tl.Description, schema, a)
			}
		case "fail":
			if tl.Annotations != nil {
				t.Fatalf("fail declares no annotations, got %+v", tl.Annotations)
			}
		}
	}
	if strings.Join(names, ",") != "busy,echo,fail,locked,search_skills,whoami" {
		t.Fatalf("tools %v (odd has no object schema and is left out)", names)
	}
	if v := cs.InitializeResult().ServerInfo; v.Name != "agentauth" || v.Version != "rev-1" {
		t.Fatalf("server info %+v", v)
	}
}

func TestToolsCall(t *testing.T) {
	tools := &fakeTools{}
	cs := connect(t, tools, false)
	ctx := context.Background()
	call := func(name string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"q": "hi"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	if r := call("echo"); r.IsError || text(r) != `{"said":{"q":"hi"}}` || r.StructuredContent == nil {
		t.Fatalf("echo: %+v %q", r, text(r))
	}
	if r := call("fail"); !r.IsError || text(r) != "the upstream answered 502" {
		t.Fatalf("fail: %+v %q", r, text(r))
	}
	if r := call("locked"); !r.IsError || !strings.Contains(text(r), "lacks a scope this tool requires (orders.write)") {
		t.Fatalf("locked: %q", text(r))
	}
	r := call("busy")
	sc, _ := json.Marshal(r.StructuredContent)
	if !r.IsError || !strings.Contains(text(r), "retry in 2 seconds") || !strings.Contains(string(sc), `"retryAfterSeconds":2`) {
		t.Fatalf("busy: %q %s", text(r), sc)
	}
	// Every call went through the plane as the caller, marked as MCP's.
	tools.mu.Lock()
	defer tools.mu.Unlock()
	if len(tools.calls) != 4 || tools.calls[0] != `echo mcp {"q":"hi"} agent-7` {
		t.Fatalf("calls %q", tools.calls)
	}
}

func TestConsentWithoutURLElicitation(t *testing.T) {
	tools := &fakeTools{}
	cs := connect(t, tools, false)
	ctx := context.Background()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := json.Marshal(r.StructuredContent)
	if !r.IsError || !strings.Contains(text(r), "https://idp.example/auth?client_id=x&state=s") || !strings.Contains(text(r), "authorization_required") ||
		!strings.Contains(string(sc), `"authSessionId":"as-123"`) {
		t.Fatalf("consent result: %q %s", text(r), sc)
	}
	tools.mu.Lock()
	tools.granted = true
	tools.mu.Unlock()
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}}); err != nil || r.IsError || text(r) != `{"name":"Alice"}` {
		t.Fatalf("after the consent: %v %q", err, text(r))
	}
}

func TestConsentByURLElicitation(t *testing.T) {
	tools := &fakeTools{}
	cs := connect(t, tools, true)
	ctx := context.Background()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != mcp.CodeURLElicitationRequired {
		t.Fatalf("err = %v, want URLElicitationRequired (-32042)", err)
	}
	var data struct {
		Elicitations []mcp.ElicitParams `json:"elicitations"`
	}
	if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 {
		t.Fatalf("error data %s: %v", rpcErr.Data, err)
	}
	e := data.Elicitations[0]
	if e.Mode != "url" || e.URL != "https://idp.example/auth?client_id=x&state=s" || e.ElicitationID != "as-123" || !strings.Contains(e.Message, "Connect your demo account") {
		t.Fatalf("elicitation %+v", e)
	}
	tools.mu.Lock()
	tools.granted = true
	tools.mu.Unlock()
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}}); err != nil || r.IsError {
		t.Fatalf("the retried call after the consent: %v %+v", err, r)
	}
}

func TestUnknownVerdictIsAnErrorResult(t *testing.T) {
	cs := connect(t, &fakeTools{}, false)
	// A tool the caller's list does not have is the protocol's error.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "nope", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a call of an unlisted tool succeeded")
	}
	s, _ := New(Config{Tools: &fakeTools{}})
	r, err := s.result(context.Background(), &session{}, nil, toolhooks.Outcome{Verdict: "unheard-of"})
	if err != nil || !r.IsError {
		t.Fatalf("an unknown verdict: %v %+v", err, r)
	}
}

func TestSkillsSearchTool(t *testing.T) {
	tools := &fakeTools{}
	cs := connect(t, tools, false)
	ctx := context.Background()
	list, _ := cs.ListTools(ctx, nil)
	for _, tl := range list.Tools {
		if tl.Name == SkillsTool && (tl.Annotations == nil || !tl.Annotations.ReadOnlyHint) {
			t.Fatalf("search_skills annotations %+v", tl.Annotations)
		}
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: SkillsTool, Arguments: map[string]any{"q": "refund a order", "top_k": 3}})
	if err != nil || r.IsError || !strings.Contains(text(r), `"name":"refunds"`) || !strings.Contains(text(r), `"relevance_score":0.9`) {
		t.Fatalf("search: %v %q", err, text(r))
	}
	for args, want := range map[string]string{`{"top_k":0}`: "top_k must be from 1 to 100", `{"query":"x"}`: "the arguments must be"} {
		var m map[string]any
		_ = json.Unmarshal([]byte(args), &m)
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: SkillsTool, Arguments: m})
		if err != nil || !r.IsError || !strings.Contains(text(r), want) {
			t.Fatalf("%s: %v %q", args, err, text(r))
		}
	}
	tools.mu.Lock()
	defer tools.mu.Unlock()
	if got := tools.calls[len(tools.calls)-1]; got != `skills "refund a order" 3 agent-7` {
		t.Fatalf("the search the plane was asked: %s", got)
	}
}
