//go:build e2eaws

package e2eaws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/chromedp/cdproto/network"

	"github.com/agentauth/agentauth/shared/aws/awsbackends"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// consoleClientSecret is the demo provider's agentauth-console secret,
// which deploy-local seeds as <SecretPrefix>console-oidc.
const consoleClientSecret = "console-secret"

// TestDeployedConsole is the operator console's proof on the deployed
// stack: the console the gettoken function serves on the emulator's API
// Gateway (the ConsoleUrl output), signed in through the demo provider's
// real pages in Chromium, over data seeded through the deployed runtime
// routes (a grant of one tenant from a real consent, a consent of another
// tenant failed on subject_mismatch, a turn parked on consent on the turn
// function with the scripted model — a fixed script, not a language
// model). Every view renders that data and passes axe-core; a grant is
// revoked from its page; a tenant admin cannot open another tenant's
// grant; a POST without the CSRF token is refused; the parked turn's
// timeline follows the turn live through the gateway's 5 s stream
// windows while the user consents elsewhere; an instance is paused,
// resumed, terminated and deleted from its page; a dead letter is
// redriven from its page and runs; no page holds a token.
func TestDeployedConsole(t *testing.T) {
	st := loadStack(t)
	consoleURL := st.consoleURL(t)
	if st.TurnFunction == "" {
		skipOrFail(t, "the deployed stack has no turn function (deploy it with -c turns=1; make deploy-local does)")
	}
	requireProviderAndBrowser(t)
	if os.Getenv(envRequire) == "1" {
		if _, err := e2ekit.AxeScript(); err != nil {
			t.Fatal(err)
		}
	}
	e2ekit.RequireAxe(t)
	axe, err := e2ekit.AxeScript()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	must, timed := steps(t)

	be := st.backends(ctx, t)
	db := dynamodb.NewFromConfig(be.Config)
	rec := &recorder{}
	gw := newGateway(st.Endpoint, st.APIHost, rec)
	api := turnAPI{gw: gw}

	// The scripted model, where MiniStack's bedrock-runtime forwards the
	// turn function's Converse calls.
	sm, err := scripted.New(turnScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lnModel := listen(t, bedrockProxyPort, "the scripted model (MiniStack's MINISTACK_BEDROCK_PROXY_URL)")
	modelSrv := &http.Server{Handler: sm, ReadHeaderTimeout: 10 * time.Second}
	go modelSrv.Serve(lnModel)
	t.Cleanup(func() { modelSrv.Close() })

	// The provider the deployed bundle and console point at: the bundle's
	// client with the deployed secret, and the console's client with the
	// stack's console callback.
	callbackGlobal, callbackUser := st.PublicURL+"/oauth/callback/demo-global", st.PublicURL+"/oauth/callback/demo-user"
	consoleCallback := consoleURL + "auth/callback"
	listen(t, providerPort, "the demo provider (the deployed bundle's and console's issuer)").Close()
	client := demoClient(t, st, be, callbackGlobal, callbackUser)
	p := e2ekit.StartProvider(t, e2ekit.ProviderOptions{
		Port:    providerPort,
		Clients: []e2ekit.Client{client, e2ekit.ConsoleClient(consoleCallback)},
		Env:     []string{"PROVIDER_CONSOLE_REDIRECTS=" + consoleCallback},
	})
	browser := e2ekit.StartBrowserWith(t, e2ekit.BrowserOptions{LocalhostSubdomains: true})

	rid := runID()
	tag := strings.TrimPrefix(rid, "e2eaws-")
	c := &deployedConsole{ctx: ctx, gw: gw, base: strings.TrimSuffix(consoleURL, "/console/"), axe: axe, secrets: newSecretSet()}
	c.secrets.keep("the console's client secret", consoleClientSecret)
	c.secrets.keep("the bundle's client secret", client.ClientSecret)
	t.Logf("run %s against stack %s (console %s)", rid, st.Name, consoleURL)
	t.Cleanup(func() {
		for _, s := range c.sessions {
			s.Close()
		}
	})

	// What this run writes, removed at the end (the stack stays).
	var sessionIDs, grantIDs, instances []string
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
		defer ccancel()
		for _, inst := range instances {
			if a, err := gw.do(cctx, http.MethodDelete, instancePath(inst)+"/assistant", nil, true); err != nil || (a.Code != 200 && a.Code != 204 && a.Code != 404) {
				t.Logf("cleanup: delete instance %s: %v %d", inst, err, a.Code)
			}
		}
		keys := []string{}
		for _, id := range grantIDs {
			sum := sha256.Sum256([]byte("refresh/" + id))
			keys = append(keys, "grant#"+id, "lease#"+hex.EncodeToString(sum[:]))
		}
		for _, id := range sessionIDs {
			keys = append(keys, "session#"+id)
		}
		for _, k := range keys {
			deleteKey(cctx, t, db, st.TableName, k)
		}
		t.Logf("cleanup: %d instance(s) and %d DynamoDB key(s) of run %s", len(instances), len(keys), rid)
	})
	track := func(session string) {
		if session != "" && !slices.Contains(sessionIDs, session) {
			sessionIDs = append(sessionIDs, session)
		}
	}
	token := func(t *testing.T, app, global, user, tenant string) tokenResult {
		t.Helper()
		out, err := c.token(app, global, user, tenant)
		if err != nil {
			t.Fatal(err)
		}
		track(out.AuthSessionID)
		return out
	}

	// Tenants of this run only: the provider makes <tenant>-admin an admin
	// of <tenant>.
	acme, globex := "acme-"+tag, "globex-"+tag
	team := "demo:team:" + acme
	grantA := oauth.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "demo-global"}, team)
	grantIDs = append(grantIDs, grantA)
	carol := "demo:user:carol-" + tag
	grantIDs = append(grantIDs, oauth.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "demo-user"}, carol)) // should a bug store it
	inst := rid + "-console"
	instances = append(instances, inst)
	var sessionA, failed, accessA string
	var parked turnEventOut

	must(timed("seed: a grant of "+acme+" (Chromium consent), a subject_mismatch of "+globex+", a turn parked on consent", func(t *testing.T) {
		// The turn first: the turn function runs it while the browser
		// consents.
		if err := api.post(ctx, "who-"+inst, inst, "who am I?", "erin-"+tag); err != nil {
			t.Fatal(err)
		}
		out := token(t, "demo-global", team, "demo:user:alice-"+tag, acme)
		if out.Status != "authorization_required" {
			t.Fatalf("first token request: %s", out.describe())
		}
		sessionA = out.AuthSessionID
		res := c.consent(t, browser, out.AuthorizationURL, "alice-"+tag)
		if res.Status != 200 || !strings.Contains(res.BodyText, "Connected") {
			t.Fatalf("consent: status %d %.300s", res.Status, res.BodyText)
		}
		ready := token(t, "demo-global", team, "demo:user:alice-"+tag, acme)
		if ready.Status != "ready" {
			t.Fatalf("after the consent: %s", ready.describe())
		}
		accessA = ready.AccessToken

		out = token(t, "demo-user", "", carol, globex)
		failed = out.AuthSessionID
		res = c.consent(t, browser, out.AuthorizationURL, "bob-"+tag)
		if res.Status != 400 || !strings.Contains(res.BodyText, "subject_mismatch") {
			t.Fatalf("mismatch page: status %d %.300s", res.Status, res.BodyText)
		}
		c.userSaw = res.BodyText

		var err error
		if parked, err = api.waitEvent(ctx, inst, "turn.parked", time.Minute); err != nil {
			t.Fatal(err)
		}
		s, _ := parked.Data["authSessionId"].(string)
		track(s)
		t.Logf("grant %s (%s), failed consent %s (%s), turn %s parked on %s", grantA, acme, failed, globex, parked.TurnID, s)
		// The sealed values, opened with the stack's keys, for the scan.
		c.collectSealed(t, be, grantA, sessionIDs)
	}))

	var admin *e2ekit.Session
	must(timed("sign in as admin through the provider's pages", func(t *testing.T) {
		admin = c.signIn(t, browser, "admin")
	}))

	instPage := "/console/instances/default/" + inst + "/assistant"
	must(timed("every view renders the seeded data", func(t *testing.T) {
		html := c.overview(t, admin)
		c.contains(t, "overview", html, `id="operator">admin<`, "platform admin", "subject_mismatch",
			oauth.ReasonText(oauth.ReasonSubjectMismatch), "waiting on a consent", `id="instances-total">`)

		html = c.visit(t, admin, "/console/grants?tenant="+acme, 200)
		c.contains(t, "grants of "+acme, html, "/console/grants/"+grantA, "<code>"+team+"</code>", ">"+acme+"<", `name="tenant" value="`+acme+`"`)

		html = c.visit(t, admin, "/console/grants/"+grantA, 200)
		c.contains(t, "grant", html, `id="grant-status">active<`, team, "<dd>"+acme+"</dd>", "demo-global", `id="revoke"`)

		html = c.visit(t, admin, "/console/consents?tenant="+globex, 200)
		c.contains(t, "consents of "+globex, html, "/console/consents/"+failed, "subject_mismatch", carol)
		c.lacks(t, "consents of "+globex, html, sessionA)

		html = c.visit(t, admin, "/console/consents/"+failed, 200)
		c.contains(t, "failed consent", html, `id="consent-status">failed<`, "What the user saw", `id="reason">subject_mismatch<`,
			oauth.ReasonText(oauth.ReasonSubjectMismatch), carol)
		if !strings.Contains(c.userSaw, oauth.ReasonText(oauth.ReasonSubjectMismatch)) {
			t.Errorf("the callback page the user saw does not say %q: %q", oauth.ReasonText(oauth.ReasonSubjectMismatch), c.userSaw)
		}
		html = c.visit(t, admin, "/console/consents/"+sessionA, 200)
		c.contains(t, "completed consent", html, `id="consent-status">completed<`, team, "<dt>Started by</dt>")
		c.lacks(t, "completed consent", html, "What the user saw")
		parkedSession, _ := parked.Data["authSessionId"].(string)
		html = c.visit(t, admin, "/console/consents/"+parkedSession, 200)
		c.contains(t, "pending consent", html, `id="consent-status">pending<`, "demo:user:erin-"+tag, `href="`+instPage+`"`)

		html = c.visit(t, admin, "/console/instances", 200)
		c.contains(t, "instances", html, instPage)
		html = c.visit(t, admin, instPage, 200)
		c.contains(t, "parked instance", html, `id="instance-status">active<`, `id="parked"`, "<code>whoami</code>",
			"/console/consents/"+parkedSession, "/turns/"+parked.TurnID, `id="pause"`, `id="terminate"`, `id="delete"`)
		html = c.visit(t, admin, instPage+"/turns/"+parked.TurnID, 200)
		c.contains(t, "parked timeline", html, `id="turn-status">parked<`, "Parked on consent: whoami", "Tool call: whoami", "Step 1: the model answered")

		html = c.visit(t, admin, "/console/dead-letters", 200)
		c.contains(t, "dead letters", html, "<h1>")

		html = c.visit(t, admin, "/console/tools", 200)
		c.contains(t, "tools", html, "demo:whoami", `id="simulate"`)
		html = c.visit(t, admin, "/console/bundle", 200)
		c.contains(t, "bundle", html, "<code>demo-global</code>", "<code>whoami</code>", "demo-oidc.yaml:", `id="active-revision"`)

		html = c.visit(t, admin, "/console/grants/grant-doesnotexist0000", 404)
		c.contains(t, "unknown grant", html, "Nothing here")
	}))

	must(timed("a tenant admin ("+globex+") sees their tenant only", func(t *testing.T) {
		ga := c.signIn(t, browser, globex+"-admin")
		html := c.overview(t, ga)
		c.contains(t, globex+" overview", html, `id="operator">`+globex+`-admin<`, "admin of tenant "+globex, `id="grants-total">0<`, "subject_mismatch")
		c.lacks(t, globex+" overview", html, `href="/console/instances"`)
		html = c.visit(t, ga, "/console/consents/"+failed, 200)
		c.contains(t, globex+"'s failed consent", html, `id="consent-status">failed<`, carol)
		html = c.visit(t, ga, "/console/grants", 200)
		c.lacks(t, globex+" grants", html, grantA, team)

		html = c.visit(t, ga, "/console/grants/"+grantA, 404)
		c.contains(t, acme+"'s grant by URL", html, "Nothing here", "belongs to a tenant you do not administer")
		c.lacks(t, acme+"'s grant by URL", html, team)
		c.visit(t, ga, "/console/consents/"+sessionA, 404)
		c.visit(t, ga, instPage, 404)

		// Even with their own valid form token, the acme grant cannot be
		// revoked by globex's admin.
		csrf := c.csrfOf(t, ga)
		code, body := c.post(t, ga, "/console/grants/"+grantA+"/revoke", url.Values{"csrf": {csrf}})
		if code != 404 || !strings.Contains(body, "Nothing was changed") {
			t.Fatalf("%s admin revoking %s's grant: %d %.300q", globex, acme, code, body)
		}
		if out := token(t, "demo-global", team, "demo:user:alice-"+tag, acme); out.Status != "ready" {
			t.Fatalf("the grant after the refused revoke: %s", out.describe())
		}
	}))

	must(timed("a POST without the CSRF token is refused (403) and changes nothing", func(t *testing.T) {
		for _, form := range []url.Values{{}, {"csrf": {"not-the-token"}}} {
			code, body := c.post(t, admin, "/console/grants/"+grantA+"/revoke", form)
			if code != 403 || !strings.Contains(body, "This request was refused") {
				t.Fatalf("POST revoke with form %v: %d %.300q", form, code, body)
			}
		}
		if code, body := c.post(t, admin, instPage+"/terminate", url.Values{}); code != 403 {
			t.Fatalf("POST terminate without the token: %d %.300q", code, body)
		}
		if out := token(t, "demo-global", team, "demo:user:alice-"+tag, acme); out.Status != "ready" {
			t.Fatalf("the grant after the refused POSTs: %s", out.describe())
		}
		if in, err := api.inspect(ctx, inst); err != nil || in.Status != "active" {
			t.Fatalf("the instance after the refused terminate: %v %v", in.Status, err)
		}
	}))

	must(timed("revoke from the page: the token route asks for consent again", func(t *testing.T) {
		c.visit(t, admin, "/console/grants/"+grantA, 200)
		status, html := c.click(t, admin, "#revoke", e2ekit.ConfirmRevokeGrant)
		c.record("/console/grants/"+grantA+" (revoked)", html)
		if status != 200 {
			t.Fatalf("after revoke: %d", status)
		}
		c.contains(t, "revoked grant", html, `id="flash"`, "revoked (provider revocation: revoked)", `id="grant-status">revoked<`, `id="revoked-reason"`)
		c.lacks(t, "revoked grant", html, `id="revoke"`)
		out := token(t, "demo-global", team, "demo:user:alice-"+tag, acme)
		if out.Status != "authorization_required" {
			t.Fatalf("the token route after the revoke: %s", out.describe())
		}
		if active, err := p.Introspect(ctx, client.ClientID, client.ClientSecret, accessA); err != nil || active {
			t.Fatalf("the provider after the revoke: active=%v err=%v", active, err)
		}
	}))

	// An instance for the lifecycle, parked on consent while the live
	// timeline runs (its terminate interrupts that turn), and one for
	// the dead letter: both of this run.
	lifeInst, dlInst := rid+"-lifecycle", rid+"-deadletter"
	instances = append(instances, lifeInst, dlInst)
	grantErin := oauth.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "demo-user"}, "demo:user:erin-"+tag)
	grantIDs = append(grantIDs, grantErin)
	// Not must: the lifecycle and the dead letter do not need it.
	timed("the live timeline through the gateway: consent in another context, the page follows the turn", func(t *testing.T) {
		if err := api.post(ctx, "who-"+lifeInst, lifeInst, "who am I?", "frank-"+tag); err != nil {
			t.Fatal(err)
		}
		c.followLive(t, admin, browser, api, inst, parked, "erin-"+tag)
		// The consent's grant: its tokens are scanned for too.
		c.collectSealed(t, be, grantErin, nil)
	})

	must(timed("pause, resume, terminate (with a reason) and delete from the page", func(t *testing.T) {
		lp, err := api.waitEvent(ctx, lifeInst, "turn.parked", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := lp.Data["authSessionId"].(string)
		track(s)
		c.lifecycle(t, admin, api, lifeInst, lp.TurnID, "stopped by the e2eaws run "+tag)
	}))

	must(timed("a dead letter redriven from the page reaches the turn function", func(t *testing.T) {
		if st.DlqURL == "" {
			t.Fatalf("%s: stack %s has no DlqUrl output", st.outputsPath, st.Name)
		}
		c.redrive(t, admin, api, sqs.NewFromConfig(be.Config), st.DlqURL, dlInst, "gina-"+tag)
	}))

	timed("no token value in any page", func(t *testing.T) {
		n, kinds := c.secrets.count()
		if n < 8 {
			t.Fatalf("only %d values collected (%v); the scan would prove little", n, kinds)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		hits := 0
		for _, pg := range c.pages {
			hits += c.secrets.scan(t, pg.what, string(pg.body))
			// The client secrets are shorter than scan's 16 bytes.
			for _, s := range []string{consoleClientSecret, client.ClientSecret} {
				if strings.Contains(string(pg.body), s) {
					hits++
					t.Errorf("a client secret appears in %s", pg.what)
				}
			}
		}
		t.Logf("%d pages scanned for %d values (%v): %d hits", len(c.pages), n, kinds, hits)
	})

	timed("axe-core: no serious or critical violation", func(t *testing.T) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.axeRuns) < 15 {
			t.Fatalf("axe ran on %d pages only", len(c.axeRuns))
		}
		total := 0
		for _, r := range c.axeRuns {
			for _, v := range r.Violations {
				total++
				line := fmt.Sprintf("%s: %s (%s) %s", r.path, v.ID, v.Impact, v.Help)
				for _, n := range v.Nodes {
					line += fmt.Sprintf("\n    %s  %s", n.Target, n.HTML)
				}
				if v.Impact == "serious" || v.Impact == "critical" {
					t.Error(line)
				} else {
					t.Log(line)
				}
			}
		}
		t.Logf("axe-core ran on %d pages: %d violations in all", len(c.axeRuns), total)
	})
	t.Logf("TestDeployedConsole: %.1fs", time.Since(started).Seconds())
}

