package turnsapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/turn"
)

// DefaultStreamPoll is how often a turn's event stream reads the store.
const DefaultStreamPoll = 200 * time.Millisecond

// afterSeq is the seq the answer starts after (-1: from the first event):
// for a stream, the Last-Event-ID header when there is one (a reconnect),
// else the after query. problem is the 400's message.
func afterSeq(r *http.Request, stream bool) (after int64, problem string) {
	if v := r.Header.Get("Last-Event-ID"); stream && v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, "Last-Event-ID must be a whole number ≥ 0 (the id of the last event seen)"
		}
		return n, ""
	}
	if v := r.URL.Query().Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, "after must be a whole number ≥ 0 (the seq of the last event seen)"
		}
		return n, ""
	}
	return -1, ""
}

// Comments a turn's stream ends with when the turn can no longer be read.
const (
	commentInstanceGone = "the instance was deleted; the stream ends"
	commentTurnGone     = "the turn is no longer stored; the stream ends"
)

// streamEvents answers a turn's events as an event stream: evs (those the
// route just read with t), then, polling the store for that turn only,
// every new one until the read that shows the turn ended has been sent (a
// commit stores a turn's end and its last events together, so nothing
// comes after it). Each event's id is its seq, so a client that
// reconnects with Last-Event-ID loses and repeats none. The events are
// the stored turn events, which hold no secret.
func (a *API) streamEvents(w http.ResponseWriter, r *http.Request, key turn.InstanceKey, t turn.Turn, evs []turn.TurnEvent, after int64) {
	// The callers of the turn routes are the trusted runtime, one
	// credential: streams are capped per instance watched (and in all).
	leave, ok := a.cfg.Stream.Gate.Enter("instance:" + key.String())
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
	id := t.ID
	loaded := true // t and evs are what the route just read
	_ = s.Follow(r.Context(), a.cfg.StreamPoll, func(ctx context.Context, s *httpx.Stream) (bool, error) {
		if !loaded {
			next, nextEvs, err := a.cfg.Turns.TurnEvents(ctx, key, id, after)
			switch {
			case errors.Is(err, domain.ErrNotFound):
				// The instance was deleted, or the turn forgotten
				// (KeepTurns): it had ended, and its end was sent unless
				// the client came back after it was dropped.
				if _, ierr := a.cfg.Turns.Inspect(ctx, key); errors.Is(ierr, domain.ErrNotFound) {
					return true, s.Comment(commentInstanceGone)
				}
				return true, s.Comment(commentTurnGone)
			case err != nil && ctx.Err() != nil:
				return false, ctx.Err() // the client went away
			case err != nil:
				a.cfg.Log.ErrorContext(ctx, "turn event stream: reading the turn failed", "instance", key.String(), "turn", id, "err", err)
				return false, err
			}
			t, evs = next, nextEvs
		}
		loaded = false
		for _, e := range evs {
			data, err := httpx.EncodeJSON(e)
			if err != nil {
				a.cfg.Log.ErrorContext(ctx, "turn event stream: encoding an event failed", "instance", key.String(), "turn", id, "seq", e.Seq, "err", err)
				return false, err
			}
			if err := s.Event(strconv.FormatInt(e.Seq, 10), e.Type, data); err != nil {
				return false, err
			}
			after = e.Seq
		}
		return t.Status.Ended(), nil
	})
}
