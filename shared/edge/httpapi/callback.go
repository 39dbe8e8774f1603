package httpapi

import (
	"errors"
	"html/template"
	"net/http"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/oauth"
)

var callbackPage = template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{if .OK}}Connected{{else}}Authorization failed{{end}} · agentauth</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:36em;margin:4em auto;padding:0 1em}code{background:#eee;padding:0 .3em}</style>
</head><body>
{{if .OK}}<h1 id="result" data-status="ok">Connected</h1>
<p>Your {{.Provider}} account is connected. You can close this window; the agent continues on its own.</p>
{{if .NotGranted}}<p id="not-granted">The provider did not grant{{range .NotGranted}} <code>{{.}}</code>{{end}}. The agent is told; what needs these scopes will not work.</p>
{{end}}{{else}}<h1 id="result" data-status="failed" data-reason="{{.Reason}}">Authorization failed</h1>
<p>{{.Text}}</p>
<p>Reason: <code id="reason">{{.Reason}}</code>{{if .ProviderCode}} (provider: <code>{{.ProviderCode}}</code>){{end}}</p>
{{end}}<p><small>Request id <code>{{.RequestID}}</code></small></p>
</body></html>
`))

type pageData struct {
	OK                   bool
	Provider             string
	Reason, ProviderCode string
	Text, RequestID      string
	NotGranted           []string
}

// callback serves an app's redirect.callbackPath. The page never shows a
// token, code or state, and tells the browser not to keep or forward it.
func (s *Server) callback(app *bundle.OAuthApp) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("Cache-Control", "no-store")
		h.Set("Pragma", "no-cache")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Type", "text/html; charset=utf-8")

		data := pageData{RequestID: httpx.RequestID(r.Context()), Provider: app.Provider}
		out, err := s.mgr.HandleCallback(r.Context(), app, r.URL.Query())
		status := http.StatusOK
		if err != nil {
			var ce *oauth.CallbackError
			if !errors.As(err, &ce) {
				ce = &oauth.CallbackError{Reason: oauth.ReasonInternal}
			}
			data.Reason, data.ProviderCode, data.Text = ce.Reason, ce.ProviderCode, oauth.ReasonText(ce.Reason)
			status = http.StatusBadRequest
			if ce.Reason == oauth.ReasonInternal {
				status = http.StatusInternalServerError
			}
			s.log.WarnContext(r.Context(), "callback failed", "oauthApp", app.Name, "reason", ce.Reason, "providerCode", ce.ProviderCode, "authSessionId", ce.SessionID)
		} else {
			data.OK, data.NotGranted = true, out.ScopesNotGranted
			s.log.InfoContext(r.Context(), "callback completed", "oauthApp", app.Name, "authSessionId", out.SessionID, "grantId", out.GrantID)
		}
		w.WriteHeader(status)
		_ = callbackPage.Execute(w, data)
	})
}
