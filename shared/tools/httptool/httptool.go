// Package httptool runs tools of transport http: it builds the upstream
// request from the tool's method, url and sourcePath and the call's
// arguments, attaches the bearer token getAccessToken returns for the
// tool's auth, and turns the upstream answer into the tool's output.
//
// A token never leaves the Authorization header: it is scrubbed from
// anything the upstream sends back before that reaches the model, and it
// is never logged.
//
// Uploaded (tenant) tools run on a guarded client, so a tenant cannot aim
// the tools function at the cloud metadata endpoint, the local network or
// anything else that is not the public internet. The guard:
//
//   - checks the address actually dialled, after DNS, so a name that
//     resolves (or re-resolves) to a refused address is refused too;
//   - refuses every block of the IANA IPv4 and IPv6 Special-Purpose
//     Address Registries (RFC 6890 and its updates), IPv4 multicast and
//     every IPv6 address outside 2000::/3 (which also refuses the
//     deprecated IPv4-compatible ::a.b.c.d). Blocks the registries mark
//     globally reachable are refused as well (PCP, TURN and SRP anycast,
//     AS112, AMT, ORCHIDv2, DRIP): none is a web API, and an anycast
//     address reaches whichever instance is nearest, which can be one
//     inside the operator's network;
//   - judges an IPv4-mapped address (::ffff:a.b.c.d) as the IPv4 address,
//     which is what the kernel dials, and a NAT64 address of the
//     well-known prefix 64:ff9b::/96 by the IPv4 address in its last 32
//     bits: an IPv6-only subnet with DNS64 (AWS offers it) reaches every
//     IPv4-only API that way, and the translator would dial a private
//     address as readily as a public one. The local-use NAT64 prefix
//     64:ff9b:1::/48, 6to4 (2002::/16) and Teredo (2001::/32) are refused
//     whatever IPv4 address they carry: the registry does not call them
//     globally reachable, a translator or relay on the path would dial the
//     embedded address for us, and a real API does not sit behind them;
//   - never uses a proxy from the environment (HTTP_PROXY and the like): a
//     proxy would dial for us, past the check;
//   - answers the tenant with one generic refusal (E_TOOL_UPSTREAM_NOT_ALLOWED)
//     for a refused address and for a name that does not resolve, and
//     puts the detail (the host, the address it resolved to and the rule,
//     or the resolver's answer) in the operator's log only, so that a
//     tenant cannot map internal names by probing them.
//
// It must never let an uploaded tool's request leave for an address the
// guard has not checked (AllowPrivateUpstreams turns the check off, for
// local development only). Bundle tools run on an unguarded client: the
// operator chose their URLs.
package httptool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// Defaults.
const (
	DefaultTimeout     = 20 * time.Second
	DefaultMaxResponse = 1 << 20
)

// TokenSource is getAccessToken (*oauth.Manager), and its answer after an
// upstream refused the token it gave (TokenRefused: the grant refreshed at
// once, or revoked and a new consent started).
type TokenSource interface {
	GetAccessToken(ctx context.Context, req oauth.TokenRequest) oauth.Result
	TokenRefused(ctx context.Context, req oauth.TokenRequest, refused domain.Secret) oauth.Result
}

// Runner runs http tools. The zero value is not usable: use New.
type Runner struct {
	tokens      TokenSource
	open        *http.Client // bundle tools: the operator chose the URL
	guarded     *http.Client // tenant tools: public addresses only
	timeout     time.Duration
	maxResponse int64
	log         *slog.Logger
}

// Options of a Runner.
type Options struct {
	// Tokens fetches the tools' OAuth tokens; nil: a tool with auth fails
	// with a configuration error.
	Tokens TokenSource
	// Timeout of one upstream call (DefaultTimeout when 0), unless the
	// call is bounded by its caller (Call.CallerLimit).
	Timeout time.Duration
	// MaxResponse bounds the upstream body read (DefaultMaxResponse).
	MaxResponse int64
	// AllowPrivateUpstreams lets tenant tools reach every address the
	// guard refuses, loopback and private ones included (local development
	// and tests only). They still never use a proxy from the environment.
	AllowPrivateUpstreams bool
	// Transport, when set, is used by both clients instead of their own
	// (tests).
	Transport http.RoundTripper
	// Log gets what a tenant must not see: why the guard refused an
	// uploaded tool's upstream (the host, the address it resolved to, the
	// resolver's answer). Nil: discarded.
	Log *slog.Logger
}

