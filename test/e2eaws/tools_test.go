//go:build e2eaws

package e2eaws

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
	"github.com/agentauth/agentauth/shared/testkit/ssetest"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// uploadsPoll bounds the wait for a tenant upload to reach the function's
// environments: each re-reads the uploads every 10 s
// (AGENTAUTH_UPLOADS_CHECK_SECONDS, which the stack does not set).
const uploadsPoll = 20 * time.Second

// toolsFunction is the deployed tools function as the test needs it: its
// name and the settings the stack gave it.
type toolsFunction struct {
	Name     string
	JWKSAddr string // host:port of AGENTAUTH_JWKS_URL, where the test serves the JWKS
	JWKSPath string
	Limit    ratelimit.Limit // AGENTAUTH_TOOL_RATE_LIMIT
	Env      map[string]string
}

// loadToolsFunction finds the tools function in the deploy's outputs and
// reads its configuration from the emulator's Lambda API, so the test
// serves the JWKS where the function fetches it and knows the rate limit
// it enforces. A stack deployed without the tools context skips (or fails,
// see envRequire).
func loadToolsFunction(ctx context.Context, t *testing.T, st *stack) toolsFunction {
	t.Helper()
	b, err := os.ReadFile(st.outputsPath)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("%s: %v", st.outputsPath, err)
	}
	fn := toolsFunction{Name: all[st.Name]["ToolsFunctionName"]}
	if fn.Name == "" {
		skipOrFail(t, "stack %s has no tools function (no ToolsFunctionName output): deploy it with the tools context (make deploy-local passes it)", st.Name)
	}
	var cfg struct {
		Environment struct {
			Variables map[string]string `json:"Variables"`
		} `json:"Environment"`
	}
	if err := st.lambdaGet(ctx, "/2015-03-31/functions/"+url.PathEscape(fn.Name)+"/configuration", &cfg); err != nil {
		t.Fatalf("the tools function's configuration: %v", err)
	}
	fn.Env = cfg.Environment.Variables
	env := fn.Env
	if env["AGENTAUTH_JWT_ISSUER"] != jwttest.Issuer || env["AGENTAUTH_JWT_AUDIENCE"] != jwttest.Audience {
		t.Fatalf("%s accepts JWTs of issuer %q, audience %q; this test mints them for %q, %q (jwttest): deploy with make deploy-local",
			fn.Name, env["AGENTAUTH_JWT_ISSUER"], env["AGENTAUTH_JWT_AUDIENCE"], jwttest.Issuer, jwttest.Audience)
	}
	ju, err := url.Parse(env["AGENTAUTH_JWKS_URL"])
	if err != nil || ju.Scheme != "http" || !isLoopback(ju.Hostname()) || ju.Port() == "" || !strings.HasPrefix(ju.Path, "/") {
		t.Fatalf("%s: AGENTAUTH_JWKS_URL %q: want http://127.0.0.1:<port>/<path>, where this test can serve its issuer's keys",
			fn.Name, env["AGENTAUTH_JWKS_URL"])
	}
	fn.JWKSAddr, fn.JWKSPath = ju.Host, ju.Path
	if v := strings.ToLower(env["AGENTAUTH_TOOLHOOKS_SEAM"]); v != "true" && v != "1" {
		t.Fatalf("%s: AGENTAUTH_TOOLHOOKS_SEAM=%q: the seam routes are off (deploy with -c toolhooksSeam=1)", fn.Name, v)
	}
	// The rate-limit subtest spends the whole burst in a few seconds: the
	// limit must not hand out a new call meanwhile.
	if fn.Limit, err = ratelimit.ParseLimit(env["AGENTAUTH_TOOL_RATE_LIMIT"]); err != nil ||
		fn.Limit.Burst < 2 || fn.Limit.Burst > 10 || fn.Limit.Rate > 1.0/300 {
		t.Fatalf("%s: AGENTAUTH_TOOL_RATE_LIMIT=%q (%v): want a burst of 2-10 and at most one call per 5 minutes after it, e.g. 3/h (deploy with -c toolRateLimit=3/h)",
			fn.Name, env["AGENTAUTH_TOOL_RATE_LIMIT"], err)
	}
	return fn
}

// lambdaGet calls the emulator's Lambda REST API, signed with the test
// credentials (this module has no Lambda client).
func (s *stack) lambdaGet(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(s.Endpoint, "/")+path, nil)
	if err != nil {
		return err
	}
	return signedCall(ctx, req, nil, "lambda", "GET "+path, out)
}