// consoleURL is the stack's ConsoleUrl output; without it (a stack
// deployed without -c consoleIssuer) the test skips, or fails when the
// emulator is required.
func (s *stack) consoleURL(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(s.outputsPath)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]map[string]string
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatalf("%s: %v", s.outputsPath, err)
	}
	u := all[s.Name]["ConsoleUrl"]
	if u == "" {
		skipOrFail(t, "stack %s has no console (no ConsoleUrl output): deploy it with -c consoleIssuer=…; make deploy-local does", s.Name)
	}
	if u != s.PublicURL+"/console/" {
		t.Fatalf("ConsoleUrl %q, want %s/console/", u, s.PublicURL)
	}
	return u
}

// deployedConsole is TestDeployedConsole's state: the gateway, what the
// test saw.
type deployedConsole struct {
	ctx     context.Context
	gw      *gateway
	base    string // http://<apiId>.execute-api.localhost:4566
	axe     string
	secrets *secretSet
	userSaw string // the subject_mismatch callback page's text

	mu       sync.Mutex
	sessions []*e2ekit.Session
	pages    []recorded
	axeRuns  []consoleAxeRun
}

type consoleAxeRun struct {
	path string
	e2ekit.AxeResult
}

// e2ekit.AxeResult is what the test reads of axe.run's results: how many
// rules passed, and the violations.

