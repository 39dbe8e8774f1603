// Package logging builds agentauth's structured JSON logger and carries the
// per-request logger (with request and trace ids) in a context.
//
// Its redacting ReplaceAttr is a second line of defence: values under known
// secret keys are replaced with [REDACTED] whatever their type, and so are
// the authorization code, state and token parameters of any URL, query
// string or error text a record carries. It must never be the first line:
// callers keep secrets in domain.Secret and never pass raw tokens, codes or
// provider bodies to a logger.
package logging

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// secretKeys are attribute keys whose values never reach a log. "code" is
// not one: it is an error result's code almost everywhere. The OAuth
// authorization code travels in the callback query, and query parameters
// are redacted wherever a URL or query reaches a log (secretParam).
var secretKeys = map[string]bool{
	"access_token": true, "accesstoken": true,
	"refresh_token": true, "refreshtoken": true,
	"id_token": true, "idtoken": true,
	"authorization_code": true, "authorizationcode": true,
	"token": true, "state": true,
	"code_verifier": true, "codeverifier": true,
	"device_code": true, "devicecode": true,
	"client_secret": true, "clientsecret": true,
	"authorization": true, "password": true, "secret": true,
	"cookie": true, "set-cookie": true,
}

// IsSecretKey reports whether an attribute key names a secret.
func IsSecretKey(k string) bool { return secretKeys[strings.ToLower(k)] }

// secretParam reports whether a query parameter holds a secret: in a URL,
// code is the OAuth authorization code (RFC 6749 §4.1.2).
func secretParam(k string) bool {
	k = strings.ToLower(k)
	return k == "code" || secretKeys[k]
}

// queryParam finds name=value pairs of a URL, query or fragment inside any
// text: the name starts the text or follows ?, &, ;, # or a space.
var queryParam = regexp.MustCompile(`(^|[?&;#\s])([A-Za-z_-]+)=([^&;#\s"']*)`)

// redactQuery blanks the values of secret parameters in text; ok is false
// when there was nothing to blank.
func redactQuery(text string) (string, bool) {
	if !strings.Contains(text, "=") {
		return text, false
	}
	changed := false
	out := queryParam.ReplaceAllStringFunc(text, func(m string) string {
		sub := queryParam.FindStringSubmatch(m)
		if !secretParam(sub[2]) || sub[3] == "" {
			return m
		}
		changed = true
		return sub[1] + sub[2] + "=" + domain.Redacted
	})
	return out, changed
}

// Redact is a slog ReplaceAttr that blanks values of secret keys, and the
// secret parameters (code, state, tokens) of any URL, query string or
// error text a record carries, its message included.
func Redact(_ []string, a slog.Attr) slog.Attr {
	if IsSecretKey(a.Key) {
		return slog.String(a.Key, domain.Redacted)
	}
	switch a.Value.Kind() {
	case slog.KindString:
		if s, ok := redactQuery(a.Value.String()); ok {
			return slog.String(a.Key, s)
		}
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case url.Values:
			return slog.Any(a.Key, redactValues(v))
		case *url.URL:
			if v != nil {
				return slog.String(a.Key, redactURL(*v))
			}
		case url.URL:
			return slog.String(a.Key, redactURL(v))
		case error:
			if s, ok := redactQuery(v.Error()); ok {
				return slog.String(a.Key, s)
			}
		}
	}
	return a
}

func redactValues(q url.Values) url.Values {
	out := make(url.Values, len(q))
	for k, vs := range q {
		if secretParam(k) {
			vs = []string{domain.Redacted}
		}
		out[k] = vs
	}
	return out
}

// redactURL blanks u's secret query parameters, its user info (a
// password) and secret parameters of its fragment (implicit-flow tokens).
func redactURL(u url.URL) string {
	u.RawQuery = redactValues(u.Query()).Encode()
	u.User = nil
	s, _ := redactQuery(u.String())
	return s
}

// ContextHandler adds the request's attributes (request id, trace id) to
// every record logged with a context that carries them, so packages that
// only receive a base logger still log request ids. A key the record or
// the logger (With) already has is not added again: a JSON line never
// holds one key twice, and the value the caller wrote wins.
type ContextHandler struct {
	slog.Handler
	// has are the keys the logger was given with With since its last
	// group (the namespace the context's attributes land in).
	has []string
}

type attrsKey struct{}

// WithAttrs returns ctx carrying attrs for ContextHandler. An attribute
// replaces one of the same key that ctx carried.
func WithAttrs(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	out := make([]slog.Attr, 0, len(prev)+len(attrs))
	for _, p := range prev {
		if !slices.ContainsFunc(attrs, func(a slog.Attr) bool { return a.Key == p.Key }) {
			out = append(out, p)
		}
	}
	return context.WithValue(ctx, attrsKey{}, append(out, attrs...))
}

// TraceIDKey is the attribute every log line of a request or a turn
// carries its trace id under.
const TraceIDKey = "traceId"

// WithTraceID returns ctx whose log lines carry traceId = id (replacing
// a trace id ctx carried: a turn run during an HTTP request logs the
// turn's trace).
func WithTraceID(ctx context.Context, id string) context.Context {
	return WithAttrs(ctx, slog.String(TraceIDKey, id))
}

// Handle adds the context's attributes the record does not have yet.
func (h ContextHandler) Handle(ctx context.Context, r slog.Record) error {
	if attrs, ok := ctx.Value(attrsKey{}).([]slog.Attr); ok {
		for _, a := range attrs {
			if !h.holds(r, a.Key) {
				r.AddAttrs(a)
			}
		}
	}
	return h.Handler.Handle(ctx, r)
}

// holds reports whether the record or the logger has key.
func (h ContextHandler) holds(r slog.Record, key string) bool {
	if slices.Contains(h.has, key) {
		return true
	}
	found := false
	r.Attrs(func(a slog.Attr) bool {
		found = a.Key == key
		return !found
	})
	return found
}

// WithAttrs keeps the wrapper and notes the keys.
func (h ContextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	has := slices.Clip(h.has)
	for _, a := range attrs {
		has = append(has, a.Key)
	}
	return ContextHandler{Handler: h.Handler.WithAttrs(attrs), has: has}
}

// WithGroup keeps the wrapper; the keys noted so far are outside the
// group, where the context's attributes no longer land.
func (h ContextHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h // slog opens no group for an empty name
	}
	return ContextHandler{Handler: h.Handler.WithGroup(name)}
}

// New returns a JSON logger writing to w at level, redacting secret keys;
// records logged with a context from WithAttrs carry its attributes
// (request id, trace id).
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(ContextHandler{Handler: slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: Redact})})
}