// bearer calls a tool route through the gateway with a bearer JWT (none
// when jwt is empty) and decodes the JSON answer. The JWT goes in the
// Authorization header only; nothing here prints it.
func (g *gateway) bearer(ctx context.Context, method, path, jwt string, body any) (answer, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return answer{}, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.endpoint+path, rd)
	if err != nil {
		return answer{}, nil, err
	}
	req.Host = g.host
	if jwt != "" {
		req.Header.Set("Authorization", "Bearer "+jwt)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	a, err := g.send(req, method, path)
	if err != nil {
		return answer{}, nil, err
	}
	b := a.Body
	if g.rec != nil {
		g.rec.add(method+" "+redactPath(path), b)
	}
	var out map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			return a, nil, fmt.Errorf("%s %s: HTTP %d, not JSON: %.300q", method, redactPath(path), a.Code, b)
		}
	}
	return a, out, nil
}

// at walks a decoded JSON value along keys (object fields) and indexes
// (array positions); nil when the path is not there.
func at(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any, path ...any) string {
	s, _ := at(v, path...).(string)
	return s
}

// names lists the "name" of each element of out.data (a tool manifest or
// skill search answer).
func names(out map[string]any) []string {
	var ns []string
	list, _ := at(out, "data").([]any)
	for _, e := range list {
		ns = append(ns, str(e, "name"))
	}
	return ns
}

// rateLimitKey is the DynamoDB key of a (principal, tool) rate-limit bucket
// ("ratelimit#" + ratelimit.Key, as dynamostore's item layout says).
func rateLimitKey(t *testing.T, principal, tool string) string {
	t.Helper()
	k, err := ratelimit.Key(principal, tool)
	if err != nil {
		t.Fatal(err)
	}
	return "ratelimit#" + k
}