// New builds a Runner.
func New(o Options) *Runner {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponse <= 0 {
		o.MaxResponse = DefaultMaxResponse
	}
	open := o.Transport
	guarded := o.Transport
	if open == nil {
		open = http.DefaultTransport.(*http.Transport).Clone()
		guarded = GuardedTransport(o.AllowPrivateUpstreams)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	// The clients have no Timeout of their own: the request's context
	// carries the runner's or the caller's limit (run).
	return &Runner{
		log:         o.Log,
		tokens:      o.Tokens,
		open:        &http.Client{Transport: open, CheckRedirect: sameOrigin},
		guarded:     &http.Client{Transport: guarded, CheckRedirect: sameOrigin},
		timeout:     o.Timeout,
		maxResponse: o.MaxResponse,
	}
}

// sameOrigin follows at most 4 redirects (5 requests in all; the 5th
// redirect is refused, net/http's way of counting) and never to another
// origin: the Authorization header must not travel to a host the tool does
// not name.
func sameOrigin(req *http.Request, via []*http.Request) error {
	if len(via) >= 5 {
		return errors.New("stopped after 5 redirects")
	}
	if req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host {
		return fmt.Errorf("redirect to another origin (%s) refused", req.URL.Host)
	}
	return nil
}

// Error is an upstream failure as a tool error.
type Error = toolhooks.ToolError

// Error codes of http tools.
const (
	CodeUpstream     = "E_TOOL_UPSTREAM"
	CodeUpstreamAuth = "E_TOOL_UPSTREAM_UNAUTHORIZED"
	CodeUnreachable  = "E_TOOL_UPSTREAM_UNREACHABLE"
	// CodeNotAllowed: an uploaded tool's host is not a public address
	// (or does not resolve); the operator's log says which.
	CodeNotAllowed    = "E_TOOL_UPSTREAM_NOT_ALLOWED"
	CodeAuth          = "E_TOOL_AUTH"
	CodeArgs          = toolhooks.CodeInvalidArgs
	CodeResponseLimit = "E_TOOL_UPSTREAM_TOO_LARGE"
	// CodeTimeout: the upstream did not answer within the runner's
	// request timeout (the hooks' code for a call over its time limit).
	CodeTimeout = toolhooks.CodeTimeout
)

// Invoker returns the hooks' invoker for t. auth is the turn's auth (its
// subjects come from the verified token); tenant marks an uploaded tool,
// which runs on the guarded client. A consent it needs resumes nothing
// (the caller calls again) and does not say who started it: the edges
// use CallInvoker with Call.Via.
func (r *Runner) Invoker(t *bundle.Tool, auth domain.TurnAuth, tenant bool) toolhooks.Invoker {
	return r.CallInvoker(t, Call{Auth: auth, Tenant: tenant})
}

// Call is what one call of an http tool carries beside its arguments.
type Call struct {
	// Auth is the turn's auth, for getAccessToken.
	Auth domain.TurnAuth
	// Tenant marks an uploaded tool: it runs on the guarded client.
	Tenant bool
	// Resume, when set, is where the auth session a consent starts sends
	// auth.granted: a turn's parked tool call.
	Resume *domain.ResumeInfo
	// IdempotencyKey, when set, is sent as the Idempotency-Key header, the
	// same on every run of one call, so an upstream that honours it does
	// a re-run (after a crash, after a consent) once.
	IdempotencyKey string
	// CallerLimit: the caller bounds the call through its context (a
	// turn's call: the agent's limits.toolTimeoutSeconds, which the tool
	// hooks enforce), so the runner's request Timeout does not apply and
	// a limit longer than it is the one that counts.
	CallerLimit bool
	// Via names the edge that made the call (domain.StartedBy…: turn,
	// tool, mcp) for getAccessToken: a consent the call starts records it.
	Via string
}

// CallInvoker is Invoker with the whole call context (a turn's call).
func (r *Runner) CallInvoker(t *bundle.Tool, c Call) toolhooks.Invoker {
	return func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		return r.run(ctx, t, c, args)
	}
}