// token asks the deployed token route for app's token (SigV4-signed), the
// request's claims naming tenant, and keeps a token it answers with.
func (c *deployedConsole) token(app, global, user, tenant string) (tokenResult, error) {
	subjects := map[string]string{"user": user}
	if global != "" {
		subjects["global"] = global
	}
	body, _ := json.Marshal(map[string]any{
		"oauthAppRef": "OAuthApp/" + app,
		"turn": map[string]any{"auth": map[string]any{
			"actor":    map[string]string{"type": "user", "id": user},
			"subjects": subjects,
			"claims":   map[string]any{"sub": strings.TrimPrefix(user, "demo:user:"), "tenant_id": tenant},
		}},
	})
	a, err := c.gw.do(c.ctx, http.MethodPost, "/v1/oauth/token", body, true)
	if err != nil {
		return tokenResult{}, err
	}
	var out tokenResult
	if err := json.Unmarshal(a.Body, &out); err != nil || a.Code != http.StatusOK {
		return out, fmt.Errorf("POST /v1/oauth/token %s: HTTP %d %.300q", app, a.Code, a.Body)
	}
	c.secrets.keep("access token (ready answer)", out.AccessToken)
	if out.Status != "ready" {
		c.record("POST /v1/oauth/token → "+out.Status, string(a.Body))
	}
	return out, nil
}

