package console

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/oauth"
)

// signin starts the OpenID Connect sign-in: the provider's authorization
// URL, with the round trip's secrets sealed in a short-lived cookie.
func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	next := consolePath(r.URL.Query().Get("next"))
	authURL, pending, err := c.cfg.SignIn.Begin(r.Context(), next)
	if err != nil {
		c.cfg.Log.ErrorContext(r.Context(), "console sign-in not started", "err", err)
		c.render(w, r, http.StatusBadGateway, "message", nil, view{Title: "Sign-in unavailable", Data: message{
			Heading: "Sign-in is unavailable", Text: signInText(err) + " The request id below is in the server's log.", SignIn: true}})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: pendingCookie, Value: pending, Path: Path + "auth/", HttpOnly: true,
		Secure: c.cfg.Secure, SameSite: http.SameSiteLaxMode, MaxAge: 600})
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// callback finishes the sign-in: the ID token's claims must make an
// operator; the session cookie then holds who they are until the ID
// token expires (at most maxSession).
func (c *Console) callback(w http.ResponseWriter, r *http.Request) {
	clear := &http.Cookie{Name: pendingCookie, Path: Path + "auth/", HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteLaxMode, MaxAge: -1}
	ck, err := r.Cookie(pendingCookie)
	if err != nil {
		http.SetCookie(w, clear)
		c.render(w, r, http.StatusBadRequest, "message", nil, view{Title: "Sign-in expired", Data: message{
			Heading: "This sign-in has expired", Text: "The browser no longer holds the sign-in it started here (it lasts ten minutes, in this browser only). Start again.",
			SignIn: true}})
		return
	}
	done, err := c.cfg.SignIn.Finish(r.Context(), r.URL.Query(), ck.Value)
	http.SetCookie(w, clear)
	if err != nil {
		c.cfg.Log.WarnContext(r.Context(), "console sign-in failed", "reason", signInReason(err), "err", err)
		c.render(w, r, http.StatusBadRequest, "message", nil, view{Title: "Sign-in failed", Data: message{
			Heading: "Sign-in failed", Text: signInText(err), SignIn: true}})
		return
	}
	op, refused := operatorOf(done.Claims, c.cfg.RolesClaim, c.cfg.TenantClaim)
	if refused != "" {
		c.cfg.Log.WarnContext(r.Context(), "console sign-in refused", "operator", op.Subject, "reason", string(refused))
		text := "You signed in as " + op.Name + ", who is not an agentauth operator. The console needs the role agentauth:platform-admin, or agentauth:admin together with a tenant, in the ID token's claims; ask whoever runs your identity provider."
		if refused == refusedNoTenant {
			text = "You signed in as " + op.Name + ", an agentauth:admin whose ID token names no tenant. A tenant admin sees one tenant; ask whoever runs your identity provider to add the tenant claim."
		}
		c.render(w, r, http.StatusForbidden, "message", nil, view{Title: "Not an operator", Data: message{Heading: "Not an operator", Text: text}})
		return
	}
	exp := done.Expiry
	if limit := c.cfg.Now().Add(maxSession); exp.IsZero() || exp.After(limit) {
		exp = limit
	}
	s := session{Subject: op.Subject, Name: op.Name, Tenant: op.Tenant, Platform: op.Platform, CSRF: randomToken(), Expires: exp.Unix()}
	value, err := c.seal.seal(sessionCookie, s)
	if err != nil {
		c.cfg.Log.ErrorContext(r.Context(), "console session not sealed", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: value, Path: cookiePath, HttpOnly: true, Secure: c.cfg.Secure,
		SameSite: http.SameSiteLaxMode, Expires: exp, MaxAge: int(time.Until(exp).Seconds())})
	c.cfg.Log.InfoContext(r.Context(), "console sign-in", "operator", op.Subject, "role", op.role())
	http.Redirect(w, r, consolePath(done.ReturnTo), http.StatusSeeOther)
}

// cookiePath scopes the session cookie to the console: /console, which
// covers /console itself and everything under /console/.
var cookiePath = strings.TrimSuffix(Path, "/")

// signout ends the session in this browser.
func (c *Console) signout(w http.ResponseWriter, r *http.Request, op operator) (string, error) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Path: cookiePath, HttpOnly: true, Secure: c.cfg.Secure, SameSite: http.SameSiteLaxMode, MaxAge: -1})
	c.cfg.Log.InfoContext(r.Context(), "console sign-out", "operator", op.Subject)
	c.render(w, r, http.StatusOK, "message", nil, view{Title: "Signed out", Data: message{
		Heading: "You are signed out", Text: "The console's session in this browser has ended. Your identity provider may still have you signed in.", SignIn: true}})
	return "", nil
}

func signInReason(err error) string {
	var e *oauth.SignInError
	if errors.As(err, &e) {
		return e.Reason
	}
	return "internal"
}

// signInText is what the page says of a failed sign-in: the relying
// party's safe detail, never anything it did not mean to show.
func signInText(err error) string {
	var e *oauth.SignInError
	if errors.As(err, &e) && e.Detail != "" {
		return e.Detail
	}
	return "The sign-in could not be completed."
}

// consolePath is where a sign-in may send the browser back: a path of
// this site (oauth.SafeReturnTo's rule) under the console, else the
// overview.
func consolePath(p string) string {
	if p = oauth.SafeReturnTo(p); !strings.HasPrefix(p, Path) {
		return Path
	}
	return p
}