func (r *Runner) run(ctx context.Context, t *bundle.Tool, c Call, raw json.RawMessage) (json.RawMessage, error) {
	if _, err := buildRequest(ctx, t, raw); err != nil {
		return nil, err
	}
	if c.IdempotencyKey != "" && !validHeaderValue(c.IdempotencyKey) {
		return nil, toolhooks.NewToolError("InvalidIdempotencyKey", toolhooks.CodeTool, "the call's idempotency key is not a valid header value; the tool was not run")
	}
	var tokReq oauth.TokenRequest
	var tok oauth.Result
	if t.Auth != nil {
		if r.tokens == nil {
			return nil, toolhooks.NewToolError("ConfigurationError", CodeAuth, "this server has no OAuth broker configured for tool auth")
		}
		tokReq = oauth.TokenRequest{AppRef: t.Auth.OAuthAppRef, Scopes: t.Auth.Scopes, Auth: c.Auth, Resume: c.Resume, Via: c.Via}
		tok = r.tokens.GetAccessToken(ctx, tokReq)
		if err := tokenError(t, tok); err != nil {
			return nil, err
		}
	}
	if !c.CallerLimit {
		// The requests and the reading of their answers, as
		// http.Client's Timeout would, but telling its end from the
		// caller's. One budget for the call, a retry included.
		rctx, cancel := context.WithTimeoutCause(ctx, r.timeout, errRequestTimeout)
		defer cancel()
		ctx = rctx
	}
	resp, req, err := r.send(ctx, t, c, raw, tok)
	if err != nil {
		return nil, err
	}
	refused := t.Auth != nil && refusesToken(resp)
	out, err := r.answer(resp, req, tok)
	if !refused {
		return out, err
	}
	// The upstream refused the broker's token before doing anything with
	// the request (a 401 is a refusal, never a partial success), so one
	// more run with the token that replaces it is safe. Nothing else — a
	// timeout, no answer, any other status — is ever sent again, and the
	// second answer is final whatever it is.
	next := r.tokens.TokenRefused(ctx, tokReq, tok.AccessToken)
	if errors.Is(context.Cause(ctx), errRequestTimeout) {
		return nil, r.timeoutError(req)
	}
	if err := tokenError(t, next); err != nil {
		return nil, err // a consent to give, or the broker's error
	}
	if next.AccessToken.Reveal() == tok.AccessToken.Reveal() {
		return nil, err // nothing newer to try: the refusal is the answer
	}
	r.log.InfoContext(ctx, "upstream refused the token; running the call once more with the refreshed one",
		"toolId", t.ID, "method", req.Method, "host", req.URL.Host, "status", resp.StatusCode)
	if resp, req, err = r.send(ctx, t, c, raw, next); err != nil {
		return nil, err
	}
	return r.answer(resp, req, next)
}

// answer reads resp, the answer to req sent with tok, into the tool's
// output or error, and closes its body.
func (r *Runner) answer(resp *http.Response, req *http.Request, tok oauth.Result) (json.RawMessage, error) {
	token := tok.AccessToken.Reveal()
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, r.maxResponse+1))
	if err != nil {
		if r.timedOut(req) {
			return nil, r.timeoutError(req)
		}
		return nil, toolhooks.NewToolError("UpstreamUnreachable", CodeUnreachable, fmt.Sprintf("%s %s: reading the answer: %s", req.Method, req.URL.Host, scrub(err.Error(), token)))
	}
	if int64(len(body)) > r.maxResponse {
		return nil, toolhooks.NewToolError("UpstreamTooLarge", CodeResponseLimit, fmt.Sprintf("the upstream answer is larger than %d bytes", r.maxResponse))
	}
	text := scrubBody(string(body), token)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		code := CodeUpstream
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			code = CodeUpstreamAuth
		}
		msg := fmt.Sprintf("upstream answered %s", resp.Status)
		if s := strings.TrimSpace(text); s != "" && utf8.ValidString(s) {
			msg += ": " + s
		}
		return nil, toolhooks.NewToolError("UpstreamError", code, msg)
	}
	return output(text), nil
}