// consent logs in as login at the provider and consents in Chromium; the
// page it ends on is kept for the scan, the code in its URL as a secret.
func (c *deployedConsole) consent(t *testing.T, b *e2ekit.Browser, authURL, login string) e2ekit.Result {
	t.Helper()
	res, err := b.Authorize(c.ctx, authURL, login)
	c.record("callback page "+e2ekit.RedactURL(res.FinalURL), res.Title+"\n"+res.BodyText)
	if u, perr := url.Parse(res.FinalURL); perr == nil {
		c.secrets.keep("authorization code (callback URL)", u.Query().Get("code"))
	}
	if err != nil {
		t.Fatalf("browser: %v (at %s, status %d, load error %q)", err, e2ekit.RedactURL(res.FinalURL), res.Status, res.LoadError)
	}
	return res
}

// collectSealed opens the grant's tokens (KMS) and the sessions' PKCE
// verifiers (the session keys) and keeps them for the scan.
func (c *deployedConsole) collectSealed(t *testing.T, be *awsbackends.Backends, grantID string, sessionIDs []string) {
	t.Helper()
	g, err := be.Store.GetGrant(c.ctx, grantID)
	if err != nil {
		t.Fatalf("grant %s: %v", grantID, err)
	}
	keepGrantTokens(c.ctx, t, be, c.secrets, g)
	for _, id := range sessionIDs {
		s, err := be.Store.GetSession(c.ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("session %s: %v", id, err)
		}
		if s.Flow.PKCE != nil {
			v, err := be.SessionSealer.Open(c.ctx, s.Flow.PKCE.CodeVerifier, domain.SessionBinding(s, domain.FieldCodeVerifier))
			if err != nil {
				t.Fatalf("open the PKCE verifier of %s: %v", id, err)
			}
			c.secrets.keep("PKCE code verifier (stored)", string(v))
		}
	}
}

