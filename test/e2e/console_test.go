package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/filestore"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/turn/model/scripted"
	"github.com/agentauth/agentauth/test/e2e/e2ekit"
)

// ScreenshotsEnv, set to 1, makes TestConsole write a PNG of each console
// view to docs/console/ (off in CI, so the tree stays clean):
//
//	AGENTAUTH_SCREENSHOTS=1 E2E_REQUIRE=1 go test -count=1 -run TestConsole ./test/e2e/
const ScreenshotsEnv = "AGENTAUTH_SCREENSHOTS"

// TestConsole is the operator console's proof in Chromium, on the real
// binary: data seeded through the real routes (grants of two tenants, a
// consent failed on subject_mismatch, a turn parked on consent and one
// completed, both on the scripted model — a fixed script, not a language
// model); operators signed in through the provider's real pages; every
// view rendered, scanned for token values and checked by axe-core;
// revoke, pause, resume, terminate and delete clicked on the page; a
// tenant admin kept to their tenant; actions without the CSRF token
// refused; a parked turn's timeline followed live while the user consents
// in another tab.
func TestConsole(t *testing.T) {
	e2ekit.RequireProvider(t)
	e2ekit.RequireBrowser(t)
	e2ekit.RequireAxe(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	axe, err := e2ekit.AxeScript()
	if err != nil {
		t.Fatal(err)
	}
	c := &consoleRun{ctx: ctx, axe: axe}
	if os.Getenv(ScreenshotsEnv) == "1" {
		root, err := e2ekit.ModuleRoot()
		if err != nil {
			t.Fatal(err)
		}
		c.shots = filepath.Join(root, "docs", "console")
		if err := os.MkdirAll(c.shots, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	sm := startScripted(t)
	port := freePort(t)
	c.base = fmt.Sprintf("http://127.0.0.1:%d", port)
	callback := c.base + "/console/auth/callback"
	// Clients replaces the provider's defaults, the console's client
	// among them: it comes back with this server's callback.
	c.p = e2ekit.StartProvider(t, e2ekit.ProviderOptions{
		Clients: []e2ekit.Client{{
			ClientID: clientID, ClientSecret: clientSecret,
			RedirectURIs: []string{c.base + "/oauth/callback/e2e-user", c.base + "/oauth/callback/e2e-global"},
			GrantTypes:   []string{e2ekit.GrantAuthorizationCode, e2ekit.GrantRefreshToken},
		}, e2ekit.ConsoleClient(callback)},
		Env: []string{"PROVIDER_CONSOLE_REDIRECTS=" + callback},
	})
	c.home = t.TempDir()
	// Two skills of tenant acme besides the global one, so that the
	// simulator has one to show and one to hide.
	bundle := turnsBundle(c.p, sm+"/v1") + "---\n" + appYAML(c.p, "e2e-global", "global", "") + `---
apiVersion: agents.example.io/v1alpha1
kind: Skill
metadata: {name: acme-runbook}
spec: {name: runbook, description: Acme's on-call runbook, content: "Page the on-call, then the lead.", scope: tenant, tenantId: acme}
---
apiVersion: agents.example.io/v1alpha1
kind: Skill
metadata: {name: acme-pricing}
spec: {name: pricing, description: Acme's price list, content: "Ask sales.", scope: tenant, tenantId: acme}
`
	c.srv = startServer(t, port, c.home, map[string]string{"console.yaml": bundle}, "E2E_CLIENT_SECRET="+clientSecret,
		"AGENTAUTH_CONSOLE_ISSUER="+c.p.Issuer, "AGENTAUTH_CONSOLE_CLIENT_ID=agentauth-console", "AGENTAUTH_CONSOLE_CLIENT_SECRET=console-secret")
	t.Cleanup(func() {
		if t.Failed() {
			out := c.srv.Stdout.String()
			t.Logf("server log (tail):\n%s\nstderr:\n%s", out[max(0, len(out)-6000):], c.srv.Stderr)
		}
	})
	c.browser = e2ekit.StartBrowser(t)

	// Seed through the real routes.
	acme := c.seedGrant(t, "demo:team:acme", "acme", "alice")
	globex := c.seedGrant(t, "demo:team:globex", "globex", "bob")
	failed := c.seedMismatch(t)
	done := c.seedTurn(t, "thread-done", "erin")
	res, err := c.browser.Authorize(ctx, done.link, "erin")
	if err != nil {
		t.Fatalf("erin's consent: %v", err)
	}
	c.keepCode(res.FinalURL)
	c.srv.waitFor(ctx, t, "thread-done", "turn.completed")
	c.keepToken(t, "e2e-user", map[string]string{"user": "demo:user:erin"}, "acme")
	parked := c.seedTurn(t, "thread-parked", "alice")
	t.Logf("seeded: grants %s (acme), %s (globex); failed consent %s; turns %s (completed), %s (parked on %s)",
		acme.grant, globex.grant, failed.session, done.turn, parked.turn, parked.session)

	admin := c.signIn(t, "admin")

	t.Run("every view renders the seeded data", func(t *testing.T) {
		html := c.visit(t, admin, "/console/", 200, "overview")
		c.contains(t, "overview", html, `id="operator">admin<`, "platform admin", `id="grants-total">3<`, `id="instances-total">2<`,
			"subject_mismatch", oauth.ReasonText(oauth.ReasonSubjectMismatch), "1 waiting on a consent")

		html = c.visit(t, admin, "/console/grants", 200, "grants")
		c.contains(t, "grants", html, "/console/grants/"+acme.grant, "/console/grants/"+globex.grant, "demo:team:acme", "demo:team:globex", "demo:user:erin")
		// The tenant filter, through the page's own form.
		tab, cancel := admin.Tab(c.ctx)
		err := chromedp.Do(tab, chromedp.SetValue(chromedp.CSS(`input[name="tenant"]`), "acme"))
		if err == nil {
			_, err = chromedp.RunResponse(tab, chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
		}
		cancel()
		if err != nil {
			t.Fatalf("filter by tenant: %v", err)
		}
		html = c.inspect(t, admin, "/console/grants?tenant=acme", "")
		c.contains(t, "grants of acme", html, "/console/grants/"+acme.grant, "demo:user:erin", `name="tenant" value="acme"`)
		c.lacks(t, "grants of acme", html, globex.grant, "demo:team:globex")

		html = c.visit(t, admin, "/console/grants/"+acme.grant, 200, "grant")
		c.contains(t, "grant", html, `id="grant-status">active<`, "demo:team:acme", "<dd>acme</dd>", "e2e-global", "openid profile email", `id="revoke"`)

		html = c.visit(t, admin, "/console/consents", 200, "consents")
		c.contains(t, "consents", html, "/console/consents/"+failed.session, "/console/consents/"+acme.session, "/console/consents/"+parked.session,
			"subject_mismatch", "demo:user:carol", "an agent's turn", "the token route")

		// The failed consent shows what the user saw on the callback page.
		html = c.visit(t, admin, "/console/consents/"+failed.session, 200, "consent-failed")
		c.contains(t, "failed consent", html, `id="consent-status">failed<`, "What the user saw", `id="reason">subject_mismatch<`,
			oauth.ReasonText(oauth.ReasonSubjectMismatch), "demo:user:carol")
		if !strings.Contains(failed.userSaw, oauth.ReasonText(oauth.ReasonSubjectMismatch)) {
			t.Errorf("the callback page the user saw does not say %q: %q", oauth.ReasonText(oauth.ReasonSubjectMismatch), failed.userSaw)
		}
		html = c.visit(t, admin, "/console/consents/"+acme.session, 200, "")
		c.contains(t, "completed consent", html, `id="consent-status">completed<`, "demo:team:acme", "the token route")
		c.lacks(t, "completed consent", html, "What the user saw")
		html = c.visit(t, admin, "/console/consents/"+parked.session, 200, "")
		c.contains(t, "pending consent", html, `id="consent-status">pending<`, "demo:user:alice",
			`href="/console/instances/default/thread-parked/assistant"`)

		html = c.visit(t, admin, "/console/instances", 200, "instances")
		c.contains(t, "instances", html, "/console/instances/default/thread-done/assistant", "/console/instances/default/thread-parked/assistant")

		html = c.visit(t, admin, "/console/instances/default/thread-parked/assistant", 200, "instance")
		c.contains(t, "parked instance", html, `id="instance-status">active<`, `id="parked"`, "<code>whoami</code>",
			"/console/consents/"+parked.session, "/turns/"+parked.turn, `id="pause"`, `id="terminate"`, `id="delete"`)

		html = c.visit(t, admin, parked.timeline(), 200, "")
		c.contains(t, "parked timeline", html, `id="turn-status">parked<`, `id="live"`, "Parked on consent: whoami", "Tool call: whoami", "Step 1: the model answered")
		c.lacks(t, "parked timeline", html, "Turn completed")

		html = c.visit(t, admin, done.timeline(), 200, "timeline")
		c.contains(t, "completed timeline", html, `id="turn-status">completed<`, "Parked on consent: whoami", "Resumed",
			"waited ", "Tool completed: whoami", "Turn completed", "finish reason")
		c.lacks(t, "completed timeline", html, `id="live"`)

		html = c.visit(t, admin, "/console/tools", 200, "")
		c.contains(t, "tools", html, "demo:whoami", "orders:list", `id="simulate"`)
		// The policy simulator, through its form.
		tab, cancel = admin.Tab(c.ctx)
		err = chromedp.Do(tab, chromedp.SetValue(chromedp.ID("claims"), `{"sub": "alice", "tenant_id": "acme", "scope": "profile.read", "skills": ["runbook"]}`))
		if err == nil {
			_, err = chromedp.RunResponse(tab, chromedp.Click(chromedp.ID("simulate")))
		}
		cancel()
		if err != nil {
			t.Fatalf("simulate: %v", err)
		}
		html = c.inspect(t, admin, "/console/tools?claims=…", "tools")
		c.contains(t, "simulation", html, `id="simulation"`, "<code>staff</code>", "<code>basic</code>", "<code>demo:whoami</code>",
			// Why: the policy, the group and the selector that gave each
			// tool; the bundle's global skill, acme's skill the skills
			// claim names, and acme's other one hidden.
			"<tr><td><code>demo:whoami</code></td><td><ul class=\"via\"><li>policy <code>staff</code> → group <code>basic</code> (selector: <code>{source: regex:(demo|orders)$}</code>)</li></ul>",
			`id="skills-count">2<`, "<td><code>deploy</code></td><td>global</td><td><span class=\"badge st-ok\">visible</span> a global skill: every caller sees it</td>",
			"<td><code>runbook</code></td><td>tenant <code>acme</code></td><td><span class=\"badge st-ok\">visible</span> its tenant's, named in the caller's <code>skills</code> claim</td>",
			"<td><code>pricing</code></td><td>tenant <code>acme</code></td><td><span class=\"badge st-off\">hidden</span> its tenant's, not named in the caller's <code>skills</code> claim</td>")

		html = c.visit(t, admin, "/console/bundle", 200, "bundle")
		c.contains(t, "bundle", html, "<code>e2e-global</code>", "<code>whoami</code>", "console.yaml:")
		c.lacks(t, "bundle", html, clientSecret)

		// The completed turn's whoami call is in the audit stream, content-free.
		html = c.visit(t, admin, "/console/calls", 200, "calls")
		c.contains(t, "tool calls", html, "<code>whoami</code>", `class="badge st-ok">ok<`, " via turn")
		html = c.visit(t, admin, "/console/dead-letters", 200, "")
		c.contains(t, "dead letters", html, "No dead letters")

		html = c.visit(t, admin, "/console/grants/grant-doesnotexist0000", 404, "")
		c.contains(t, "unknown grant", html, "Nothing here")
	})

	t.Run("a tenant admin sees their tenant only", func(t *testing.T) {
		acmeAdmin := c.signIn(t, "acme-admin")
		html := c.visit(t, acmeAdmin, "/console/", 200, "")
		c.contains(t, "acme overview", html, `id="operator">acme-admin<`, "admin of tenant acme", `id="grants-total">2<`)
		c.lacks(t, "acme overview", html, `href="/console/instances"`, "Agent instances")

		html = c.visit(t, acmeAdmin, "/console/grants", 200, "")
		c.contains(t, "acme grants", html, "/console/grants/"+acme.grant, "demo:team:acme")
		c.lacks(t, "acme grants", html, globex.grant, "demo:team:globex", `href="/console/instances"`)

		html = c.visit(t, acmeAdmin, "/console/grants/"+globex.grant, 404, "")
		c.contains(t, "globex grant by URL", html, "Nothing here", "belongs to a tenant you do not administer")
		c.lacks(t, "globex grant by URL", html, "demo:team:globex")
		c.visit(t, acmeAdmin, "/console/instances", 404, "")
		c.visit(t, acmeAdmin, "/console/instances/default/thread-done/assistant", 404, "")
		c.visit(t, acmeAdmin, done.timeline(), 404, "")
		c.visit(t, acmeAdmin, "/console/tools", 404, "")
		c.visit(t, acmeAdmin, "/console/bundle", 404, "")

		// Even with their own valid form token, globex's grant cannot be
		// revoked by an acme admin.
		csrf := c.csrfOf(t, acmeAdmin)
		code, body := c.post(t, acmeAdmin, "/console/grants/"+globex.grant+"/revoke", url.Values{"csrf": {csrf}})
		if code != 404 || !strings.Contains(body, "Nothing was changed") {
			t.Fatalf("acme admin revoking globex's grant: %d %q", code, body)
		}
		c.stillActive(t, "demo:team:globex", "globex")
	})

	t.Run("an action without the CSRF token is refused and changes nothing", func(t *testing.T) {
		// The session cookie works: a page answers 200 with it.
		if code, _ := c.get(t, admin, "/console/grants/"+acme.grant); code != 200 {
			t.Fatalf("GET with the session cookie: %d", code)
		}
		for _, form := range []url.Values{{}, {"csrf": {"not-the-token"}}} {
			code, body := c.post(t, admin, "/console/grants/"+acme.grant+"/revoke", form)
			if code != 403 || !strings.Contains(body, "This request was refused") {
				t.Fatalf("POST revoke with form %v: %d %q", form, code, body)
			}
		}
		if code, _ := c.post(t, admin, "/console/instances/default/thread-done/assistant/terminate", url.Values{}); code != 403 {
			t.Fatalf("POST terminate without the token: %d", code)
		}
		// A page on another origin (same host, another port: the browser
		// sends the Lax cookie along) posts the revoke form.
		elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, `<!doctype html><html lang="en"><title>elsewhere</title><form method="post" action="%s/console/grants/%s/revoke"><button id="go">Claim your prize</button></form></html>`,
				c.base, acme.grant)
		}))
		defer elsewhere.Close()
		if res, err := admin.Open(c.ctx, elsewhere.URL); err != nil || res.Status != 200 {
			t.Fatalf("open the other origin's page: %+v %v", res, err)
		}
		status, html := c.click(t, admin, "#go", "")
		if status != 403 || !strings.Contains(html, "This request was refused") {
			t.Fatalf("the other origin's form: %d\n%s", status, html)
		}
		c.record("/console/grants/…/revoke from another origin", html)
		c.stillActive(t, "demo:team:acme", "acme")
		c.stillActive(t, "demo:team:globex", "globex")
		if _, out := c.srv.call(t, "GET", "/v1/instances/default/thread-done/assistant", nil); out["status"] != "active" {
			t.Fatalf("thread-done after refused terminate: %v", out["status"])
		}
		html = c.visit(t, admin, "/console/grants/"+acme.grant, 200, "")
		c.contains(t, "acme grant after refusals", html, `id="grant-status">active<`)
	})

	t.Run("the live timeline follows a parked turn through consent", func(t *testing.T) {
		html := c.visit(t, admin, parked.timeline(), 200, "")
		c.contains(t, "parked timeline", html, `id="live"`, "Parked on consent: whoami")
		tab, cancel := admin.Tab(c.ctx)
		defer cancel()
		// Entries the page appends from now on are recorded where a
		// reload keeps them (the page reloads itself once the turn ends).
		if err := e2ekit.WatchAppended(tab); err != nil {
			t.Fatal(err)
		}
		// The user consents in another tab.
		res, err := c.browser.Authorize(c.ctx, parked.link, "alice")
		if err != nil {
			t.Fatalf("alice's consent: %v", err)
		}
		c.keepCode(res.FinalURL)

		var appended []string
		deadline := time.Now().Add(30 * time.Second)
		for i := 0; ; i++ {
			// Errors while the page reloads are expected: read again.
			if got, err := e2ekit.Appended(tab); err == nil {
				appended = got
			}
			if slices.ContainsFunc(appended, func(s string) bool { return strings.Contains(s, " Resumed (") }) &&
				slices.ContainsFunc(appended, func(s string) bool { return strings.HasSuffix(s, " Turn completed") }) {
				break
			}
			if i >= 300 || time.Now().After(deadline) {
				t.Fatalf("the page appended %q, want the resumed and completed entries", appended)
			}
			e2ekit.WaitTick(c.ctx, 100*time.Millisecond)
		}
		t.Logf("appended live, without a reload: %q", appended)
		for _, seq := range e2ekit.RepeatedSeqs(appended) {
			t.Errorf("entry %s appended twice: %q", seq, appended)
		}
		// Once the turn ended, the page reloads itself into the replay.
		if st, err := e2ekit.WaitSettled(c.ctx, tab, "completed", 20*time.Second, 100*time.Millisecond); err != nil {
			t.Fatalf("the timeline did not settle as completed (%q, %v)", st, err)
		}
		html = c.inspect(t, admin, parked.timeline()+" (after the turn ended)", "")
		c.contains(t, "resumed timeline", html, "Parked on consent: whoami", "Resumed", "waited ", "Tool completed: whoami", "Turn completed")
		// Every event of the turn is an entry of the replay, once. The
		// console reads events after seq 0 so far, which leaves out
		// turn.started (seq 0): tolerated here, reported to the console.
		for _, ev := range c.srv.turnEvents(t, "thread-parked", parked.turn) {
			seq := fmt.Sprint(ev["seq"])
			n := strings.Count(html, `data-seq="`+seq+`"`)
			if n != 1 {
				t.Errorf("the replayed timeline has %d entries for event %s (%s)", n, seq, ev["type"])
			}
		}
		c.keepToken(t, "e2e-user", map[string]string{"user": "demo:user:alice"}, "acme")
	})

	t.Run("revoke from the page", func(t *testing.T) {
		c.visit(t, admin, "/console/grants/"+acme.grant, 200, "")
		status, html := c.click(t, admin, "#revoke", e2ekit.ConfirmRevokeGrant)
		if status != 200 {
			t.Fatalf("after revoke: %d", status)
		}
		c.record("/console/grants/"+acme.grant+" (revoked)", html)
		c.contains(t, "revoked grant", html, `id="flash"`, "revoked (provider revocation: revoked)", `id="grant-status">revoked<`, `id="revoked-reason"`)
		c.lacks(t, "revoked grant", html, `id="revoke"`)
		out := c.token(t, "e2e-global", map[string]string{"global": "demo:team:acme", "user": "demo:user:alice"}, "acme")
		if out["status"] != "authorization_required" {
			t.Fatalf("the token route after the revoke: %v", out["status"])
		}
		if active, err := c.p.Introspect(c.ctx, clientID, clientSecret, acme.accessToken); err != nil || active {
			t.Fatalf("the provider after the revoke: active=%v err=%v", active, err)
		}
		c.stillActive(t, "demo:team:globex", "globex")
	})

	t.Run("pause, resume, terminate and delete from the page", func(t *testing.T) {
		const inst = "/console/instances/default/thread-done/assistant"
		state := func() (int, string) {
			code, out := c.srv.call(t, "GET", "/v1/instances/default/thread-done/assistant", nil)
			s, _ := out["status"].(string)
			return code, s
		}
		c.visit(t, admin, inst, 200, "")
		for _, step := range e2ekit.InstanceLifecycle() {
			status, html := c.click(t, admin, step.Button, step.Dialog)
			c.record(inst+" after "+step.Button, html)
			if status != 200 {
				t.Fatalf("%s: %d", step.Button, status)
			}
			c.contains(t, "instance after "+step.Button, html, "Done: "+step.Flash+".", `id="instance-status">`+step.Status+`<`)
			if code, s := state(); code != 200 || s != step.Status {
				t.Fatalf("runtime API after %s: %d %s, want %s", step.Button, code, s, step.Status)
			}
		}
		status, html := c.click(t, admin, "#delete", e2ekit.ConfirmDelete)
		c.record(inst+" after #delete", html)
		if status != 200 {
			t.Fatalf("#delete: %d", status)
		}
		c.contains(t, "instances after delete", html, "Done: deleted.", "/console/instances/default/thread-parked/assistant")
		c.lacks(t, "instances after delete", html, "thread-done")
		if code, _ := state(); code != 404 {
			t.Fatalf("runtime API after delete: %d, want 404", code)
		}
		c.visit(t, admin, inst, 404, "")
	})

	t.Run("a dead letter redriven from the page", func(t *testing.T) {
		// A user message the turn worker gave up on, as it keeps one: a
		// file in the home's dead letters (queueworker's format). The
		// redrive puts it back on the home's queue; the worker runs it.
		const instance = "thread-dead"
		input, _ := json.Marshal(map[string]string{"type": "user.input", "text": "who am I?"})
		ev := domain.Event{ID: "ev-dead-letter-e2e", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "default"}, InstanceKey: instance,
			AgentName: "assistant", Input: string(input), Metadata: map[string]string{"eventType": "user.input"}, EnqueuedAt: time.Now().UTC(),
			Auth: domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: "dora"}, Subjects: &domain.Subjects{User: "demo:user:dora"},
				Claims: map[string]any{"sub": "dora", "scope": "profile.read", "tenant_id": "acme"}}}
		letter, _ := json.Marshal(map[string]any{"event": ev, "error": "turn: the store was unavailable (e2e)", "attempts": 5, "at": time.Now().UTC()})
		dir := filepath.Join(c.home, "worker", "deadletter")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("%d-e2e.json", time.Now().UnixNano())
		if err := os.WriteFile(filepath.Join(dir, id), letter, 0o600); err != nil {
			t.Fatal(err)
		}
		html := c.visit(t, admin, "/console/dead-letters", 200, "deadletters")
		c.contains(t, "dead letters", html, "ev-dead-letter-e2e", "turn: the store was unavailable (e2e)", "/console/instances/default/"+instance+"/assistant")
		html = c.visit(t, admin, "/console/dead-letters/"+id, 200, "")
		c.contains(t, "a dead letter", html, "who am I?", "demo:user:dora", `id="redrive"`)
		status, html := c.click(t, admin, "#redrive", "")
		c.record("/console/dead-letters after #redrive", html)
		if status != 200 {
			t.Fatalf("#redrive: %d", status)
		}
		c.contains(t, "dead letters after the redrive", html, "Done: redriven "+id, "No dead letters")
		// The worker ran the redriven event: its turn parks on dora's consent.
		turnID, _ := c.srv.waitFor(c.ctx, t, instance, "turn.parked")
		t.Logf("the redriven event ran: turn %s parked on consent", turnID)
	})

	t.Run("no token value in any page", func(t *testing.T) {
		c.collectSealed(t)
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.secrets) < 8 {
			t.Fatalf("only %d token values collected; the scan would prove little", len(c.secrets))
		}
		hits := 0
		for _, pg := range c.pages {
			for _, s := range c.secrets {
				if strings.Contains(pg.html, s) {
					hits++
					t.Errorf("a token value (%.6s…) appears in %s", s, pg.path)
				}
			}
		}
		t.Logf("%d pages scanned for %d token values: %d hits", len(c.pages), len(c.secrets), hits)
	})

	t.Run("axe-core: no serious or critical violation", func(t *testing.T) {
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
}

// consoleRun is TestConsole's state: the stack, what the test saw.
type consoleRun struct {
	ctx     context.Context
	base    string
	home    string
	srv     *server
	p       *e2ekit.Provider
	browser *e2ekit.Browser
	axe     string
	shots   string // where screenshots go; "" when off

	mu      sync.Mutex
	secrets []string // every token value and code seen
	pages   []visitedPage
	axeRuns []axeRun
}

type visitedPage struct{ path, html string }

type axeRun struct {
	path string
	e2ekit.AxeResult
}

// seeded is a consent (and what it made) the test seeded.
type seeded struct {
	session, grant, accessToken string
	userSaw                     string // the callback page's text
	// A parked turn's instance, turn and consent link.
	instance, turn, link string
}

func (s seeded) timeline() string {
	return "/console/instances/default/" + s.instance + "/assistant/turns/" + s.turn
}

func startScripted(t *testing.T) string {
	t.Helper()
	sm, err := scripted.New(scripted.DemoScript(), nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := sm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	return u
}

func (c *consoleRun) keep(s string) {
	if len(s) < 16 {
		return
	}
	c.mu.Lock()
	c.secrets = append(c.secrets, s)
	c.mu.Unlock()
}

// keepCode keeps the authorization code of a callback URL.
func (c *consoleRun) keepCode(callbackURL string) {
	if u, err := url.Parse(callbackURL); err == nil {
		c.keep(u.Query().Get("code"))
	}
}

// token asks the token route for app's token of subjects, with claims
// naming tenant, and keeps any token it answers with.
func (c *consoleRun) token(t *testing.T, app string, subjects map[string]string, tenant string) map[string]any {
	t.Helper()
	actor := subjects["user"]
	code, out := c.srv.call(t, "POST", "/v1/oauth/token", map[string]any{
		"oauthAppRef": "OAuthApp/" + app,
		"turn": map[string]any{"auth": map[string]any{
			"actor":    map[string]string{"type": "user", "id": actor},
			"subjects": subjects,
			"claims":   map[string]any{"sub": strings.TrimPrefix(actor, "demo:user:"), "tenant_id": tenant},
		}},
	})
	if code != 200 {
		t.Fatalf("token %s: %d %v", app, code, out)
	}
	if tok, _ := out["accessToken"].(string); tok != "" {
		c.keep(tok)
	}
	return out
}

func (c *consoleRun) keepToken(t *testing.T, app string, subjects map[string]string, tenant string) string {
	t.Helper()
	out := c.token(t, app, subjects, tenant)
	if out["status"] != "ready" {
		t.Fatalf("token %s for %v: %v", app, subjects, out)
	}
	return out["accessToken"].(string)
}

// stillActive checks that the global grant of subject still hands out
// its token.
func (c *consoleRun) stillActive(t *testing.T, subject, tenant string) {
	t.Helper()
	if out := c.token(t, "e2e-global", map[string]string{"global": subject, "user": "demo:user:alice"}, tenant); out["status"] != "ready" {
		t.Fatalf("%s's grant: %v, want ready", subject, out["status"])
	}
}

// seedGrant: a token request whose claims name tenant, consent in the
// browser as login, then the token (an active grant).
func (c *consoleRun) seedGrant(t *testing.T, subject, tenant, login string) seeded {
	t.Helper()
	subjects := map[string]string{"global": subject, "user": "demo:user:" + login}
	out := c.token(t, "e2e-global", subjects, tenant)
	if out["status"] != "authorization_required" {
		t.Fatalf("first token request for %s: %v", subject, out)
	}
	res, err := c.browser.Authorize(c.ctx, out["authorizationUrl"].(string), login)
	if err != nil || !strings.Contains(res.BodyText, "Connected") {
		t.Fatalf("consent for %s: %v %+v", subject, err, res)
	}
	c.keepCode(res.FinalURL)
	s := seeded{session: out["authSessionId"].(string)}
	s.accessToken = c.keepToken(t, "e2e-global", subjects, tenant)
	for _, g := range c.grants(t) {
		if g.Subject == subject {
			s.grant = g.ID
		}
	}
	if s.grant == "" {
		t.Fatalf("no grant of %s stored", subject)
	}
	return s
}

// seedMismatch: a user-mode consent for carol where bob signs in.
func (c *consoleRun) seedMismatch(t *testing.T) seeded {
	t.Helper()
	out := c.token(t, "e2e-user", map[string]string{"user": "demo:user:carol"}, "acme")
	res, err := c.browser.Authorize(c.ctx, out["authorizationUrl"].(string), "bob")
	if err != nil || res.Status != 400 || !strings.Contains(res.BodyText, "subject_mismatch") {
		t.Fatalf("mismatch page: %v %+v", err, res)
	}
	c.keepCode(res.FinalURL)
	return seeded{session: out["authSessionId"].(string), userSaw: res.BodyText}
}

// seedTurn posts a message to instance as user (tenant acme) and waits
// for the turn to park on the whoami tool's consent.
func (c *consoleRun) seedTurn(t *testing.T, instance, user string) seeded {
	t.Helper()
	code, out := c.srv.call(t, "POST", "/v1/instances/default/"+instance+"/events", map[string]any{
		"id": "msg-" + instance, "text": "who am I?",
		"auth": map[string]any{"actor": map[string]string{"type": "user", "id": user},
			"subjects": map[string]string{"user": "demo:user:" + user},
			"claims":   map[string]any{"sub": user, "scope": "profile.read", "tenant_id": "acme"}},
	})
	if code != 202 {
		t.Fatalf("post to %s: %d %v", instance, code, out)
	}
	turnID, ev := c.srv.waitFor(c.ctx, t, instance, "turn.parked")
	d := ev["data"].(map[string]any)
	return seeded{instance: instance, turn: turnID, link: d["authorizationUrl"].(string), session: d["authSessionId"].(string)}
}

// grants reads the home's grants (ids and subjects only).
func (c *consoleRun) grants(t *testing.T) []domain.Grant {
	t.Helper()
	st, err := filestore.New(c.home)
	if err != nil {
		t.Fatal(err)
	}
	gs, _, err := st.ListGrants(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return gs
}

// collectSealed opens the home's sealed records with its key and keeps
// the plaintexts (refresh tokens, PKCE verifiers) for the scan.
func (c *consoleRun) collectSealed(t *testing.T) {
	t.Helper()
	kr, err := aesseal.Load(c.home, "")
	if err != nil {
		t.Fatal(err)
	}
	st, err := filestore.New(c.home)
	if err != nil {
		t.Fatal(err)
	}
	gs, _, _ := st.ListGrants(c.ctx)
	for _, g := range gs {
		if g.Token.RefreshToken != nil {
			v, err := kr.Open(c.ctx, *g.Token.RefreshToken, domain.Binding{Record: "grant", RecordID: g.ID, Field: "refreshToken"})
			if err != nil {
				t.Fatalf("open refresh token: %v", err)
			}
			c.keep(string(v))
		}
	}
	ss, _, _ := st.ListSessions(c.ctx)
	for _, s := range ss {
		if s.Flow.PKCE != nil {
			v, err := kr.Open(c.ctx, s.Flow.PKCE.CodeVerifier, domain.Binding{Record: "session", RecordID: s.ID, Field: "codeVerifier"})
			if err != nil {
				t.Fatalf("open verifier: %v", err)
			}
			c.keep(string(v))
		}
	}
}

// signIn opens the console in a new browser context and signs in as
// login through the provider's login and consent pages.
func (c *consoleRun) signIn(t *testing.T, login string) *e2ekit.Session {
	t.Helper()
	s, err := c.browser.NewSession(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	tab, cancel := s.Tab(c.ctx)
	err = chromedp.Do(tab, chromedp.EmulateViewport(1280, 640))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Drive(c.ctx, c.base+"/console/", login, func(r e2ekit.Result) bool {
		return r.Status == 200 && strings.HasPrefix(r.FinalURL, c.base+"/console/") &&
			!strings.HasPrefix(r.FinalURL, c.base+"/console/signin") && !strings.HasPrefix(r.FinalURL, c.base+"/console/auth/")
	})
	if err != nil {
		t.Fatalf("sign in as %s: %v", login, err)
	}
	if res.FinalURL != c.base+"/console/" || !strings.Contains(res.BodyText, login) {
		t.Fatalf("signed in as %s at %s: %q", login, e2ekit.RedactURL(res.FinalURL), res.BodyText)
	}
	return s
}

// visit opens path in s, wants status, and inspects the page.
func (c *consoleRun) visit(t *testing.T, s *e2ekit.Session, path string, status int, shot string) string {
	t.Helper()
	res, err := s.Open(c.ctx, c.base+path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	if res.Status != status {
		t.Fatalf("%s: status %d, want %d: %s", path, res.Status, status, res.BodyText)
	}
	return c.inspect(t, s, path, shot)
}

// inspect reads the page s shows: its HTML is kept for the token scan,
// axe-core checks it, and with screenshots on it is saved as shot.png.
func (c *consoleRun) inspect(t *testing.T, s *e2ekit.Session, what, shot string) string {
	t.Helper()
	html, err := s.HTML(c.ctx)
	if err != nil {
		t.Fatalf("read %s: %v", what, err)
	}
	c.record(what, html)
	res, err := s.Axe(c.ctx, c.axe)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	c.mu.Lock()
	c.axeRuns = append(c.axeRuns, axeRun{path: what, AxeResult: res})
	c.mu.Unlock()
	if shot != "" && c.shots != "" {
		tab, cancel := s.Tab(c.ctx)
		png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		cancel()
		if err != nil {
			t.Fatalf("screenshot of %s: %v", what, err)
		}
		if err := os.WriteFile(filepath.Join(c.shots, shot+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return html
}

func (c *consoleRun) record(what, html string) {
	c.mu.Lock()
	c.pages = append(c.pages, visitedPage{what, html})
	c.mu.Unlock()
}

// click clicks selector on s's page like a user and waits for the page
// it leads to; a destructive form asks first, and the dialog, which must
// say dialog, is accepted. It returns the new page's status and HTML.
func (c *consoleRun) click(t *testing.T, s *e2ekit.Session, selector, dialog string) (int, string) {
	t.Helper()
	status, html, err := s.Click(c.ctx, selector, dialog)
	if err != nil {
		t.Fatal(err)
	}
	return status, html
}

// cookie is s's console session cookie, as the browser holds it.
func (c *consoleRun) cookie(t *testing.T, s *e2ekit.Session) *http.Cookie {
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
func (c *consoleRun) csrfOf(t *testing.T, s *e2ekit.Session) string {
	t.Helper()
	v, err := s.FormValue(c.ctx, "csrf")
	if err != nil {
		t.Fatalf("no form token on the page: %v", err)
	}
	return v
}

// get and post send a plain request (no browser) with s's session cookie.
func (c *consoleRun) get(t *testing.T, s *e2ekit.Session, path string) (int, string) {
	t.Helper()
	return c.send(t, s, http.MethodGet, path, nil)
}

func (c *consoleRun) post(t *testing.T, s *e2ekit.Session, path string, form url.Values) (int, string) {
	t.Helper()
	return c.send(t, s, http.MethodPost, path, form)
}

func (c *consoleRun) send(t *testing.T, s *e2ekit.Session, method, path string, form url.Values) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.AddCookie(c.cookie(t, s))
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	c.record(method+" "+path, string(b))
	return resp.StatusCode, string(b)
}

func (c *consoleRun) contains(t *testing.T, what, html string, wants ...string) {
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

func (c *consoleRun) lacks(t *testing.T, what, html string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(html, w) {
			t.Errorf("%s shows %q", what, w)
		}
	}
}
