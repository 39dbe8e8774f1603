package mcpapi

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	// idleGrace ends a watch whose server never got a session.
	idleGrace = time.Minute
	// maxWatch bounds a watch however long its sessions live.
	maxWatch = 24 * time.Hour
)

// watch serves what only a server with sessions can: it tells the
// caller's sessions when its tool list changed (a tenant upload, a
// deletion: notifications/tools/list_changed, sent by the SDK as sync
// changes the tools) and when a consent it sent a URL elicitation for is
// over (notifications/elicitation/complete). It reads the caller's
// manifest every manifestEvery and the pending consents every tick, and
// ends when the server's last session has closed.
func (c *caller) watch(consents Consents, every, manifestEvery time.Duration) {
	if every <= 0 {
		every = defaultWatchEvery
	}
	if manifestEvery <= 0 {
		manifestEvery = defaultManifestEvery
	}
	ctx, cancel := context.WithTimeout(context.Background(), maxWatch)
	defer cancel()
	start, lastManifest, hadSession := time.Now(), time.Now(), false
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sessions := 0
		for range c.srv.Sessions() {
			sessions++
		}
		switch {
		case sessions > 0:
			hadSession = true
		case hadSession || time.Since(start) > idleGrace:
			return
		}
		if time.Since(lastManifest) >= manifestEvery {
			lastManifest = time.Now()
			if c.sync(ctx, c.s.cfg.Tools.Manifest(ctx, c.p, "mcp")) {
				c.s.cfg.Log.InfoContext(ctx, "MCP tool list changed", "principal", c.p.Subject, "sessions", sessions)
			}
		}
		if consents != nil {
			c.completeConsents(ctx, consents)
		}
	}
}

// completeConsents sends notifications/elicitation/complete for each
// pending consent that is over, to every session of the caller.
func (c *caller) completeConsents(ctx context.Context, consents Consents) {
	c.mu.Lock()
	var ids []string
	for id := range c.pending {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		done, err := consents.Done(ctx, id)
		if err != nil || !done {
			continue
		}
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		for ss := range c.srv.Sessions() {
			if err := ss.NotifyElicitationComplete(ctx, &mcp.ElicitationCompleteParams{ElicitationID: id}); err != nil {
				c.s.cfg.Log.WarnContext(ctx, "elicitation complete not delivered", "authSessionId", id, "err", err)
			}
		}
	}
}
