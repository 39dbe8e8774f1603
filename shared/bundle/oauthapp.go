package bundle

import (
	"net"
	"net/url"
	"path"
	"slices"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/agentauth/agentauth/shared/domain"
)

// builtinSubjectProvider reports whether agentauth has a built-in subject
// builder for provider in mode, so that subjectVerification.template may be
// empty (spec §4.3 formats; GitHub's /user names no organisation, so a
// global GitHub subject needs a template).
func builtinSubjectProvider(provider, mode string) bool {
	switch provider {
	case "slack", "google":
		return true
	case "github":
		return mode != domain.SubjectModeGlobal
	}
	return false
}

const builtinSubjectProviders = "slack and google (user and global mode), github (user mode)"

// reservedAuthParam reports whether an options key would override a
// parameter agentauth itself sets on the authorization request.
func reservedAuthParam(key string) bool {
	switch strings.ToLower(key) {
	case "response_type", "client_id", "redirect_uri", "scope", "state",
		"code_challenge", "code_challenge_method", "nonce":
		return true
	}
	return false
}

const reservedAuthParams = "response_type, client_id, redirect_uri, scope, state, code_challenge, code_challenge_method, nonce"

func decodeOAuthApp(r *res, d *document) {
	spec := r.spec(d,
		"provider", "flow", "subjectMode", "client", "endpoints", "scopes",
		"redirect", "options", "subjectVerification")
	if spec == nil {
		return
	}
	app := &OAuthApp{Name: d.Name, Labels: d.Labels, File: r.file, Line: r.line}

	if s := spec.requireStr("provider", ""); s.OK {
		app.Provider = s.Value
	}
	flow := spec.oneOf("flow", true, FlowAuthorizationCode, FlowDeviceCode)
	if flow.OK {
		app.Flow = flow.Value
	}
	mode := spec.oneOf("subjectMode", true, domain.SubjectModeGlobal, domain.SubjectModeUser)
	if mode.OK {
		app.SubjectMode = mode.Value
	}

	client := spec.child("client", "clientId", "clientSecret", "authStyle")
	if v, ok := r.valueSource(client, "clientId", false); ok {
		app.ClientID = v
	}
	if v, ok := r.valueSource(client, "clientSecret", true); ok {
		app.ClientSecret = domain.NewSecret(v)
	}
	if s := client.oneOf("authStyle", false, "header", "params"); s.OK {
		app.AuthStyle = s.Value
	}

	ep := spec.child("endpoints", "authorizationUrl", "tokenUrl", "revokeUrl", "userInfoUrl", "deviceAuthorizationUrl")
	authURL := r.urlField(ep, "authorizationUrl", true)
	tokenURL := r.urlField(ep, "tokenUrl", true)
	revokeURL := r.urlField(ep, "revokeUrl", true)
	userInfoURL := r.urlField(ep, "userInfoUrl", true)
	deviceURL := r.urlField(ep, "deviceAuthorizationUrl", true)
	app.Endpoints = Endpoints{
		AuthorizationURL:       authURL.Value,
		TokenURL:               tokenURL.Value,
		RevokeURL:              revokeURL.Value,
		UserInfoURL:            userInfoURL.Value,
		DeviceAuthorizationURL: deviceURL.Value,
	}

	rd := spec.child("redirect", "callbackPath", "baseUrl")
	cb := rd.str("callbackPath")
	if cb.OK {
		if msg := checkCallbackPath(cb.Value); msg != "" {
			r.errorf(cb.Line, rd.field("callbackPath"), "%s", msg)
		} else {
			app.Redirect.CallbackPath = cb.Value
			r.l.callbacks = append(r.l.callbacks, callbackUse{app: app, line: cb.Line, r: r})
		}
	}
	app.Redirect.BaseURL = r.urlField(rd, "baseUrl", false).Value

	required := func(m *mapping, key string, s scalar) {
		if !s.Present && !m.bad {
			r.errorf(s.Line, m.field(key), "required when flow is %s", flow.Value)
		}
	}
	switch app.Flow {
	case FlowAuthorizationCode:
		required(ep, "authorizationUrl", authURL)
		required(ep, "tokenUrl", tokenURL)
		required(rd, "callbackPath", cb)
	case FlowDeviceCode:
		required(ep, "deviceAuthorizationUrl", deviceURL)
		required(ep, "tokenUrl", tokenURL)
	}

	app.Scopes = scopes(r, spec)
	app.Options = options(r, spec)
	if slices.Contains(app.Scopes, "offline_access") && !promptsConsent(app.Options) {
		_, line, _ := spec.list("scopes")
		r.warnf(line, spec.field("scopes"), "offline_access is ignored by OpenID providers unless the request has prompt=consent (OIDC Core §11): set options.prompt: consent, or expect grants without a refresh token")
	}
	app.SubjectVerification = subjectVerification(r, spec, ep, userInfoURL, app, mode.OK)

	keepFirst(r.l.b.OAuthApps, app.Name, app)
}

