package mcpapi

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentauth/agentauth/shared/domain"
)

// Consents tells whether a consent (an auth session) is over: the user
// approved, refused or let it expire (shared/oauth, through shared/app).
type Consents interface {
	Done(ctx context.Context, authSessionID string) (bool, error)
}

// Watch settings of a session-keeping server (defaults when zero).
const (
	defaultWatchEvery    = time.Second
	defaultManifestEvery = 5 * time.Second
	// roundTimeout bounds the calls of one watch round.
	roundTimeout = 10 * time.Second
)

// listChangedSignal is the one tool registered on a session's SDK
// server: adding it is how the SDK is made to send the session
// notifications/tools/list_changed (it has no other way to send one). The
// list and calls never read the registry (mcpapi.go), so no client sees
// it.
var listChangedSignal = &mcp.Tool{Name: "agentauth_list_changed", InputSchema: json.RawMessage(`{"type":"object"}`)}

func noTool(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, errors.New("not a tool")
}

// watch is the one loop of all the live sessions of a handler. Each round
// (every WatchEvery) it closes the sessions whose opening token has
// expired and sends notifications/elicitation/complete for the consents
// that are over; every ManifestEvery it resolves again the tool list of
// each session that listed its tools — only when the tool plane's
// revision moved or the session's caller changed (with no Revision, every
// time) — and sends notifications/tools/list_changed to the sessions
// whose list changed. It ends when no session is live; the next
// initialize starts it again.
func (r *registry) watch() {
	every := r.s.cfg.WatchEvery
	t := time.NewTicker(every)
	defer t.Stop()
	lists := int(max(1, r.s.cfg.ManifestEvery/every))
	for n := 1; ; n++ {
		<-t.C
		if !r.round(n%lists == 0) {
			return
		}
	}
}

// round is one round of the watch; it reports whether the loop goes on.
func (r *registry) round(checkLists bool) bool {
	defer r.rounds.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), roundTimeout)
	defer cancel()
	revChanged := false
	if checkLists && r.s.cfg.Revision != nil {
		rev := r.s.cfg.Revision(ctx)
		r.mu.Lock()
		revChanged, r.lastRev = rev != r.lastRev, rev
		r.mu.Unlock()
	}
	now := r.s.cfg.Now()
	var expired, pending, relist []*session
	r.mu.Lock()
	if len(r.live) == 0 {
		r.running = false
		r.mu.Unlock()
		return false
	}
	for _, sess := range r.live {
		if !sess.expires.IsZero() && !now.Before(sess.expires) && sess.closing.CompareAndSwap(false, true) {
			expired = append(expired, sess)
			continue
		}
		sess.mu.Lock()
		if len(sess.pending) > 0 {
			pending = append(pending, sess)
		}
		if checkLists && sess.listFP != "" && (revChanged || sess.dirty || r.s.cfg.Revision == nil) {
			relist = append(relist, sess)
		}
		sess.mu.Unlock()
	}
	r.mu.Unlock()
	for _, sess := range expired {
		// Close waits for the session's calls in flight: not in the loop.
		go sess.ss.Close()
	}
	for _, sess := range pending {
		r.completeConsents(ctx, sess)
	}
	changed := 0
	for _, sess := range relist {
		if r.relist(ctx, sess) {
			changed++
		}
	}
	if changed > 0 {
		r.s.cfg.Log.InfoContext(ctx, "MCP tool lists changed", "sessions", changed)
	}
	return true
}

// relist resolves the session's caller's tools again and tells the
// session when they are not what it was last told; it reports whether
// they changed.
func (r *registry) relist(ctx context.Context, sess *session) bool {
	sess.mu.Lock()
	p := sess.latest
	sess.mu.Unlock()
	fp := fingerprint(r.s.listing(ctx, r.s.cfg.Tools.Manifest(ctx, p, "mcp")))
	sess.mu.Lock()
	changed := fp != sess.listFP
	sess.listFP, sess.listFor, sess.dirty = fp, p, false
	sess.mu.Unlock()
	if changed {
		sess.srv.AddTool(listChangedSignal, noTool) // the SDK sends list_changed
	}
	return changed
}

// completeConsents sends notifications/elicitation/complete for each of
// the session's pending consents that is over; a consent the store no
// longer knows is dropped.
func (r *registry) completeConsents(ctx context.Context, sess *session) {
	consents := r.s.cfg.Consents
	sess.mu.Lock()
	ids := make([]string, 0, len(sess.pending))
	for id := range sess.pending {
		ids = append(ids, id)
	}
	if consents == nil {
		clear(sess.pending)
	}
	sess.mu.Unlock()
	if consents == nil {
		return
	}
	for _, id := range ids {
		done, err := consents.Done(ctx, id)
		gone := errors.Is(err, domain.ErrNotFound)
		if !done && !gone {
			continue
		}
		sess.mu.Lock()
		delete(sess.pending, id)
		sess.mu.Unlock()
		if gone {
			continue
		}
		if err := sess.ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id}); err != nil {
			r.s.cfg.Log.WarnContext(ctx, "elicitation complete not delivered", "principal", sess.key, "err", err)
		}
	}
}