// TestDeployedToolsFunction proves the deployed tools function end to end
// through the emulator's API Gateway: JWTs of a local issuer whose JWKS the
// function fetches at request time, tool discovery and skill search from
// the packaged bundle, an http tool whose upstream token the broker
// obtains after consent in headless Chromium (grant sealed under the
// stack's KMS key, opened inside the tools function), the DynamoDB rate
// limit across Lambda environments, tenant uploads stored in DynamoDB and
// kept to their tenant, the RFC 0064 seam, and no JWT, token or argument
// in the function's logs.
func TestDeployedToolsFunction(t *testing.T) {
	st := loadStack(t)
	requireProviderAndBrowser(t)
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	fn := loadToolsFunction(ctx, t, st)

	be := st.backends(ctx, t)
	db := dynamodb.NewFromConfig(be.Config)

	// The issuer whose JWKS the function was deployed to fetch.
	iss := jwttest.StartAt(t, fn.JWKSAddr, fn.JWKSPath)

	callbackUser := st.PublicURL + "/oauth/callback/demo-user"
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{
		Port:    providerPort,
		Clients: []e2ekit.Client{demoClient(t, st, be, callbackUser)},
	})
	browser := e2ekit.StartBrowserWith(t, e2ekit.BrowserOptions{LocalhostSubdomains: true})

	rec := &recorder{}
	gw := newGateway(st.Endpoint, st.APIHost, rec)
	rid := runID()
	t.Logf("run %s against %s (API %s), JWKS served at http://%s%s, rate limit %s", rid, fn.Name, st.APIHost,
		fn.JWKSAddr, fn.JWKSPath, fn.Env["AGENTAUTH_TOOL_RATE_LIMIT"])

	// Who calls. Every principal, user, tenant skill and seam principal is
	// this run's own, so reruns on one emulator never share a rate-limit
	// bucket, a grant or an upload.
	const canary = "canary-e2eaws-5d2b8e71c4"
	login := "tina-" + rid // the provider login; demo-user's subject is demo:user:<login>
	userSubject := "demo:user:" + login
	skillName := "refunds-" + strings.TrimPrefix(rid, "e2eaws-")
	const tenant, otherTenant = "acme", "globex"
	claims := func(sub string, extra map[string]any) map[string]any {
		c := map[string]any{"sub": sub}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	agentClaims := map[string]any{"scope": "profile.read", "tenant_id": tenant, "skills": []string{skillName},
		"agentauth_subjects": map[string]any{"user": userSubject}}
	agent := iss.Mint(t, claims("agent-"+rid, agentClaims))
	agentB := iss.Mint(t, claims("agent-b-"+rid, agentClaims)) // another principal, same user
	agentC := iss.Mint(t, claims("agent-c-"+rid, agentClaims))
	outsider := iss.Mint(t, claims("outsider-"+rid, map[string]any{"scope": "profile.read", "tenant_id": otherTenant, "skills": []string{skillName}}))
	noScope := iss.Mint(t, claims("noscope-"+rid, map[string]any{"tenant_id": tenant}))
	otherScope := iss.Mint(t, claims("reader-"+rid, map[string]any{"scope": "orders.read", "tenant_id": tenant,
		"agentauth_subjects": map[string]any{"user": userSubject}}))
	admin := iss.Mint(t, claims("admin-"+rid, map[string]any{"scope": "agentauth:admin", "tenant_id": tenant}))
	expired := iss.Mint(t, claims("agent-"+rid, map[string]any{"scope": "profile.read", "exp": time.Now().Add(-time.Hour).Unix()}))
	otherAudience := iss.Mint(t, claims("agent-"+rid, map[string]any{"scope": "profile.read", "aud": "someone-else"}))
	jwts := map[string]string{agent: "agent", agentB: "agent-b", agentC: "agent-c", outsider: "outsider", noScope: "noscope", otherScope: "reader",
		admin: "admin", expired: "expired", otherAudience: "other audience"}

	// What this run writes to the table, removed at the end (the stack
	// stays): the grant and session of the consent, the rate-limit
	// buckets, and the tenant skill (through the route when the test got
	// that far, so the function's own delete is tested).
	grantID := oauth.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "demo-user"}, userSubject)
	var cleanupMu sync.Mutex
	keys := map[string]bool{"grant#" + grantID: true}
	own := func(k string) {
		cleanupMu.Lock()
		keys[k] = true
		cleanupMu.Unlock()
	}
	skillUploaded, skillDeleted := false, false
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		if skillUploaded && !skillDeleted {
			if a, _, err := gw.bearer(cctx, http.MethodDelete, "/v1/admin/tenants/"+tenant+"/skills/"+skillName, admin, nil); err != nil || a.Code != http.StatusNoContent {
				t.Errorf("cleanup: delete the tenant skill %s: %v %d %.200s", skillName, err, a.Code, a.Body)
			}
		}
		sum := sha256.Sum256([]byte("refresh/" + grantID))
		own("lease#" + hex.EncodeToString(sum[:]))
		cleanupMu.Lock()
		defer cleanupMu.Unlock()
		for k := range keys {
			deleteKey(cctx, t, db, st.TableName, k)
		}
		t.Logf("cleanup: deleted the %d DynamoDB key(s) run %s may have written", len(keys), rid)
	})

	// Values that must appear in no log and no answer but their own.
	secrets := newSecretSet()
	secrets.keep("the canary tool argument", canary)
	for v, who := range jwts {
		secrets.keep("JWT of "+who, v)
	}

	must, timed := steps(t)
	call := func(t *testing.T, method, path, jwt string, body any) (answer, map[string]any) {
		t.Helper()
		a, out, err := gw.bearer(ctx, method, path, jwt, body)
		if err != nil {
			t.Fatal(err)
		}
		return a, out
	}
	invoke := func(t *testing.T, jwt, callID string) (answer, map[string]any) {
		t.Helper()
		return call(t, http.MethodPost, "/v1/tools/invoke", jwt, map[string]any{"toolName": "whoami", "args": map[string]any{}, "callId": callID})
	}
	callIDs := []string{}
	newCallID := func(what string) string {
		id := fmt.Sprintf("call-%s-%s-%d", rid, what, len(callIDs)+1)
		callIDs = append(callIDs, id)
		return id
	}

	must(timed("the function fetches this run's JWKS and accepts its JWTs", func(t *testing.T) {
		// A Lambda environment left warm by an earlier run holds that
		// run's key; this run's key id is new, so the environment fetches
		// the JWKS again — at most once per 30 s (jwtauth's refetch
		// interval), hence the retries.
		deadline := time.Now().Add(40 * time.Second)
		for {
			a, out := call(t, http.MethodGet, "/v1/agents/tools", agent, nil)
			if a.Code == http.StatusOK {
				return
			}
			reason := str(out, "error", "details", "reason")
			if a.Code != http.StatusUnauthorized || (reason != "unknown_key" && reason != "jwks_unavailable") || time.Now().After(deadline) {
				t.Fatalf("GET /v1/agents/tools with a valid JWT: %d %.300s (the function fetches http://%s%s; does the deployed jwksUrl match?)",
					a.Code, a.Body, fn.JWKSAddr, fn.JWKSPath)
			}
			time.Sleep(2 * time.Second)
		}
	}))

	// The tools-provider stream through the tools function's URL
	// (RESPONSE_STREAM, auth type NONE, the JWT checked by the function).
	// MiniStack hands a streamed answer over when the function ends it —
	// 2 s before the function's 30 s timeout — so it runs alongside the
	// steps below and is checked at the end.
	type streamed struct {
		raw []byte
		err error
	}
	toolsStream := make(chan streamed, 1)
	if st.ToolsStreamURL == "" {
		t.Fatal("the stack has a tools function but no ToolsStreamUrl output")
	}
	go func() {
		raw, err := st.streamURL(ctx, st.ToolsStreamURL, "/v1/agents/stream", "", agent)
		toolsStream <- streamed{raw, err}
	}()
	var toolsStreamBytes []byte

	must(timed("no or bad JWT: 401 with a reason code", func(t *testing.T) {
		for _, tc := range []struct{ name, jwt, reason string }{
			{"no token", "", "missing_token"},
			{"expired", expired, "expired"},
			{"another audience", otherAudience, "wrong_audience"},
			{"not a JWT", "a.b.c", "malformed"},
		} {
			for _, r := range []struct {
				method, path string
				body         any
			}{
				{"GET", "/v1/agents/tools", nil},
				{"POST", "/v1/tools/invoke", map[string]any{"toolName": "whoami", "args": map[string]any{"q": canary}}},
			} {
				a, out := call(t, r.method, r.path, tc.jwt, r.body)
				if a.Code != http.StatusUnauthorized || str(out, "error", "code") != "unauthenticated" ||
					str(out, "error", "details", "reason") != tc.reason || !strings.HasPrefix(a.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s, %s %s: %d %q %.300s, want 401 unauthenticated with reason %s", tc.name, r.method, r.path,
						a.Code, a.Header.Get("WWW-Authenticate"), a.Body, tc.reason)
				}
			}
		}
	}))

	must(timed("GET /v1/agents/tools: whoami for a caller with a scope", func(t *testing.T) {
		a, out := call(t, http.MethodGet, "/v1/agents/tools", agent, nil)
		if a.Code != http.StatusOK || !slices.Contains(names(out), "whoami") {
			t.Fatalf("the agent's tools: %d %.400s", a.Code, a.Body)
		}
		// The bundle's policy shows the demo tools to callers with a scope
		// claim only.
		a, out = call(t, http.MethodGet, "/v1/agents/tools", noScope, nil)
		if a.Code != http.StatusOK || len(names(out)) != 0 {
			t.Fatalf("a caller without a scope claim: %d %.400s, want no tools", a.Code, a.Body)
		}
		if a, _ := call(t, http.MethodGet, "/v1/agents/tools?include_disabled=true", agent, nil); a.Code != http.StatusForbidden {
			t.Fatalf("include_disabled without agentauth:admin: %d %.300s, want 403", a.Code, a.Body)
		}
	}))

	must(timed("GET /v1/agents/skills: the bundle's global skill connect-demo", func(t *testing.T) {
		a, out := call(t, http.MethodGet, "/v1/agents/skills?q="+url.QueryEscape("connect the demo provider")+"&top_k=5", agent, nil)
		data, _ := at(out, "data").([]any)
		i := slices.Index(names(out), "connect-demo")
		if a.Code != http.StatusOK || i < 0 || str(data[i], "scope") != "global" || str(data[i], "content") == "" {
			t.Fatalf("skills: %d %.400s", a.Code, a.Body)
		}
		if score, _ := at(data[i], "relevance_score").(float64); score <= 0 {
			t.Fatalf("connect-demo relevance_score %v", at(data[i], "relevance_score"))
		}
		if a, _ := call(t, http.MethodGet, "/v1/agents/skills?q=demo&top_k=x", agent, nil); a.Code != http.StatusBadRequest {
			t.Fatalf("top_k=x: %d, want 400", a.Code)
		}
	}))

	// MCP through the deployed tools function: the same clients as the
	// local e2e (test/e2e/mcpclients), on the emulator's API Gateway,
	// with JWTs for the MCP resource; one principal per client, so that
	// their calls stay within the stack's 3-an-hour rate limit.
	mcpResource := st.PublicURL + "/mcp"
	mcpURL := st.Endpoint + "/_aws/execute-api/" + strings.Split(st.APIHost, ".")[0] + "/$default/mcp"
	mcpKinds := e2ekit.MCPClientKinds(t)
	mcpTokens := map[string]string{}
	var mcpClients []*e2ekit.MCPClient
	for _, k := range mcpKinds {
		c := map[string]any{"aud": mcpResource}
		for key, v := range agentClaims {
			c[key] = v
		}
		mcpTokens[k.Name] = iss.Mint(t, claims("mcp-"+k.Name+"-"+rid, c))
		secrets.keep("JWT for MCP ("+k.Name+")", mcpTokens[k.Name])
	}
	// Started here, for the whole test: they live across the steps below.
	mcpConnects := map[string]e2ekit.MCPLine{}
	for _, k := range mcpKinds {
		c, conn := e2ekit.StartMCPClient(t, k, mcpURL, mcpTokens[k.Name], true)
		mcpClients, mcpConnects[k.Name] = append(mcpClients, c), conn
	}
	must(timed("MCP through the deployed tools function (stateless, JSON): Python and TypeScript SDK clients list, get the consent link; the REST audience refused", func(t *testing.T) {
		for i, k := range mcpKinds {
			c, conn := mcpClients[i], mcpConnects[k.Name]
			if !conn.OK {
				t.Fatalf("%s: connect: %s", k.Name, conn.Raw)
			}
			var names []string
			for _, tl := range c.List(t).Tools {
				names = append(names, tl.Name)
			}
			if !slices.Contains(names, "whoami") || !slices.Contains(names, "search_skills") {
				t.Fatalf("%s: tools/list %v", k.Name, names)
			}
			// Before the consent: the link, as the URL elicitation (a
			// client on 2026-07-28 sends its capabilities with each
			// request) or as the isError result (older revisions: a
			// stateless server has no session to remember them).
			r := c.Call(t, "whoami", map[string]any{})
			switch {
			case r.ErrorCode() == -32042 && len(r.Elicitations) == 1:
				checkAuthorizationURL(t, r.Elicitations[0].URL, callbackUser)
			case r.IsError && strings.Contains(r.Text, "authorization_required"):
				if !strings.Contains(r.Text, "http://127.0.0.1:9090/auth?") {
					t.Fatalf("%s: the consent result names no authorization link: %s", k.Name, r.Raw)
				}
			default:
				t.Fatalf("%s: whoami before the consent: %s", k.Name, r.Raw)
			}
			t.Logf("%s (protocol %s): %d tools; before the consent: %s", k.Name, conn.ProtocolVersion, len(names),
				map[bool]string{true: "URL elicitation (-32042)", false: "isError result with the link"}[r.ErrorCode() == -32042])
		}
		wrong, conn := e2ekit.StartMCPClient(t, mcpKinds[0], mcpURL, agent, false)
		mcpClients = append(mcpClients, wrong)
		if conn.OK || conn.HTTPStatus != http.StatusUnauthorized || !strings.Contains(conn.WWWAuthenticate, "/.well-known/oauth-protected-resource/mcp") {
			t.Fatalf("a JWT for the REST routes' audience: %s", conn.Raw)
		}
	}))

	must(timed("whoami: authorization_required, consent in Chromium, then ok", func(t *testing.T) {
		a, out := invoke(t, agent, newCallID("consent"))
		authz := at(out, "result", "authorization")
		if a.Code != http.StatusOK || str(out, "result", "status") != "authorization_required" || str(authz, "oauthAppRef") != "OAuthApp/demo-user" {
			t.Fatalf("first call: %d %.400s", a.Code, a.Body)
		}
		sessionID, authURL := str(authz, "authSessionId"), str(authz, "authorizationUrl")
		own("session#" + sessionID)
		if !strings.HasPrefix(sessionID, "as-") {
			t.Fatalf("authorization session id %q, want as-…", sessionID)
		}
		checkAuthorizationURL(t, authURL, callbackUser)

		// The user consents; the deployed callback function completes the
		// session and stores the grant.
		res := consent(ctx, t, browser, rec, secrets, authURL, login)
		if !strings.HasPrefix(res.FinalURL, callbackUser+"?") || res.Status != 200 || !strings.Contains(res.BodyText, "Connected") {
			t.Fatalf("callback page: %s status %d title %q: %.400s", e2ekit.RedactURL(res.FinalURL), res.Status, res.Title, res.BodyText)
		}
		sa, err := gw.do(ctx, http.MethodGet, "/v1/oauth/sessions/"+sessionID, nil, true)
		if err != nil {
			t.Fatal(err)
		}
		var s map[string]any
		if sa.Code != 200 || json.Unmarshal(sa.Body, &s) != nil || s["status"] != "completed" {
			t.Fatalf("GET /v1/oauth/sessions/%s (gettoken): %d %.300s, want completed", sessionID, sa.Code, sa.Body)
		}

		// The grant is sealed under the stack's KMS key; the tools
		// function opens it to call the upstream.
		g, err := be.Store.GetGrant(ctx, grantID)
		if err != nil {
			t.Fatalf("grant %s: %v", grantID, err)
		}
		v := g.Token.AccessToken
		if v.Algorithm != domain.AlgorithmAES256GCM || v.Ciphertext == "" || v.WrappedKey == "" || v.KeyID != st.KeyArn {
			t.Fatalf("grant %s access token is not KMS-envelope sealed under %s: algorithm %q key %q", grantID, st.KeyArn, v.Algorithm, v.KeyID)
		}
		keepGrantTokens(ctx, t, be, secrets, g)

		a, out = invoke(t, agent, newCallID("ok"))
		if a.Code != http.StatusOK || str(out, "result", "status") != "ok" || str(out, "result", "output", "sub") != login ||
			str(out, "toolReturned", "status") != "ok" {
			t.Fatalf("after consent: %d %.400s, want result ok with the profile of %s", a.Code, a.Body, login)
		}
		// A caller with another scope sees whoami (the policy asks for a
		// scope claim) but may not run it without profile.read, even for
		// a user who has consented.
		a, out = call(t, http.MethodPost, "/v1/tools/invoke", otherScope, map[string]any{"toolName": "whoami", "args": map[string]any{}})
		if a.Code != http.StatusForbidden || str(out, "error", "code") != "forbidden" || str(out, "error", "details", "requiredScopes", 0) != "profile.read" {
			t.Fatalf("a caller without profile.read: %d %.300s, want 403 forbidden", a.Code, a.Body)
		}
	}))

	must(timed(fmt.Sprintf("rate limit in DynamoDB: %d concurrent calls, %d allowed, then 429", fn.Limit.Burst+2, fn.Limit.Burst), func(t *testing.T) {
		principal, other := "agent-b-"+rid, "agent-c-"+rid
		own(rateLimitKey(t, principal, "whoami"))
		own(rateLimitKey(t, other, "whoami"))
		// All at once, so they spread over several Lambda environments:
		// the limit holds only if they share the bucket in DynamoDB.
		n := fn.Limit.Burst + 2
		type result struct {
			a   answer
			out map[string]any
			err error
		}
		results := make([]result, n)
		envsBefore := lambdaEnvs(st, fn.Name)
		var wg sync.WaitGroup
		for i := range n {
			id := newCallID("burst")
			wg.Go(func() {
				a, out, err := gw.bearer(ctx, http.MethodPost, "/v1/tools/invoke", agentB, map[string]any{"toolName": "whoami", "args": map[string]any{}, "callId": id})
				results[i] = result{a, out, err}
			})
		}
		wg.Wait()
		envsAfter := lambdaEnvs(st, fn.Name)
		allowed, limited := 0, 0
		for i, r := range results {
			switch {
			case r.err != nil:
				t.Errorf("call %d: %v", i, r.err)
			case r.a.Code == http.StatusOK && str(r.out, "result", "status") == "ok" && str(r.out, "result", "output", "sub") == login:
				allowed++
			case r.a.Code == http.StatusTooManyRequests:
				limited++
				secs, err := strconv.Atoi(r.a.Header.Get("Retry-After"))
				if err != nil || secs < 1 || str(r.out, "error", "code") != "rate_limited" || str(r.out, "error", "details", "toolName") != "whoami" ||
					at(r.out, "result") != nil {
					t.Errorf("call %d: 429 with Retry-After %q: %.300s", i, r.a.Header.Get("Retry-After"), r.a.Body)
				}
			default:
				t.Errorf("call %d: %d %.300s", i, r.a.Code, r.a.Body)
			}
		}
		if allowed != fn.Limit.Burst || limited != n-fn.Limit.Burst {
			t.Fatalf("%d concurrent calls by one principal: %d allowed, %d limited; want %d allowed (limit %s)",
				n, allowed, limited, fn.Limit.Burst, fn.Env["AGENTAUTH_TOOL_RATE_LIMIT"])
		}
		if envsBefore != nil && envsAfter != nil {
			pool, served := envsServed(envsBefore, envsAfter)
			t.Logf("Lambda environments of %s: %d before the burst, %d after; %d served it", fn.Name, pool, len(envsAfter), served)
		}
		// Later calls stay limited; another principal has its own budget.
		a, out := invoke(t, agentB, newCallID("limited"))
		if a.Code != http.StatusTooManyRequests || a.Header.Get("Retry-After") == "" || str(out, "error", "code") != "rate_limited" {
			t.Fatalf("call %d: %d %.300s, want 429 rate_limited with Retry-After", n+1, a.Code, a.Body)
		}
		a, out = invoke(t, agentC, newCallID("other"))
		if a.Code != http.StatusOK || str(out, "result", "status") != "ok" {
			t.Fatalf("another principal: %d %.300s, want 200 ok", a.Code, a.Body)
		}
		// The bucket is the DynamoDB item the limiter keeps.
		item, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(st.TableName), ConsistentRead: aws.Bool(true),
			Key: map[string]ddbtypes.AttributeValue{dynamostore.PartitionKey: &ddbtypes.AttributeValueMemberS{Value: rateLimitKey(t, principal, "whoami")}}})
		if err != nil || attrString(item.Item, "kind") != "RateLimit" || item.Item["tat"] == nil {
			t.Fatalf("the rate-limit item of (%s, whoami) in %s: %v %v", principal, st.TableName, err, item)
		}
	}))

	must(timed("MCP after the consent: whoami runs for both clients, through the deployed tools function", func(t *testing.T) {
		for i, k := range mcpKinds {
			r := mcpClients[i].Call(t, "whoami", map[string]any{})
			if r.IsError || r.ErrorCode() != 0 || !strings.Contains(r.Text, `"sub":"`+login+`"`) {
				t.Fatalf("%s: whoami after the consent: %s", k.Name, r.Raw)
			}
		}
	}))

	must(timed("tenant skill upload: stored in DynamoDB, found by its tenant only", func(t *testing.T) {
		body := map[string]any{"name": skillName, "description": "Refund an order for a customer",
			"content": "Open the refunds console and refund the order."}
		a, out := call(t, http.MethodPost, "/v1/admin/tenants/"+tenant+"/skills", admin, body)
		if a.Code != http.StatusCreated || str(out, "data", "name") != skillName {
			t.Fatalf("upload: %d %.300s, want 201", a.Code, a.Body)
		}
		skillUploaded = true
		if a, _ := call(t, http.MethodPost, "/v1/admin/tenants/"+otherTenant+"/skills", admin, body); a.Code != http.StatusForbidden {
			t.Fatalf("%s's admin uploading for %s: %d %.300s, want 403", tenant, otherTenant, a.Code, a.Body)
		}
		if a, _ := call(t, http.MethodPost, "/v1/admin/tenants/"+tenant+"/skills", agent, body); a.Code != http.StatusForbidden {
			t.Fatalf("a caller without agentauth:admin uploading: %d %.300s, want 403", a.Code, a.Body)
		}
		// The function's environments re-read the uploads every 10 s.
		search := "/v1/agents/skills?q=" + url.QueryEscape("refund an order") + "&top_k=20"
		deadline := time.Now().Add(uploadsPoll)
		polls := 0
		for {
			polls++
			_, out := call(t, http.MethodGet, search, agent, nil)
			if slices.Contains(names(out), skillName) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the %s caller did not find %s within %v (%d searches): %v", tenant, skillName, uploadsPoll, polls, names(out))
			}
			time.Sleep(time.Second)
		}
		t.Logf("found by the %s caller after %v (%d searches)", tenant, time.Since(deadline.Add(-uploadsPoll)).Round(100*time.Millisecond), polls)
		for range 3 {
			if _, out := call(t, http.MethodGet, search, outsider, nil); slices.Contains(names(out), skillName) {
				t.Fatalf("a caller of tenant %s (skills claim naming it) found %s's skill: %v", otherTenant, tenant, names(out))
			}
		}
		// The admin lists the tenant's uploads through the gateway.
		a, out = call(t, http.MethodGet, "/v1/admin/tenants/"+tenant+"/skills", admin, nil)
		if a.Code != http.StatusOK || !strings.Contains(string(a.Body), `"name":"`+skillName+`"`) {
			t.Fatalf("list uploads: %d %.300s", a.Code, a.Body)
		}
		a, _ = call(t, http.MethodDelete, "/v1/admin/tenants/"+tenant+"/skills/"+skillName, admin, nil)
		if a.Code != http.StatusNoContent {
			t.Fatalf("delete: %d %.300s, want 204", a.Code, a.Body)
		}
		skillDeleted = true
	}))

	must(timed("RFC 0064 seam and capability document", func(t *testing.T) {
		a, caps := call(t, http.MethodGet, "/.well-known/openwop", "", nil)
		th := at(caps, "capabilities", "toolHooks")
		for _, k := range []string{"supported", "prePostEvents", "perToolAuthorization", "perToolRateLimit"} {
			if a.Code != http.StatusOK || at(th, k) != true {
				t.Fatalf("capability document: %d %.300s, want toolHooks.%s true", a.Code, a.Body, k)
			}
		}
		principal := "seam-" + rid
		own(rateLimitKey(t, principal, "web.search"))
		own(rateLimitKey(t, principal, "db.delete"))
		for _, tc := range []struct {
			name   string
			body   map[string]any
			code   int
			status string
			errC   string
		}{
			{"ok", map[string]any{"principal": principal, "toolName": "web.search", "requiredScopes": []string{"web:read"}, "grantedScopes": []string{"web:read"},
				"args": map[string]any{"q": canary, "auth": "Bearer " + canary}}, 200, "ok", ""},
			{"forbidden", map[string]any{"principal": principal, "toolName": "db.delete", "requiredScopes": []string{"db:write"}, "grantedScopes": []string{}}, 403, "forbidden", "forbidden"},
			{"rate limit exhausted", map[string]any{"principal": principal, "toolName": "web.search", "simulateRateLimitExhausted": true}, 429, "rate_limited", "rate_limited"},
			{"tool error", map[string]any{"principal": principal, "toolName": "web.search", "simulateToolError": true}, 200, "error", ""},
		} {
			a, out := call(t, http.MethodPost, "/v1/host/sample/toolhooks/invoke", agent, tc.body)
			if a.Code != tc.code || str(out, "toolReturned", "status") != tc.status || len(str(out, "toolCalled", "argsHash")) != 64 ||
				str(out, "toolCalled", "toolName") != tc.body["toolName"] || str(out, "error", "code") != tc.errC {
				t.Errorf("seam %s: %d %.400s, want %d with toolReturned.status %s", tc.name, a.Code, a.Body, tc.code, tc.status)
			}
			if tc.code == 429 && a.Header.Get("Retry-After") == "" {
				t.Errorf("seam %s: no Retry-After", tc.name)
			}
		}
		if a, _ := call(t, http.MethodPost, "/v1/host/sample/toolhooks/invoke", "", map[string]any{"principal": principal, "toolName": "web.search"}); a.Code != http.StatusUnauthorized {
			t.Errorf("seam without a JWT: %d, want 401", a.Code)
		}
	}))

	must(timed("the tools stream over the function URL: the caller's tool list, then the reconnect comment before the timeout", func(t *testing.T) {
		var got streamed
		select {
		case got = <-toolsStream:
		case <-time.After(time.Minute):
			t.Fatal("the tools stream did not end within a minute")
		}
		if got.err != nil {
			t.Fatal(got.err)
		}
		toolsStreamBytes = got.raw
		frames, err := ssetest.Parse(bytes.NewReader(got.raw))
		if err != nil {
			t.Fatal(err)
		}
		_, want := call(t, http.MethodGet, "/v1/agents/tools", agent, nil)
		wantJSON, _ := json.Marshal(want)
		if len(frames) < 2 || frames[0].Event != "tools" || !strings.Contains(frames[0].Data, `"tool_id":"demo:whoami"`) ||
			!strings.Contains(frames[len(frames)-1].Comment, "reconnect") {
			t.Fatalf("stream frames %+v (the route answers %s)", frames, wantJSON)
		}
		t.Logf("%d frames; first: tools (%d bytes), last comment %q", len(frames), len(frames[0].Data), frames[len(frames)-1].Comment)
	}))

	must(timed("no JWT, token or tool argument in the tools function's logs or answers", func(t *testing.T) {
		collected, _ := secrets.count()
		if collected < len(jwts)+2 {
			t.Fatalf("only %d secret values collected (no stored access token?); the scan would prove little", collected)
		}
		leaks := 0
		leak := func(where, data string) { leaks += secrets.scan(t, where, data) }
		leak("the tools stream", string(toolsStreamBytes))
		for _, c := range mcpClients {
			c.Close()
			leak("the "+c.Kind.Name+" MCP client's output", c.Out.String()+c.Errs.String())
		}
		group := "/aws/lambda/" + fn.Name
		// CloudWatch Logs may lag the last invocation a little.
		var text string
		var events []logEvent
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(time.Second) {
			var err error
			if events, err = st.logEvents(ctx, group); err != nil {
				t.Fatal(err)
			}
			text = logText(events)
			if strings.Contains(text, callIDs[len(callIDs)-1]) || time.Now().After(deadline) {
				break
			}
		}
		leak("log group "+group, text)
		// The scan looked where the function logs: its audit events name
		// this run's calls (by call id, never by argument).
		for _, id := range callIDs {
			if !strings.Contains(text, id) {
				t.Errorf("log group %s has no audit event of call %s: the function's logs are not where the scan looks", group, id)
			}
		}
		for _, want := range []string{`"agent.toolCalled"`, `"agent.toolReturned"`} {
			if !strings.Contains(text, want) {
				t.Errorf("log group %s has no %s event", group, want)
			}
		}
		n := 0
		for _, r := range rec.all() {
			leak("answer of "+r.what, string(r.body))
			n++
		}
		if b, err := os.ReadFile(st.MiniStackLog); err == nil {
			leak("MiniStack's log", string(b))
		} else {
			t.Errorf("MiniStack's log: %v (set %s)", err, envMiniStackLog)
		}
		leak("provider output", strings.Join(p.Logs(), "\n"))
		t.Logf("%s: %d events; %d answers, MiniStack's log and the provider's output scanned for %d secret values; %d leaks",
			group, len(events), n, collected, leaks)
	}))

	t.Logf("run %s: total %v", rid, time.Since(started).Round(100*time.Millisecond))
}
