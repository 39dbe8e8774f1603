package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/edge/httpx"
)

// browserAccept is Chromium's Accept header for a page.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8,application/signed-exchange;v=b3;q=0.7"

func getRoot(h http.Handler, accept string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", "/", nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Issue 18: GET / in a browser is a small HTML page — what runs, its
// version and bundle revision, the routes that are on with their docs, the
// docs, and whether the console is on — escaped, with no external
// asset; an API client gets the same as JSON.
func TestIndexPage(t *testing.T) {
	f := newFixture(t)
	srv := f.server
	srv.SetAbout(About{Running: "agentauth serve <b>&", Version: "v1.2.3<script>"})
	srv.Mount(func(mux *http.ServeMux) {
		mux.HandleFunc("GET /v1/agents/tools", func(w http.ResponseWriter, r *http.Request) {})
	}, Part{Name: "tool routes", Routes: []string{"GET /v1/agents/tools"}, Credential: httpx.AgentJWT.Name(), Doc: "docs/tools.md#routes"})
	h := srv.Handler()

	rec := getRoot(h, browserAccept)
	page := rec.Body.String()
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "text/html; charset=utf-8" || rec.Header().Get("Vary") != "Accept" {
		t.Fatalf("%d %v", rec.Code, rec.Header())
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'") {
		t.Fatalf("CSP %q", csp)
	}
	for _, want := range []string{
		"<title>agentauth</title>",
		`<dd id="running">agentauth serve &lt;b&gt;&amp;</dd>`,
		`<code>v1.2.3&lt;script&gt;</code>`,
		"<code>" + srv.bundle.Revision + "</code>",
		"<code>POST /v1/oauth/token</code>", "<code>GET /oauth/callback/team</code>", "<code>GET /v1/agents/tools</code>", "<code>GET /healthz</code>",
		`<a href="` + DocsBase + `docs/tools.md#routes">docs/tools.md#routes</a>`,
		`<a href="` + DocsBase + `README.md">README.md</a>`,
		`<a href="` + DocsBase + `docs/turns.md">docs/turns.md</a>`,
		`<p id="console" data-status="off">Off. Set <code>AGENTAUTH_CONSOLE_ISSUER</code>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	for _, asset := range []string{"<script", "<link", "<img", "src=", "url(", "@import"} {
		if strings.Contains(page, asset) {
			t.Errorf("the page loads something (%s)", asset)
		}
	}

	for _, accept := range []string{"", "application/json", "*/*", "text/html;q=0.5,application/json", "text/*;q=0.9,*/*"} {
		rec := getRoot(h, accept)
		var out indexJSON
		if err := httpx.Unmarshal(rec.Body.Bytes(), &out); err != nil || rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("Accept %q: %d %s (%v)", accept, rec.Code, rec.Body, err)
		}
		var names []string
		for _, p := range out.Routes {
			names = append(names, p.Name)
		}
		if out.Name != "agentauth" || out.Version != "v1.2.3<script>" || out.BundleRevision != srv.bundle.Revision || out.Console == "" ||
			strings.Join(names, ",") != "OAuth runtime,OAuth callbacks,tool routes,health" ||
			len(out.Docs) == 0 || out.Docs[0].URL != DocsBase+"README.md" {
			t.Fatalf("Accept %q: %+v", accept, out)
		}
	}

	// Each function's page lists its own routes only.
	if page := getRoot(srv.CallbackHandler(), browserAccept).Body.String(); strings.Contains(page, "/v1/oauth/token") || !strings.Contains(page, "/oauth/callback/team") {
		t.Fatalf("the callback function's page:\n%s", page)
	}
	if page := getRoot(srv.RuntimeHandler(), browserAccept).Body.String(); strings.Contains(page, "/oauth/callback/team") || !strings.Contains(page, "/v1/oauth/token") {
		t.Fatalf("the runtime function's page:\n%s", page)
	}
	// Only / itself: anything under it is still a 404, another method a 405.
	if rec := f.do("GET", "/nothing", "", nil); rec.Code != 404 {
		t.Fatalf("GET /nothing: %d", rec.Code)
	}
	if rec := f.do("POST", "/", "", nil); rec.Code != 405 || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST /: %d %v", rec.Code, rec.Header())
	}
}

// With the console mounted, GET / links it (and the JSON says it is on).
func TestIndexLinksTheConsoleWhenOn(t *testing.T) {
	f := newFixture(t)
	f.server.MountRuntime(func(mux *http.ServeMux) {
		mux.HandleFunc("GET /console/", func(w http.ResponseWriter, r *http.Request) {})
	}, Part{Name: ConsolePart, Routes: []string{"/console/"}, Credential: "an operator's OpenID Connect sign-in", Doc: "docs/console.md"})
	h := f.server.Handler()
	if page := getRoot(h, browserAccept).Body.String(); !strings.Contains(page, `<p id="console" data-status="on"><a href="/console/">Open the operator console</a>`) {
		t.Fatalf("page: %s", page)
	}
	if body := getRoot(h, "application/json").Body.String(); !strings.Contains(body, `"console":"on: /console/`) {
		t.Fatalf("json: %s", body)
	}
}