func scopes(r *res, spec *mapping) []string {
	items, line, ok := spec.list("scopes")
	if !ok {
		return nil
	}
	if len(items) == 0 {
		r.warnf(line, spec.field("scopes"), "no scopes: the provider's defaults apply; list at least one scope (spec 2.4 rule 3)")
		return nil
	}
	var out []string
	first := map[string]int{}
	for i, it := range items {
		p := indexPath(spec.field("scopes"), i)
		n := deref(it)
		if n == nil || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			r.errorf(it.Line, p, "must be a string")
			continue
		}
		switch {
		case n.Value == "":
			r.errorf(n.Line, p, "must not be empty")
		case strings.IndexFunc(n.Value, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) >= 0:
			r.errorf(n.Line, p, "%q must not contain spaces: list each scope separately", n.Value)
		default:
			if j, dup := first[n.Value]; dup {
				r.errorf(n.Line, p, "duplicate scope %q (also %s)", n.Value, indexPath(spec.field("scopes"), j))
				continue
			}
			first[n.Value] = i
			out = append(out, n.Value)
		}
	}
	return out
}

// promptsConsent reports whether the app's options ask for prompt=consent
// (prompt is a space-separated list in OIDC Core §3.1.2.1).
func promptsConsent(opts map[string]any) bool {
	p, _ := opts["prompt"].(string)
	return slices.Contains(strings.Fields(p), "consent")
}

func options(r *res, spec *mapping) map[string]any {
	n, _ := spec.get("options")
	if n == nil {
		return nil
	}
	p := spec.field("options")
	if n.Kind != yaml.MappingNode {
		r.errorf(n.Line, p, "must be a mapping (a JSON object), got %s", describe(n))
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := deref(n.Content[i]); k != nil && k.Kind == yaml.ScalarNode && reservedAuthParam(k.Value) {
			r.errorf(k.Line, fieldPath(p, k.Value), "%q is set by agentauth and cannot be overridden; reserved: %s", k.Value, reservedAuthParams)
		}
	}
	budget := maxOptionValues
	v, ok := jsonValue(r, p, n, &budget)
	if !ok {
		return nil
	}
	return v.(map[string]any)
}

