// Package logging builds agentauth's structured JSON logger and carries the
// per-request logger (with request and trace ids) in a context.
//
// Its redacting ReplaceAttr is a second line of defence: values under known
// secret keys are replaced with [REDACTED] whatever their type. It must
// never be the first line: callers keep secrets in domain.Secret and never
// pass raw tokens, codes or provider bodies to a logger.
package logging

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// secretKeys are attribute keys whose values never reach a log.
var secretKeys = map[string]bool{
	"access_token": true, "accesstoken": true,
	"refresh_token": true, "refreshtoken": true,
	"id_token": true, "idtoken": true,
	"token": true, "code": true, "state": true,
	"code_verifier": true, "codeverifier": true,
	"device_code": true, "devicecode": true,
	"client_secret": true, "clientsecret": true,
	"authorization": true, "password": true, "secret": true,
	"cookie": true, "set-cookie": true,
}

// IsSecretKey reports whether an attribute key names a secret.
func IsSecretKey(k string) bool { return secretKeys[strings.ToLower(k)] }

// Redact is a slog ReplaceAttr that blanks values of secret keys.
func Redact(_ []string, a slog.Attr) slog.Attr {
	if IsSecretKey(a.Key) {
		return slog.String(a.Key, domain.Redacted)
	}
	return a
}

// ContextHandler adds the request's attributes (request id, trace id) to
// every record logged with a context that carries them, so packages that
// only receive a base logger still log request ids.
type ContextHandler struct{ slog.Handler }

type attrsKey struct{}

// WithAttrs returns ctx carrying attrs for ContextHandler.
func WithAttrs(ctx context.Context, attrs ...slog.Attr) context.Context {
	prev, _ := ctx.Value(attrsKey{}).([]slog.Attr)
	return context.WithValue(ctx, attrsKey{}, append(append([]slog.Attr(nil), prev...), attrs...))
}

// Handle adds the context's attributes.
func (h ContextHandler) Handle(ctx context.Context, r slog.Record) error {
	if attrs, ok := ctx.Value(attrsKey{}).([]slog.Attr); ok {
		r.AddAttrs(attrs...)
	}
	return h.Handler.Handle(ctx, r)
}

// WithAttrs keeps the wrapper.
func (h ContextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return ContextHandler{h.Handler.WithAttrs(attrs)}
}

// WithGroup keeps the wrapper.
func (h ContextHandler) WithGroup(name string) slog.Handler {
	return ContextHandler{h.Handler.WithGroup(name)}
}

// New returns a JSON logger writing to w at level, redacting secret keys;
// records logged with a context from WithAttrs carry its attributes
// (request id, trace id).
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(ContextHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: Redact})})
}
