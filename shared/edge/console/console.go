package console

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/turn"
)

// Path is where the console is served.
const Path = "/console/"

// SignIn is the OpenID Connect relying party operators sign in through
// (oauth.SignIn).
type SignIn interface {
	Begin(ctx context.Context, returnTo string) (authURL, pending string, err error)
	Finish(ctx context.Context, query url.Values, pending string) (oauth.SignedIn, error)
}

// Grants are the grants as the store keeps them (domain.GrantStore).
type Grants interface {
	GetGrant(ctx context.Context, id string) (domain.Grant, error)
	ListGrants(ctx context.Context) ([]domain.Grant, []error, error)
}

// Sessions are the auth sessions (consents) as the store keeps them.
type Sessions interface {
	GetSession(ctx context.Context, id string) (domain.Session, error)
	ListSessions(ctx context.Context) ([]domain.Session, []error, error)
}

// Revoker revokes a grant here and at its provider (oauth.Manager).
type Revoker interface {
	RevokeGrant(ctx context.Context, ref domain.ObjectRef, subject string) (oauth.RevokeResult, error)
}

// Turns is the turn plane's read and lifecycle surface (app.Turns, as the
// turn routes use it).
type Turns interface {
	List(ctx context.Context) ([]turn.Instance, []turn.Unreadable, error)
	Inspect(ctx context.Context, key turn.InstanceKey) (turn.State, error)
	TurnEvents(ctx context.Context, key turn.InstanceKey, turnID string, after int64) (turn.Turn, []turn.TurnEvent, error)
	Pause(ctx context.Context, key turn.InstanceKey) error
	Resume(ctx context.Context, key turn.InstanceKey) error
	Terminate(ctx context.Context, key turn.InstanceKey, reason string) error
	Delete(ctx context.Context, key turn.InstanceKey) error
}

// Config wires the console.
type Config struct {
	SignIn SignIn
	// Keys seal the session cookie (the session keys; ≥ 32 bytes each,
	// the first seals, all open).
	Keys [][]byte
	// Secure marks cookies Secure: true unless the public URL is plain
	// HTTP on a loopback host (make run).
	Secure bool
	// RolesClaim and TenantClaim are the dot paths of an operator's roles
	// and tenant in the ID token (DefaultRolesClaim, tenant_id).
	RolesClaim, TenantClaim string
	// Grants and Sessions read one record; Queries page through them by
	// index (the stores' OperatorQueries).
	Grants   Grants
	Sessions Sessions
	Queries  domain.OperatorQueries
	Revoker  Revoker
	// Instances pages through the agent instances by index (the turn
	// store's InstanceQuerier); nil without turns.
	Instances turn.InstanceQuerier
	// TurnStats counts ended turns by hour (nil: no chart).
	TurnStats turn.TurnStats
	// ToolAudit is the stored audit stream of tool calls (nil: off).
	ToolAudit domain.ToolAuditLog
	// Turns is nil when the deployment runs no turns.
	Turns Turns
	// Revision is the active bundle revision.
	Revision func(ctx context.Context) string
	// Catalog is the tool plane (nil: the tools page is off).
	Catalog Catalog
	// DeadLetters are the agent events that failed every attempt (nil:
	// the page is off).
	DeadLetters domain.DeadLetters
	// Active is the active bundle; History its git history (nil for a
	// bundle that is a plain directory).
	Active  func(ctx context.Context) (*bundle.Bundle, error)
	History changeset.Repo
	Log     *slog.Logger
	Now     func() time.Time
	// StreamPoll is how often the live timeline reads the store (200 ms).
	StreamPoll time.Duration
	// Stream bounds the live timeline's streams.
	Stream httpx.StreamLimits
}

// Console serves /console/.
type Console struct {
	cfg   Config
	seal  *sealer
	pages map[string]*template.Template
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New checks cfg and parses the pages.
func New(cfg Config) (*Console, error) {
	if cfg.SignIn == nil || cfg.Grants == nil || cfg.Sessions == nil || cfg.Queries == nil || cfg.Revoker == nil {
		return nil, errors.New("console: sign-in, grants, sessions, their queries and the revoker are required")
	}
	s, err := newSealer(cfg.Keys)
	if err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StreamPoll <= 0 {
		cfg.StreamPoll = 200 * time.Millisecond
	}
	c := &Console{cfg: cfg, seal: s, pages: map[string]*template.Template{}}
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", n)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", n, err)
		}
		c.pages[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return c, nil
}

