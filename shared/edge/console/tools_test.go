package console

import (
	"context"
	"encoding/json"
	"html"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/bundlerepo"
	"github.com/agentauth/agentauth/shared/tools/discovery"
	"github.com/agentauth/agentauth/shared/tools/skills"
	"github.com/agentauth/agentauth/shared/tools/toolcatalog"
)

// catalogOf is a real catalog over a small index: editors get slack:post
// through p-write (listed explicitly), everyone with a sub slack:read
// through p-read (a selector), and the skills of a real skill index.
type catalogOf struct {
	c  *toolcatalog.Catalog
	sk *skills.Index
}

func (c catalogOf) CatalogTools(context.Context) []CatalogTool {
	return []CatalogTool{{ID: "slack:read", Name: "read", Source: "slack"}, {ID: "slack:post", Name: "post", Source: "slack", Description: "post a message"}}
}

func (c catalogOf) Explain(_ context.Context, claims map[string]any) toolcatalog.Explanation {
	return c.c.Explain(claims)
}

func (c catalogOf) ExplainSkills(_ context.Context, claims map[string]any) SkillsExplanation {
	p := domain.NewPrincipal(claims, domain.ClaimPaths{})
	return SkillsExplanation{AllowListClaim: "skills", Tenant: p.Tenant, Allowed: p.AllowedSkills,
		Skills: c.sk.Explain(skills.Query{TenantID: p.Tenant, AllowedSkillNames: p.AllowedSkills})}
}

