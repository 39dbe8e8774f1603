package httpapi

import (
	"context"
	"html/template"
	"net/http"

	"github.com/agentauth/agentauth/shared/edge/httpx"
)

// About is what GET / says of the running process besides its routes.
type About struct {
	// Running names the process: "agentauth serve", "the gettoken
	// function".
	Running string
	// Version is the build's version ("" shows as unknown).
	Version string
	// Revision, when set, is the bundle revision now (a git bundle's
	// active one, which changesets move); else the bundle's at start.
	Revision func(ctx context.Context) string
}

// Part is one group of routes a handler serves, as GET / lists it.
type Part struct {
	Name   string   `json:"name"`
	Routes []string `json:"routes"`
	// Credential is what the routes take: httpx.Credential's Name, or
	// "none (public)".
	Credential string `json:"credential"`
	// Doc is the repository path (and anchor) that describes them:
	// "docs/tools.md#routes".
	Doc string `json:"doc"`
}

// DocsBase is where the repository's documents are read: GET / links
// each Part's Doc, the README and docs/*.md under it.
const DocsBase = "https://github.com/agentauth/agentauth/blob/main/"

// docs are the documents GET / links, README first.
var docs = []doc{
	{"README.md", "what agentauth is, make run, the walkthroughs, the HTTP API"},
	{"docs/tools.md", "the tool plane: tools, skills, access policies, MCP"},
	{"docs/turns.md", "agent turns: models, agents, swarms, consent and resume"},
	{"docs/configuration.md", "every AGENTAUTH_* variable"},
	{"docs/deploy.md", "the AWS deployment"},
	{"docs/architecture.md", "the map of the code"},
}

type doc struct{ Path, What string }

// ConsolePart names the operator console's Part: GET / says whether it
// is served.
const ConsolePart = "operator console"

// consoleNote is what GET / says of the operator console.
func consoleNote(parts []Part) (string, bool) {
	for _, p := range parts {
		if p.Name == ConsolePart {
			return "on: /console/ (operators sign in with the configured OpenID provider; docs/console.md)", true
		}
	}
	return "off: set AGENTAUTH_CONSOLE_ISSUER and AGENTAUTH_CONSOLE_CLIENT_ID to serve it at /console/ (docs/console.md)", false
}

// indexJSON is GET /'s answer to an API client.
type indexJSON struct {
	Name           string    `json:"name"`
	Running        string    `json:"running,omitempty"`
	Version        string    `json:"version"`
	BundleRevision string    `json:"bundleRevision"`
	Routes         []Part    `json:"routes"`
	Docs           []docJSON `json:"docs"`
	Console        string    `json:"console"`
}

type docJSON struct {
	Path string `json:"path"`
	URL  string `json:"url"`
}

// index serves GET /: a small HTML page for a browser, the same facts as
// JSON for everyone else. It shows nothing a caller sent and no secret:
// the version, the bundle revision (as /healthz does) and the routes.
func (s *Server) index(parts []Part) http.Handler {
	version := s.about.Version
	if version == "" {
		version = "unknown"
	}
	_, consoleOn := consoleNote(parts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Vary", "Accept")
		if !httpx.PrefersHTML(r) {
			out := indexJSON{Name: "agentauth", Running: s.about.Running, Version: version, BundleRevision: s.revision(r.Context()),
				Routes: parts}
			out.Console, _ = consoleNote(parts)
			for _, d := range docs {
				out.Docs = append(out.Docs, docJSON{d.Path, DocsBase + d.Path})
			}
			httpx.WriteJSON(w, http.StatusOK, out)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("Cache-Control", "no-store")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		w.WriteHeader(http.StatusOK)
		_ = indexPage.Execute(w, indexData{Running: s.about.Running, Version: version, BundleRevision: s.revision(r.Context()),
			Parts: parts, Docs: docs, DocsBase: DocsBase, RequestID: httpx.RequestID(r.Context()), ConsoleOn: consoleOn})
	})
}

// revision is the bundle revision GET / and /healthz report.
func (s *Server) revision(ctx context.Context) string {
	if s.about.Revision != nil {
		return s.about.Revision(ctx)
	}
	return s.bundle.Revision
}

type indexData struct {
	Running, Version, BundleRevision string
	Parts                            []Part
	Docs                             []doc
	DocsBase, RequestID              string
	ConsoleOn                        bool
}

var indexPage = template.Must(template.New("index").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>agentauth</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:64em;margin:2.5em auto;padding:0 1em;color:#1b1b1b}
h1{margin:0 0 .2em}h2{font-size:1.1em;margin:1.6em 0 .4em}
.lead{margin-top:0;color:#444}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;margin:0}dt{color:#555}dd{margin:0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;vertical-align:top;padding:.4em .6em;border-bottom:1px solid #ddd}
th{font-weight:600;background:#f4f4f4}
code{font:14px ui-monospace,monospace;background:#f0f0f0;padding:0 .25em;border-radius:3px}
td.routes code{display:block;width:fit-content;white-space:nowrap;margin:0 0 .2em}td.what{white-space:nowrap}
ul{padding-left:1.2em}small{color:#666}
</style>
</head><body>
<h1>agentauth</h1>
<p class="lead">The auth and tool plane for AI agents: OAuth tokens for third-party APIs, consent links that resume the waiting agent, and the tools an agent may see and call.</p>
<dl id="about">
{{if .Running}}<dt>Running</dt><dd id="running">{{.Running}}</dd>
{{end}}<dt>Version</dt><dd id="version"><code>{{.Version}}</code></dd>
<dt>Bundle revision</dt><dd id="bundle-revision"><code>{{.BundleRevision}}</code></dd>
</dl>
<h2>Routes on this server</h2>
<table id="routes"><thead><tr><th>What</th><th>Routes</th><th>Credential</th><th>Docs</th></tr></thead><tbody>
{{range .Parts}}<tr><td class="what">{{.Name}}</td><td class="routes">{{range .Routes}}<code>{{.}}</code>{{end}}</td><td>{{.Credential}}</td><td><a href="{{$.DocsBase}}{{.Doc}}">{{.Doc}}</a></td></tr>
{{end}}</tbody></table>
<h2>Docs</h2>
<ul id="docs">
{{range .Docs}}<li><a href="{{$.DocsBase}}{{.Path}}">{{.Path}}</a> — {{.What}}</li>
{{end}}</ul>
<h2>Console</h2>
{{if .ConsoleOn}}<p id="console" data-status="on"><a href="/console/">Open the operator console</a>: grants, consents, agent instances and their turns' timelines, the tools and the bundle. Operators sign in with the configured OpenID provider.</p>
{{else}}<p id="console" data-status="off">Off. Set <code>AGENTAUTH_CONSOLE_ISSUER</code> and <code>AGENTAUTH_CONSOLE_CLIENT_ID</code> to serve the operator console at <code>/console/</code> (<a href="{{.DocsBase}}docs/console.md">docs/console.md</a>).</p>{{end}}
<p><small>API clients get this as JSON (<code>Accept: application/json</code>). Request id <code>{{.RequestID}}</code>.</small></p>
</body></html>
`))