// Register adds the console's routes to mux.
func (c *Console) Register(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix(Path+"static/", http.FileServerFS(static))
	mux.Handle("GET "+Path+"static/", c.headers(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=300")
		files.ServeHTTP(w, r)
	}))
	// /console answers as /console/ does (no redirect): some gateways hand
	// /console/ to the function as /console, and a redirect there loops.
	mux.Handle("GET "+strings.TrimSuffix(Path, "/"), c.headers(c.page(c.overview)))
	mux.Handle("GET "+Path+"signin", c.headers(c.signin))
	mux.Handle("GET "+Path+"auth/callback", c.headers(c.callback))
	mux.Handle("POST "+Path+"signout", c.headers(c.action(c.signout)))

	mux.Handle("GET "+Path+"{$}", c.headers(c.page(c.overview)))
	mux.Handle("GET "+Path+"grants", c.headers(c.page(c.grants)))
	mux.Handle("GET "+Path+"grants/{id}", c.headers(c.page(c.grant)))
	mux.Handle("POST "+Path+"grants/{id}/revoke", c.headers(c.action(c.revoke)))
	mux.Handle("GET "+Path+"consents", c.headers(c.page(c.consents)))
	mux.Handle("GET "+Path+"consents/{id}", c.headers(c.page(c.consent)))
	if c.cfg.Turns != nil {
		inst := Path + "instances/{swarm}/{key}/{agent}"
		mux.Handle("GET "+Path+"instances", c.headers(c.page(c.instances)))
		mux.Handle("GET "+inst, c.headers(c.page(c.instance)))
		mux.Handle("GET "+inst+"/turns/{turn}", c.headers(c.page(c.timeline)))
		mux.Handle("GET "+inst+"/turns/{turn}/events", c.headers(c.timelineEvents))
		mux.Handle("POST "+inst+"/{action}", c.headers(c.action(c.lifecycle)))
	}
	// Without a catalog, a bundle or dead letters these answer the
	// not-found page.
	mux.Handle("GET "+Path+"dead-letters", c.headers(c.page(c.deadLetters)))
	mux.Handle("GET "+Path+"dead-letters/{id}", c.headers(c.page(c.deadLetter)))
	mux.Handle("POST "+Path+"dead-letters/{id}/redrive", c.headers(c.action(c.redrive)))
	mux.Handle("GET "+Path+"tools", c.headers(c.page(c.tools)))
	mux.Handle("GET "+Path+"calls", c.headers(c.page(c.calls)))
	mux.Handle("GET "+Path+"bundle", c.headers(c.page(c.bundlePage)))
	mux.Handle("GET "+Path+"bundle/revisions/{ref}", c.headers(c.page(c.revision)))
	mux.Handle(Path, c.headers(c.page(func(w http.ResponseWriter, r *http.Request, op operator) (string, any, error) {
		return "", nil, errNotFound
	})))
}

// Patterns are the console's routes, for GET /.
func (c *Console) Patterns() []string {
	out := []string{Path, Path + "grants", Path + "consents"}
	if c.cfg.Turns != nil {
		out = append(out, Path+"instances")
	}
	if c.cfg.Catalog != nil {
		out = append(out, Path+"tools")
	}
	if c.cfg.Active != nil {
		out = append(out, Path+"bundle")
	}
	if c.cfg.DeadLetters != nil {
		out = append(out, Path+"dead-letters")
	}
	if c.cfg.ToolAudit != nil {
		out = append(out, Path+"calls")
	}
	return out
}

// csp allows the console's own script and stylesheet and nothing else:
// no inline script or style, no other origin, no framing.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// headers sets what every console answer carries.
func (c *Console) headers(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		next(w, r)
	})
}

var errNotFound = errors.New("not found")

// forbidden is a page the operator may not see: answered as not found,
// so a tenant admin learns nothing of another tenant's records by URL.
var forbidden = errNotFound

// pageFunc renders one page for op: the template name and its data.
type pageFunc func(w http.ResponseWriter, r *http.Request, op operator) (string, any, error)

