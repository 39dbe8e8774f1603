package mcpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/edge/jwtauth"
	"github.com/agentauth/agentauth/shared/edge/toolsapi"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/filestore"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/tools/httptool"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/tools/toolplane"
)

// consentBundle is an http tool whose OAuth app has no grant yet: a call
// starts a consent.
const consentBundle = `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: menu-app}
spec:
  provider: menu
  flow: authorizationCode
  subjectMode: user
  subjectVerification: {insecureSkipVerification: true}
  client:
    clientId: {value: menu-client}
    clientSecret: {value: menu-secret}
  endpoints:
    authorizationUrl: http://127.0.0.1:1/auth
    tokenUrl: http://127.0.0.1:1/token
  scopes: [menu.read]
  redirect: {callbackPath: /oauth/callback/menu}
---
apiVersion: agents.example.io/v1alpha1
kind: Tool
metadata: {name: menu}
spec:
  id: "menu:get"
  name: get_menu
  description: the menu of a day
  inputSchema: {type: object, properties: {day: {type: string}}, required: [day], additionalProperties: false}
  sourceId: menu
  sourcePath: /menu/{day}
  method: GET
  transport: http
  url: http://127.0.0.1:1
  auth: {oauthAppRef: menu-app, scopes: [menu.read]}
---
apiVersion: agents.example.io/v1alpha1
kind: ToolGroup
metadata: {name: basic}
spec: {explicitToolIds: ["menu:get"]}
---
apiVersion: agents.example.io/v1alpha1
kind: AccessPolicy
metadata: {name: everyone}
spec: {claimMatchers: [{claim: scope, operator: exists}], allowedGroupIds: [basic]}
`

type nopQueue struct{}

func (nopQueue) Enqueue(context.Context, domain.Event) error { return nil }

// A consent an http tool's call over MCP starts is stored as started by
// MCP: the real tool plane and OAuth broker behind the MCP server.
func TestMCPCallConsentStartedByMCP(t *testing.T) {
	home := t.TempDir()
	st, err := filestore.New(home)
	if err != nil {
		t.Fatal(err)
	}
	kr, _, err := aesseal.Ensure(home, "", false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Parse([]bundle.File{{Name: "b.yaml", Data: []byte(consentBundle)}}, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := oauth.New(oauth.Config{Bundle: b, Store: st, Sealer: kr, Queue: nopQueue{}, StateKeys: kr.DerivedKeys("state"), BaseURL: "http://127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mgr.Close(context.Background()) })
	plane, err := toolplane.New(context.Background(), toolplane.Config{Bundle: b, Tenants: toolplane.NewMemoryTenants(), AllowPrivateUpstreams: true})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := ratelimit.NewMemory(ratelimit.Limits{Default: ratelimit.Limit{Rate: 100, Burst: 100}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	verifier := fakeVerifier{"tok-mia": {"sub": "mia", "scope": "menu.read", "agentauth_subjects": map[string]any{"user": "menu:user:mia"}, "exp": exp(time.Hour)}}
	api, err := toolsapi.New(toolsapi.Config{Verifier: verifier, Plane: plane, Hooks: &toolhooks.Hooks{Limiter: lim},
		Runner: httptool.New(httptool.Options{Tokens: mgr, AllowPrivateUpstreams: true})})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Tools: api, Version: "rev-1", Now: func() time.Time { return clockStart }})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := s.handler(HTTPConfig{Verifier: verifier, Resource: resource, AuthorizationServers: []string{"https://issuer.example.test"},
		Stateless: true, Paths: jwtauth.ClaimPaths{}.WithDefaults()})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	rt.register(mux)
	srv := httptest.NewServer(httpx.Observe(nil, mux))
	t.Cleanup(srv.Close)

	cs, err := connectHTTP(t, srv.URL, fixedToken("tok-mia"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_menu", Arguments: map[string]any{"day": "mon"}})
	if err != nil || r == nil {
		t.Fatalf("tools/call: %v %+v", err, r)
	}
	list, bad, err := st.ListSessions(context.Background())
	if err != nil || len(bad) > 0 || len(list) != 1 {
		t.Fatalf("sessions: %d %v %v (answer %s)", len(list), bad, err, strings.TrimSpace(text(r)))
	}
	if list[0].StartedBy != domain.StartedByMCP {
		t.Fatalf("StartedBy %q, want %q", list[0].StartedBy, domain.StartedByMCP)
	}
}