// send makes one request of the call with the token tok (none for a tool
// without auth) and returns its answer, or the tool error of a request
// that got none.
func (r *Runner) send(ctx context.Context, t *bundle.Tool, c Call, raw json.RawMessage, tok oauth.Result) (*http.Response, *http.Request, error) {
	req, err := buildRequest(ctx, t, raw)
	if err != nil {
		return nil, nil, err
	}
	if c.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", c.IdempotencyKey)
	}
	token := ""
	if tok.Status == oauth.StatusReady {
		token = tok.AccessToken.Reveal()
		typ := tok.TokenType
		if typ == "" || strings.EqualFold(typ, "bearer") {
			typ = "Bearer"
		}
		req.Header.Set("Authorization", typ+" "+token)
	}
	client := r.open
	if c.Tenant {
		client = r.guarded
	}
	resp, err := client.Do(req)
	if err != nil {
		if r.timedOut(req) {
			return nil, nil, r.timeoutError(req)
		}
		return nil, nil, r.unreachable(ctx, t, req, err, token, c.Tenant)
	}
	return resp, req, nil
}

// tokenError is the tool's answer to a token result that is not ready:
// the consent to give (a result, not an error) or the broker's error;
// nil for a ready token.
func tokenError(t *bundle.Tool, res oauth.Result) error {
	switch res.Status {
	case oauth.StatusReady:
		return nil
	case oauth.StatusAuthorizationRequired:
		return &toolhooks.AuthorizationRequired{Authorization: pendingJSON(t, res)}
	}
	code, msg := "unknown", "getAccessToken failed"
	if res.Error != nil {
		code, msg = res.Error.Code, res.Error.Message
	}
	return toolhooks.NewToolError("AuthError", CodeAuth, fmt.Sprintf("%s: %s (%s)", t.Auth.OAuthAppRef, msg, code))
}

// errRequestTimeout ends a request's context at the runner's Timeout.
var errRequestTimeout = errors.New("the http tool's request timeout passed")

// timedOut: the runner's Timeout ended req (not its caller).
func (r *Runner) timedOut(req *http.Request) bool {
	return errors.Is(context.Cause(req.Context()), errRequestTimeout)
}

// timeoutError is the tool error of a request the runner's Timeout ended.
func (r *Runner) timeoutError(req *http.Request) error {
	return toolhooks.NewToolError("ToolTimeout", CodeTimeout, fmt.Sprintf("%s %s: the upstream did not answer within %s, the request timeout of http tools; the request was cancelled",
		req.Method, req.URL.Host, r.timeout))
}

// validHeaderValue: visible ASCII only (a key is an id, not text), so it
// can never split a header or be refused by the transport after the
// token was fetched.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x21 || v[i] > 0x7e {
			return false
		}
	}
	return len(v) <= 255
}

// notAllowedMessage is all a tenant learns when the guard refuses its
// tool's host, or the host does not resolve: the same answer for both, so
// that probing names tells a tenant neither which internal names exist nor
// what they resolve to.
const notAllowedMessage = "upstream address not allowed: the host does not resolve to a public address, and uploaded tools reach public addresses only (the operator's log has the detail)"

// unreachable is the tool error of a call that got no answer. url.Error
// names the URL; the query may hold arguments, so it says only the host.
// For an uploaded tool, a refused address or a failed lookup is answered
// with notAllowedMessage, and the detail (the address it resolved to, the
// rule, the resolver's answer) goes to the operator's log.
func (r *Runner) unreachable(ctx context.Context, t *bundle.Tool, req *http.Request, err error, token string, tenant bool) error {
	var lookup *net.DNSError
	if tenant && (IsRefused(err) || errors.As(err, &lookup)) {
		r.log.WarnContext(ctx, "uploaded tool's upstream refused", "toolId", t.ID, "toolName", t.ToolName,
			"method", req.Method, "host", req.URL.Host, "reason", unwrapURLError(err))
		return toolhooks.NewToolError("UpstreamNotAllowed", CodeNotAllowed, fmt.Sprintf("%s %s: %s", req.Method, req.URL.Host, notAllowedMessage))
	}
	return toolhooks.NewToolError("UpstreamUnreachable", CodeUnreachable, fmt.Sprintf("%s %s: %s", req.Method, req.URL.Host, scrub(unwrapURLError(err), token)))
}

