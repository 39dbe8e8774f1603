package lambdaentry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
)

func toolsEvent(method, path, token, body string) json.RawMessage {
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: method + " " + path, RawPath: path,
		Headers: map[string]string{"authorization": "Bearer " + token, "content-type": "application/json"},
		Body:    body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "tools-req-1",
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path, Protocol: "HTTP/1.1", SourceIP: "127.0.0.1"},
		},
	}
	raw, _ := json.Marshal(ev)
	return raw
}

func TestToolsFunctionAnswersAPIGatewayEvents(t *testing.T) {
	iss := jwttest.Start(t)
	functionEnv(t)
	t.Setenv(config.JWKSURL, "")
	if _, err := build(context.Background(), os.Getenv, ToolsRoutes, "tools", slog.New(slog.DiscardHandler), Options{}); err == nil || !strings.Contains(err.Error(), "AGENTAUTH_JWKS_URL is required") {
		t.Fatalf("without a JWKS URL: %v", err)
	}
	for k, v := range iss.Env() {
		t.Setenv(k, v)
	}
	t.Setenv(config.Metrics, "log")
	var logs bytes.Buffer
	f, err := build(context.Background(), os.Getenv, ToolsRoutes, "tools", slog.New(slog.NewJSONHandler(&logs, nil)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok := iss.Mint(t, map[string]any{"sub": "alice", "scope": "agentauth:admin", "tenant_id": "acme", "skills": "refunds"})
	out, err := f.Invoke(context.Background(), toolsEvent("POST", "/v1/admin/tenants/acme/skills", tok, `{"name":"refunds","description":"refunds","content":"how to refund"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.APIGatewayV2HTTPResponse); resp.StatusCode != 201 {
		t.Fatalf("upload: %d %s", resp.StatusCode, resp.Body)
	}
	out, err = f.Invoke(context.Background(), toolsEvent("GET", "/v1/agents/skills", tok, ""))
	if err != nil {
		t.Fatal(err)
	}
	if resp := out.(events.APIGatewayV2HTTPResponse); resp.StatusCode != 200 || !strings.Contains(resp.Body, `"name":"refunds"`) {
		t.Fatalf("skills: %d %s", resp.StatusCode, resp.Body)
	}
	out, _ = f.Invoke(context.Background(), toolsEvent("GET", "/v1/agents/tools", "not-a-jwt", ""))
	if resp := out.(events.APIGatewayV2HTTPResponse); resp.StatusCode != 401 || !strings.Contains(resp.Body, `"reason"`) {
		t.Fatalf("bad token: %d %s", resp.StatusCode, resp.Body)
	}
	out, _ = f.Invoke(context.Background(), toolsEvent("GET", "/v1/agents/tools", tok, ""))
	if resp := out.(events.APIGatewayV2HTTPResponse); resp.StatusCode != 200 || resp.Body != "{\"data\":[]}\n" {
		t.Fatalf("tools: %d %q", resp.StatusCode, resp.Body)
	}
	if !strings.Contains(logs.String(), `"agent_access_resolutions":1`) {
		t.Fatalf("no metrics line in the log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), tok) {
		t.Fatal("the JWT is in the log")
	}
}

// TestToolsFunctionServesMCP: the tools function answers MCP over API
// Gateway, stateless, JSON: a token for the REST routes' audience is
// refused with the challenge naming the protected resource metadata; one
// for the MCP resource lists the tools.
func TestToolsFunctionServesMCP(t *testing.T) {
	iss := jwttest.Start(t)
	functionEnv(t)
	for k, v := range iss.Env() {
		t.Setenv(k, v)
	}
	f, err := build(context.Background(), os.Getenv, ToolsRoutes, "tools", slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	mcpEvent := func(token string) json.RawMessage {
		var ev events.APIGatewayV2HTTPRequest
		_ = json.Unmarshal(toolsEvent("POST", "/mcp", token, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`), &ev)
		ev.Headers["accept"] = "application/json, text/event-stream"
		ev.Headers["mcp-protocol-version"] = "2025-06-18"
		raw, _ := json.Marshal(ev)
		return raw
	}
	restToken := iss.Mint(t, map[string]any{"sub": "alice", "scope": "profile.read"})
	out, err := f.Invoke(context.Background(), mcpEvent(restToken))
	if err != nil {
		t.Fatal(err)
	}
	resp := out.(events.APIGatewayV2HTTPResponse)
	if resp.StatusCode != 401 || resp.Headers["Www-Authenticate"] != `Bearer resource_metadata="https://auth.example/.well-known/oauth-protected-resource/mcp", error="invalid_token"` ||
		!strings.Contains(resp.Body, `"reason":"wrong_audience"`) {
		t.Fatalf("a token for the REST routes: %d %v %s", resp.StatusCode, resp.Headers, resp.Body)
	}
	mcpToken := iss.Mint(t, map[string]any{"sub": "alice", "scope": "profile.read", "aud": "https://auth.example/mcp"})
	out, err = f.Invoke(context.Background(), mcpEvent(mcpToken))
	if err != nil {
		t.Fatal(err)
	}
	resp = out.(events.APIGatewayV2HTTPResponse)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Headers["Content-Type"], "application/json") || !strings.Contains(resp.Body, `"name":"search_skills"`) {
		t.Fatalf("tools/list: %d %v %s", resp.StatusCode, resp.Headers, resp.Body)
	}
	out, _ = f.Invoke(context.Background(), toolsEvent("GET", "/.well-known/oauth-protected-resource/mcp", "", ""))
	if resp := out.(events.APIGatewayV2HTTPResponse); resp.StatusCode != 200 || !strings.Contains(resp.Body, `"resource":"https://auth.example/mcp"`) ||
		!strings.Contains(resp.Body, `"authorization_servers":["`+jwttest.Issuer+`"]`) {
		t.Fatalf("protected resource metadata: %d %s", resp.StatusCode, resp.Body)
	}
}