func subjectVerification(r *res, spec, ep *mapping, userInfo scalar, app *OAuthApp, modeOK bool) *SubjectVerification {
	sv := spec.child("subjectVerification", "source", "template", "issuer", "jwksUrl", "insecureSkipVerification")
	user := app.SubjectMode == domain.SubjectModeUser
	if sv.bad || !modeOK || (!user && !sv.present) {
		return nil
	}
	out := &SubjectVerification{}
	src := sv.oneOf("source", false, VerifyUserInfo, VerifyIDToken)
	tmpl := sv.str("template")
	if tmpl.OK && tmpl.Value != "" {
		if t, err := ParseTemplate(tmpl.Value); err != nil {
			r.errorf(tmpl.Line, sv.field("template"), "%v", err)
		} else if len(t.Placeholders()) == 0 {
			r.errorf(tmpl.Line, sv.field("template"), "needs at least one {claim} placeholder: a constant subject would match every resource owner")
		} else {
			out.Template = tmpl.Value
		}
	}
	issuer := r.urlField(sv, "issuer", true)
	jwks := r.urlField(sv, "jwksUrl", true)
	out.Issuer, out.JWKSURL = issuer.Value, jwks.Value
	skip, skipLine := sv.boolean("insecureSkipVerification")
	out.InsecureSkip = skip

	hasUserInfo := userInfo.Present
	hasIssuer := issuer.Present
	if src.OK {
		out.Source = src.Value
	} else if !src.Present {
		switch {
		case hasUserInfo:
			out.Source = VerifyUserInfo
		case hasIssuer:
			out.Source = VerifyIDToken
		}
	}

	if skip {
		r.warnf(skipLine, sv.field("insecureSkipVerification"),
			"insecureSkipVerification is true: the callback will not check who the resource owner is, so a token may be bound to the wrong subject")
		return out
	}
	if src.Present && !src.OK {
		return out // reported
	}
	switch out.Source {
	case "":
		who := "subjectMode user needs"
		if !user {
			who = "subjectVerification needs"
		}
		r.errorf(sv.line, sv.path, "%s a way to verify the resource owner: set endpoints.userInfoUrl or subjectVerification.issuer, or opt out with subjectVerification.insecureSkipVerification: true", who)
		return out
	case VerifyUserInfo:
		if !hasUserInfo && !ep.bad {
			r.errorf(userInfo.Line, ep.field("userInfoUrl"), "required when subjectVerification.source is userinfo")
		}
	case VerifyIDToken:
		if !hasIssuer {
			r.errorf(issuer.Line, sv.field("issuer"), "required when subjectVerification.source is idToken")
		}
		if !slices.Contains(app.Scopes, "openid") {
			_, line := spec.get("scopes")
			r.errorf(line, spec.field("scopes"), "must include openid when subjectVerification.source is idToken")
		}
	}
	templateGiven := tmpl.Present && !(tmpl.OK && tmpl.Value == "")
	if !templateGiven && app.Provider != "" && !builtinSubjectProvider(app.Provider, app.SubjectMode) {
		r.errorf(tmpl.Line, sv.field("template"), "required for provider %q in %s mode: built-in subject builders exist only for %s", app.Provider, app.SubjectMode, builtinSubjectProviders)
	}
	return out
}

// urlField reads an optional absolute http(s) URL. Its Value is set only
// when the URL is valid. Messages never echo the URL: it may carry
// credentials.
func (r *res) urlField(m *mapping, key string, queryOK bool) scalar {
	s := m.str(key)
	if !s.OK {
		return s
	}
	if msg := checkURL(s.Value, queryOK); msg != "" {
		r.errorf(s.Line, m.field(key), "%s", msg)
		s.OK, s.Value = false, ""
	}
	return s
}

func checkURL(raw string, queryOK bool) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "must be an absolute http or https URL"
	}
	switch {
	case u.User != nil:
		return "must not contain credentials"
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return "must not contain a fragment"
	case !queryOK && (u.RawQuery != "" || u.ForceQuery):
		return "must not contain a query"
	case u.Scheme == "http" && !loopback(u.Hostname()):
		return "https is required (plain http only for loopback hosts: localhost, 127.0.0.1, ::1)"
	}
	return ""
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func checkCallbackPath(p string) string {
	switch {
	case p == "":
		return "must not be empty"
	case !strings.HasPrefix(p, "/"):
		return "must start with /"
	case strings.ContainsAny(p, "?#"):
		return "must be a path only, without ? or #"
	case strings.IndexFunc(p, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) >= 0:
		return "must not contain spaces or control characters"
	case strings.Contains(p, "%"):
		return "must not contain percent-encoding"
	case p != path.Clean(p):
		return "must be a clean path (no //, . or .. segments, no trailing /)"
	case p == "/":
		return "must name a path below /"
	case p == "/v1" || strings.HasPrefix(p, "/v1/"):
		return "must not start with /v1/: that prefix belongs to the agentauth API"
	case p == "/healthz":
		return "/healthz is reserved for the health check"
	}
	return ""
}

// checkCallbackPaths refuses two apps with the same callback path: the
// callback handler finds the app by path.
func (l *loader) checkCallbackPaths() {
	first := map[string]callbackUse{}
	for _, u := range l.callbacks {
		p := u.app.Redirect.CallbackPath
		if f, dup := first[p]; dup {
			u.r.errorf(u.line, "spec.redirect.callbackPath", "%q is already used by %s (%s:%d)", p, f.r.label, f.r.file, f.line)
			continue
		}
		first[p] = u
	}
}