func unwrapURLError(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// output is the upstream's JSON as is, or its text as a JSON string, or
// null for an empty body.
func output(text string) json.RawMessage {
	if strings.TrimSpace(text) == "" {
		return json.RawMessage("null")
	}
	if json.Valid([]byte(text)) {
		return json.RawMessage(text)
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	b, _ := json.Marshal(text)
	return b
}

// Authorization is the authorization object of an authorization_required
// result: what the user must open, no secret. The runner writes it; the
// turn plane (the call parks on AuthSessionID) and the MCP server (the URL
// elicitation) read it. Fields in key order, as the object was first
// written.
type Authorization struct {
	AuthSessionID    string                  `json:"authSessionId"`
	AuthorizationURL string                  `json:"authorizationUrl"`
	DeviceCode       *oauth.DeviceCodePrompt `json:"deviceCode,omitempty"`
	ExpiresAt        string                  `json:"expiresAt"`
	Message          string                  `json:"message"`
	OAuthAppRef      string                  `json:"oauthAppRef"`
}

// pendingJSON is the authorization object of an authorization_required
// result.
func pendingJSON(t *bundle.Tool, res oauth.Result) json.RawMessage {
	v := Authorization{
		OAuthAppRef:      t.Auth.OAuthAppRef.String(),
		AuthSessionID:    res.AuthSessionID,
		AuthorizationURL: res.AuthorizationURL,
		ExpiresAt:        res.SessionExpiresAt.UTC().Format(time.RFC3339),
		Message:          res.Message,
		DeviceCode:       res.DeviceCode,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the link stays readable: & not \u0026
	_ = enc.Encode(v)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// buildRequest maps the arguments: {name} in sourcePath takes the argument
// of that name (path-escaped); the rest go in the query for GET, HEAD,
// DELETE and OPTIONS and as a JSON object body otherwise.
func buildRequest(ctx context.Context, t *bundle.Tool, raw json.RawMessage) (*http.Request, error) {
	args := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&args); err != nil {
			return nil, toolhooks.NewToolError("InvalidArguments", CodeArgs, "arguments must be a JSON object")
		}
	}
	path, err := expandPath(t.SourcePath, args)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(strings.TrimRight(t.URL, "/") + path)
	if err != nil {
		return nil, toolhooks.NewToolError("InvalidArguments", CodeArgs, "the arguments do not make a valid upstream URL")
	}
	var body io.Reader
	switch t.Method {
	case http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodOptions:
		q := u.Query()
		keys := make([]string, 0, len(args))
		for k := range args {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, s := range queryValues(args[k]) {
				q.Add(k, s)
			}
		}
		u.RawQuery = q.Encode()
	default:
		b, err := json.Marshal(args)
		if err != nil {
			return nil, toolhooks.NewToolError("InvalidArguments", CodeArgs, "arguments do not encode as JSON")
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, t.Method, u.String(), body)
	if err != nil {
		return nil, toolhooks.NewToolError("InvalidArguments", CodeArgs, "the arguments do not make a valid upstream request")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "agentauth-tools/1")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// expandPath fills {name} segments; a filled argument is removed from args.
func expandPath(p string, args map[string]any) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(p, '{')
		if i < 0 {
			b.WriteString(p)
			return b.String(), nil
		}
		j := strings.IndexByte(p[i:], '}')
		if j < 0 {
			b.WriteString(p)
			return b.String(), nil
		}
		name := p[i+1 : i+j]
		v, ok := args[name]
		s, scalar := scalarString(v)
		if !ok || !scalar || s == "" {
			return "", toolhooks.NewToolError("InvalidArguments", CodeArgs, fmt.Sprintf("path parameter {%s} needs a non-empty string or number argument %q", name, name))
		}
		if s == "." || s == ".." {
			// An upstream would resolve them: the call would leave the
			// tool's path.
			return "", toolhooks.NewToolError("InvalidArguments", CodeArgs, fmt.Sprintf("path parameter {%s} must not be %q", name, s))
		}
		delete(args, name)
		b.WriteString(p[:i])
		b.WriteString(url.PathEscape(s))
		p = p[i+j+1:]
	}
}

func scalarString(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	}
	return "", false
}

// queryValues: scalars as themselves, lists as repeated values, objects
// as JSON, null as nothing.
func queryValues(v any) []string {
	if s, ok := scalarString(v); ok {
		return []string{s}
	}
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := scalarString(e); ok {
				out = append(out, s)
			} else if e != nil {
				b, _ := json.Marshal(e)
				out = append(out, string(b))
			}
		}
		return out
	}
	b, _ := json.Marshal(v)
	return []string{string(b)}
}