// page runs f for a signed-in operator and renders what it returns; a
// request without a session goes to the sign-in.
func (c *Console) page(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := c.session(r)
		if !ok {
			http.Redirect(w, r, Path+"signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		op := operator{Subject: sess.Subject, Name: sess.Name, Tenant: sess.Tenant, Platform: sess.Platform}
		name, data, err := f(w, r, op)
		switch {
		case errors.Is(err, errNotFound) || errors.Is(err, domain.ErrNotFound):
			c.render(w, r, http.StatusNotFound, "message", sess, view{Title: "Not found", Data: message{
				Heading: "Nothing here", Text: "There is no such page, or it belongs to a tenant you do not administer.",
				Next: "Back to the overview", NextURL: Path}})
		case err != nil:
			c.cfg.Log.ErrorContext(r.Context(), "console page failed", "path", r.URL.Path, "err", err)
			c.render(w, r, http.StatusInternalServerError, "message", sess, view{Title: "Error", Data: message{
				Heading: "Something went wrong", Text: "The page could not be read. The request id below is in the server's log.",
				Next: "Back to the overview", NextURL: Path}})
		case name != "":
			v, _ := data.(view)
			c.render(w, r, http.StatusOK, name, sess, v)
		}
	}
}

// view is what a page template gets besides the session.
type view struct {
	Title string
	// Nav is the section the page belongs to (highlighted in the header).
	Nav  string
	Data any
	// Live, when set, is the URL of the page's event stream.
	Live string
}

// layoutData is what layout.html reads.
type layoutData struct {
	view
	Operator  string
	Role      string
	Platform  bool
	CSRF      string
	Path      string
	RequestID string
	Turns     bool
	Tools     bool
	Bundle    bool
	Dead      bool
	Calls     bool
	Revision  string
	Flash     string
}

// message is the data of the message page.
type message struct {
	Heading, Text, Next, NextURL string
	// SignIn shows a sign-in button instead of a link.
	SignIn bool
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, sess *session, v view) {
	t := c.pages[name]
	d := layoutData{view: v, Path: Path, RequestID: httpx.RequestID(r.Context()), Turns: c.cfg.Turns != nil,
		Tools: c.cfg.Catalog != nil, Bundle: c.cfg.Active != nil, Dead: c.cfg.DeadLetters != nil,
		Calls: c.cfg.ToolAudit != nil,
		Flash: r.URL.Query().Get("done")}
	if sess != nil {
		op := operator{Subject: sess.Subject, Tenant: sess.Tenant, Platform: sess.Platform}
		d.Operator, d.Role, d.Platform, d.CSRF = sess.Name, op.role(), sess.Platform, sess.CSRF
		if c.cfg.Revision != nil {
			d.Revision = c.cfg.Revision(r.Context())
		}
	}
	// Rendered whole before anything is sent, so a template that fails
	// answers 500 rather than half a page.
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", d); err != nil {
		c.cfg.Log.ErrorContext(r.Context(), "console template failed", "page", name, "err", err)
		http.Error(w, "the console could not render this page; request id "+d.RequestID, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// session is the request's signed-in operator, if its cookie opens and
// has not expired.
func (c *Console) session(r *http.Request) (*session, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, false
	}
	var s session
	if c.seal.open(sessionCookie, ck.Value, &s) != nil || s.Subject == "" || c.cfg.Now().Unix() >= s.Expires {
		return nil, false
	}
	return &s, true
}

// actionFunc changes something for op and says where the browser goes.
type actionFunc func(w http.ResponseWriter, r *http.Request, op operator) (redirect string, err error)

// maxForm bounds a console form.
const maxForm = 16 << 10

// action runs f for a signed-in operator whose request carries the
// session's CSRF token and does not come from another site; the browser
// is sent on with a 303. Every action is logged with the operator.
func (c *Console) action(f actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sess, ok := c.session(r)
		if !ok {
			c.render(w, r, http.StatusUnauthorized, "message", nil, view{Title: "Signed out", Data: message{
				Heading: "You are signed out", Text: "Your session ended before this action was sent; nothing was changed. Sign in and try again.",
				SignIn: true}})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if r.ParseForm() != nil || !sameToken(r.PostForm.Get("csrf"), sess.CSRF) || r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			c.cfg.Log.WarnContext(r.Context(), "console action refused: no valid CSRF token", "operator", sess.Subject, "path", r.URL.Path)
			c.render(w, r, http.StatusForbidden, "message", sess, view{Title: "Refused", Data: message{
				Heading: "This request was refused", Text: "It did not carry this session's form token, so it may not have come from the console. Nothing was changed; reload the page and try again.",
				Next: "Back to the overview", NextURL: Path}})
			return
		}
		op := operator{Subject: sess.Subject, Name: sess.Name, Tenant: sess.Tenant, Platform: sess.Platform}
		to, err := f(w, r, op)
		switch {
		case errors.Is(err, errNotFound) || errors.Is(err, domain.ErrNotFound):
			c.cfg.Log.WarnContext(r.Context(), "console action on nothing the operator may see", "operator", op.Subject, "path", r.URL.Path)
			c.render(w, r, http.StatusNotFound, "message", sess, view{Title: "Not found", Data: message{
				Heading: "Nothing here", Text: "There is no such record, or it belongs to a tenant you do not administer. Nothing was changed.",
				Next: "Back to the overview", NextURL: Path}})
		case err != nil:
			c.cfg.Log.ErrorContext(r.Context(), "console action failed", "operator", op.Subject, "path", r.URL.Path, "err", err)
			c.render(w, r, http.StatusInternalServerError, "message", sess, view{Title: "Error", Data: message{
				Heading: "The action failed", Text: actionFailure(err),
				Next: "Back to the overview", NextURL: Path}})
		case to != "":
			http.Redirect(w, r, to, http.StatusSeeOther)
		}
	}
}

// actionFailure is what the page says of a failed action: a typed refusal
// says itself, anything else only that it failed (the log has the rest).
func actionFailure(err error) string {
	var safe *safeError
	if errors.As(err, &safe) {
		return safe.msg
	}
	return "The server could not complete it; the request id below is in its log."
}

// safeError is an action's refusal whose text the operator may read.
type safeError struct{ msg string }

func (e *safeError) Error() string { return e.msg }
