package toolsapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
)

// DefaultStreamEvery is how often the tools stream re-evaluates.
const DefaultStreamEvery = 5 * time.Second

// EventTools is the tools stream's event type: its data is the caller's
// manifest, as GET /v1/agents/tools answers it.
const EventTools = "tools"

// commentTokenInvalid ends a stream whose JWT no longer verifies (it
// expired, or its key left the JWKS); the reason code follows.
const commentTokenInvalid = "the bearer JWT is no longer valid; reconnect with a valid one: "

// manifestID is an event's id: a short hash of the manifest's JSON, so a
// client can tell two manifests apart without comparing them.
func manifestID(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:8])
}

// stream is GET /v1/agents/stream: the caller's manifest as an event
// stream, sent at once and again whenever it changes (a tenant upload, a
// new bundle, a policy the claims now match). Every StreamEvery it checks
// the token again — a stream outlives no credential — and resolves the
// manifest again (resolutions are cached; the metrics name the route
// "stream"), sending it only when its JSON differs from the last sent.
// The admin flags follow GET /v1/agents/tools's rules.
func (a *API) stream(w http.ResponseWriter, r *http.Request, p domain.Principal) {
	opts, ok := flagsOrRefuse(w, r, p)
	if !ok {
		return
	}
	leave, ok := a.cfg.Stream.Gate.Enter(StreamPrincipal(p))
	if !ok {
		a.cfg.Stream.Gate.RefuseTooManyStreams(w, r)
		return
	}
	defer leave()
	s, err := httpx.OpenStream(w, r, a.cfg.Stream)
	if err != nil {
		if errors.Is(err, httpx.ErrNoFlush) {
			httpx.RefuseStream(w, r)
		}
		return
	}
	first, sent := true, ""
	_ = s.Follow(r.Context(), a.cfg.StreamEvery, func(ctx context.Context, s *httpx.Stream) (bool, error) {
		if !first {
			if _, refused := a.authenticate(r); refused != nil {
				return true, s.Comment(commentTokenInvalid + refused.reason)
			}
		}
		first = false
		body, err := httpx.EncodeJSON(a.manifest(ctx, p, opts, "stream"))
		if err != nil {
			a.cfg.Log.ErrorContext(ctx, "tools stream: encoding the manifest failed", "err", err)
			return false, err
		}
		if id := manifestID(body); id != sent {
			if err := s.Event(id, EventTools, body); err != nil {
				return false, err
			}
			sent = id
		}
		return false, nil
	})
}

// StreamPrincipal is the key a JWT caller's streams are capped by: its
// tenant and subject (the MCP server's standalone stream uses it too).
func StreamPrincipal(p domain.Principal) string {
	return "jwt:" + p.Tenant + "\x00" + p.Subject
}