// signIn opens the console (its grants page) in a new browser context and
// signs in as login through the provider's login and consent pages; the
// session cookie's value is kept for the scan.
func (c *deployedConsole) signIn(t *testing.T, b *e2ekit.Browser, login string) *e2ekit.Session {
	t.Helper()
	s, err := b.NewSession(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.sessions = append(c.sessions, s) // closed when the test ends, not the step
	c.mu.Unlock()
	// Not /console/ itself: the emulator's gateway hands that to the
	// function as /console, which redirects to /console/ (see overview).
	start := c.base + "/console/grants"
	res, err := s.Drive(c.ctx, start, login, func(r e2ekit.Result) bool {
		return r.Status == 200 && r.FinalURL == start
	})
	if err != nil {
		t.Fatalf("sign in as %s: %v", login, err)
	}
	if !strings.Contains(res.BodyText, login) {
		t.Fatalf("signed in as %s at %s: %.300q", login, e2ekit.RedactURL(res.FinalURL), res.BodyText)
	}
	c.secrets.keep("console session cookie", c.cookie(t, s).Value)
	return s
}

// visit opens path in s, wants status, and inspects the page.
func (c *deployedConsole) visit(t *testing.T, s *e2ekit.Session, path string, status int) string {
	t.Helper()
	res, err := s.Open(c.ctx, c.base+path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	if res.Status != status {
		t.Fatalf("%s: status %d, want %d: %.500s", path, res.Status, status, res.BodyText)
	}
	return c.inspect(t, s, path)
}

// inspect reads the page s shows: its HTML is kept for the scan and
// axe-core checks it.
func (c *deployedConsole) inspect(t *testing.T, s *e2ekit.Session, path string) string {
	t.Helper()
	html, err := s.HTML(c.ctx)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	c.record(path, html)
	ax, err := s.Axe(c.ctx, c.axe)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	c.mu.Lock()
	c.axeRuns = append(c.axeRuns, consoleAxeRun{path, ax})
	c.mu.Unlock()
	return html
}

// overview opens the console's overview (GET /console/) in s's tab.
// MiniStack 1.5.33's gateway hands /console/ to the function as /console
// (a one-segment path loses its trailing slash): the console answers
// /console with the overview too, so the browser gets it either way.
func (c *deployedConsole) overview(t *testing.T, s *e2ekit.Session) string {
	t.Helper()
	return c.visit(t, s, "/console/", 200)
}

func (c *deployedConsole) record(what, body string) {
	c.mu.Lock()
	c.pages = append(c.pages, recorded{what, []byte(body)})
	c.mu.Unlock()
}

// click clicks selector on s's page like a user and waits for the page
// it leads to; a destructive form asks first, and the confirm dialog,
// which must say dialog, is accepted ("": the button asks nothing). It
// returns the new page's status and HTML.
func (c *deployedConsole) click(t *testing.T, s *e2ekit.Session, selector, dialog string) (int, string) {
	t.Helper()
	status, html, err := s.Click(c.ctx, selector, dialog)
	if err != nil {
		t.Fatal(err)
	}
	return status, html
}

// cookie is s's console session cookie, as the browser holds it.
func (c *deployedConsole) cookie(t *testing.T, s *e2ekit.Session) *http.Cookie {
	t.Helper()
	ck, err := s.Cookie(c.ctx, c.base+"/console/", "agentauth_console")
	if err != nil || ck == nil {
		t.Fatalf("the browser holds no console session cookie: %v", err)
	}
	if !ck.HTTPOnly || ck.SameSite != network.CookieSameSiteLax {
		t.Errorf("session cookie: HttpOnly %v, SameSite %s", ck.HTTPOnly, ck.SameSite)
	}
	return e2ekit.HTTPCookie(ck)
}

// csrfOf is the form token on s's current page.
func (c *deployedConsole) csrfOf(t *testing.T, s *e2ekit.Session) string {
	t.Helper()
	v, err := s.FormValue(c.ctx, "csrf")
	if err != nil {
		t.Fatalf("no form token on the page: %v", err)
	}
	return v
}

// post sends a form (no browser) with s's session cookie through the
// emulator's gateway.
func (c *deployedConsole) post(t *testing.T, s *e2ekit.Session, path string, form url.Values) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.gw.endpoint+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = c.gw.host
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(c.cookie(t, s))
	a, err := c.gw.send(req, http.MethodPost, path)
	if err != nil {
		t.Fatal(err)
	}
	c.record("POST "+path, string(a.Body))
	return a.Code, string(a.Body)
}

func (c *deployedConsole) contains(t *testing.T, what, html string, wants ...string) {
	t.Helper()
	missed := false
	for _, w := range wants {
		if !strings.Contains(html, w) {
			t.Errorf("%s lacks %q", what, w)
			missed = true
		}
	}
	if missed {
		t.Logf("%s:\n%s", what, html)
	}
}

func (c *deployedConsole) lacks(t *testing.T, what, html string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(html, w) {
			t.Errorf("%s shows %q", what, w)
		}
	}
}