func newCatalog(t *testing.T) Catalog {
	t.Helper()
	tool := func(id string) discovery.Tool {
		return discovery.Tool{ID: id, Name: id, InputSchema: json.RawMessage(`{"type":"object"}`), SourceID: "slack", Enabled: true}
	}
	ix, err := discovery.NewIndex(discovery.Config{
		Tools: []discovery.Tool{tool("slack:post"), tool("slack:read")},
		Groups: []discovery.Group{
			{ID: "writers", Active: true, ExplicitToolIDs: []string{"slack:post"}},
			{ID: "readers", Active: true, Selectors: []discovery.Selector{{Source: "slack", Name: "*read"}}},
			{ID: "posters", Active: true, Selectors: []discovery.Selector{{Source: "slack"}, {Name: "*post"}}, ExplicitToolIDs: []string{"slack:post"}},
		},
		Policies: []discovery.Policy{
			{ID: "p-write", Active: true, Matchers: []discovery.Matcher{{Claim: "role", Operator: "equals", Value: "editor"}}, GroupIDs: []string{"writers", "posters"}},
			{ID: "p-read", Active: true, Matchers: []discovery.Matcher{{Claim: "sub", Operator: "exists"}}, GroupIDs: []string{"readers"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sk, err := skills.NewIndex([]skills.Skill{
		{Name: "deploy", Description: "How to deploy a service", Scope: skills.ScopeGlobal},
		{Name: "runbook", Description: "Acme's on-call runbook", Scope: skills.ScopeTenant, TenantID: "acme"},
		{Name: "pricing", Description: "Acme's price list", Scope: skills.ScopeTenant, TenantID: "acme"},
		{Name: "secret-sauce", Description: "Globex's own", Scope: skills.ScopeTenant, TenantID: "globex"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return catalogOf{toolcatalog.New(ix, "r1", toolcatalog.Settings{}), sk}
}

func TestPolicySimulator(t *testing.T) {
	r := newRig(t)
	r.c.cfg.Catalog = newCatalog(t)
	b := r.browser(t)
	b.signIn("admin", "/console/")
	sim := func(claims string) string {
		t.Helper()
		rec := b.do("GET", "/console/tools?claims="+url.QueryEscape(claims), nil)
		if rec.Code != 200 {
			t.Fatalf("%s: %d", claims, rec.Code)
		}
		return rec.Body.String()
	}
	page := sim("")
	if !strings.Contains(page, "post a message") || !strings.Contains(page, "tenant_id") || strings.Contains(page, `id="simulation"`) {
		t.Fatal("the tools page without claims: the catalog and the example claims, no simulation")
	}
	page = sim(`{"sub":"alice","role":"editor"}`)
	for _, want := range []string{`id="visible-count">2<`, "<code>p-write</code>", "<code>p-read</code>", "<code>writers</code></td><td><code>slack:post</code>",
		// Each tool with the policy, group and selector or explicit id
		// that gave it.
		"<tr><td><code>slack:post</code></td><td><ul class=\"via\"><li>policy <code>p-write</code> → group <code>posters</code> (selectors, each matched: <code>{source: slack}</code> and <code>{name: *post}</code>; also listed in <code>explicitToolIds</code>)</li>" +
			"<li>policy <code>p-write</code> → group <code>writers</code> (listed in <code>explicitToolIds</code>)</li></ul>",
		"<tr><td><code>slack:read</code></td><td><ul class=\"via\"><li>policy <code>p-read</code> → group <code>readers</code> (selector: <code>{source: slack, name: *read}</code>)</li></ul>",
		// The global skill, and no tenant's: alice names no tenant.
		`id="skills-count">1<`, "<td><code>deploy</code></td><td>global</td><td><span class=\"badge st-ok\">visible</span> a global skill: every caller sees it</td><td>How to deploy a service</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("editor: no %q", want)
		}
	}
	for _, hidden := range []string{"runbook", "pricing", "secret-sauce"} {
		if strings.Contains(page, hidden) {
			t.Errorf("a caller without a tenant is shown tenant skill %s", hidden)
		}
	}
	page = sim(`{"sub":"bob"}`)
	if !strings.Contains(page, `id="visible-count">1<`) || strings.Contains(page, "<code>p-write</code>") {
		t.Error("a caller without the role sees the write policy")
	}
	// A caller of acme whose allow list names one of acme's skills sees
	// it, is told why the other is hidden, and never sees globex's.
	page = sim(`{"sub":"dan","tenant_id":"acme","skills":["runbook","secret-sauce"]}`)
	for _, want := range []string{`id="skills-count">2<`, "This caller: tenant <code>acme</code>, naming <code>runbook</code>, <code>secret-sauce</code>.",
		"<td><code>runbook</code></td><td>tenant <code>acme</code></td><td><span class=\"badge st-ok\">visible</span> its tenant's, named in the caller's <code>skills</code> claim</td>",
		"<td><code>pricing</code></td><td>tenant <code>acme</code></td><td><span class=\"badge st-off\">hidden</span> its tenant's, not named in the caller's <code>skills</code> claim</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("acme's caller: no %q", want)
		}
	}
	if strings.Contains(page, "Globex") {
		t.Error("acme's caller is shown globex's skill")
	}
	if page = sim(`{"role":"editor"`); !strings.Contains(page, "not a JSON object: unexpected EOF") {
		t.Errorf("cut JSON: %s", page)
	}
	if page = sim(`{"role": editor}`); !strings.Contains(page, "invalid character") || !strings.Contains(page, "(at byte 10)") {
		t.Errorf("bad JSON: %s", page)
	}
	if page = sim(`{} {}`); !strings.Contains(page, "something follows it") {
		t.Error("two objects accepted")
	}
	if page = sim(`{}`); !strings.Contains(page, `id="no-policy"`) {
		t.Error("no claims: no policy should match")
	}
	// A recent turn's caller is offered as a starting point.
	tr := r.turns.state.Turns["turn-1"]
	tr.Auth.Claims = map[string]any{"sub": "carol", "role": "editor"}
	r.turns.state.Turns["turn-1"] = tr
	page = sim("")
	i := strings.Index(page, `<a href="/console/tools?claims=`)
	if i < 0 || !strings.Contains(page, "carol — default/thread-1/planner") {
		t.Fatalf("no recent caller: %s", page)
	}
	link := page[i+len(`<a href="`):]
	link = html.UnescapeString(link[:strings.Index(link, `"`)])
	if got := b.do("GET", link, nil).Body.String(); !strings.Contains(got, `id="visible-count">2<`) {
		t.Fatalf("the recent caller's simulation: %s", got)
	}
	// Tenant admins do not see the platform's policies.
	ta := r.browser(t)
	ta.signIn("acme-admin", "/console/")
	if rec := ta.do("GET", "/console/tools", nil); rec.Code != 404 {
		t.Fatalf("tools as a tenant admin: %d", rec.Code)
	}
}

func TestBundlePages(t *testing.T) {
	r := newRig(t)
	dir := t.TempDir()
	files := map[string]string{"apps.yaml": `apiVersion: agents.example.io/v1alpha1
kind: OAuthApp
metadata: {name: demo}
spec:
  provider: demo
  flow: authorizationCode
  subjectMode: global
  client:
    clientId: {value: demo}
    clientSecret: {value: a-client-secret-never-shown}
  endpoints: {authorizationUrl: "https://idp.example/auth", tokenUrl: "https://idp.example/token"}
  scopes: [read]
  redirect: {callbackPath: /oauth/callback/demo}
`}
	for n, s := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	first, err := bundlerepo.Init(dir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	repo, err := bundlerepo.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := changeset.CommitTree(context.Background(), repo, []changeset.ImportFile{
		{Path: "apps.yaml", Data: []byte(strings.Replace(files["apps.yaml"], "scopes: [read]", "scopes: [read, write]", 1))}}, "widen demo's scopes", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b0, err := bundle.LoadDir(dir, bundle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r.c.cfg.Active = func(context.Context) (*bundle.Bundle, error) { return b0, nil }
	r.c.cfg.History = repo
	b := r.browser(t)
	b.signIn("admin", "/console/")
	page := b.do("GET", "/console/bundle", nil).Body.String()
	for _, want := range []string{"<code>demo</code>", "apps.yaml:1", "widen demo&#39;s scopes", changeset.Ref(second)[:16]} {
		if !strings.Contains(page, want) {
			t.Errorf("bundle page: no %q", want)
		}
	}
	if strings.Contains(page, "a-client-secret-never-shown") {
		t.Fatal("the bundle page shows a client secret")
	}
	rec := b.do("GET", "/console/bundle/revisions/"+changeset.Ref(second), nil)
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, `<span class="d-add">&#43;  scopes: [read, write]</span>`) ||
		!strings.Contains(body, `<span class="d-del">-  scopes: [read]</span>`) || !strings.Contains(body, changeset.Ref(first)[:16]) {
		t.Fatalf("revision page: %d %s", rec.Code, body)
	}
	for _, bad := range []string{"git:nothex", "git:" + strings.Repeat("0", 40)} {
		if rec := b.do("GET", "/console/bundle/revisions/"+bad, nil); rec.Code != 404 {
			t.Errorf("%s: %d", bad, rec.Code)
		}
	}
}
