package oauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// SessionStatus is the public view of a session.
type SessionStatus struct {
	Status       domain.SessionStatus `json:"status"`
	ExpiresAt    time.Time            `json:"expiresAt"`
	StatusReason string               `json:"statusReason,omitempty"`
}

// MaxWait is the default bound of a long poll of a session's status; behind
// API Gateway (30 s integration timeout) Config.MaxWait lowers it.
const MaxWait = 55 * time.Second

// SessionStatus returns a session's status; with wait > 0 it polls until
// the session leaves pending (and exchanging) or wait passes. ErrNotFound for unknown ids.
func (m *Manager) SessionStatus(ctx context.Context, id string, wait time.Duration) (SessionStatus, error) {
	wait = min(wait, m.cfg.MaxWait)
	deadline := time.Now().Add(wait)
	tick := 100 * time.Millisecond
	for {
		s, err := m.cfg.Store.GetSession(ctx, id)
		if err != nil {
			return SessionStatus{}, err
		}
		st := m.view(s)
		// exchanging is a callback in flight: the answer is seconds away.
		if !domain.Completable(st.Status) || !time.Now().Before(deadline) {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, nil
		case <-time.After(min(tick, time.Until(deadline))):
		}
		if tick < time.Second {
			tick += tick / 2
		}
	}
}

// view reports a pending session past its expiry as expired even before
// the sweep has written it.
func (m *Manager) view(s domain.Session) SessionStatus {
	st := SessionStatus{Status: s.Status, ExpiresAt: s.ExpiresAt, StatusReason: s.StatusReason}
	if s.Status == domain.SessionPending && !m.now().Before(s.ExpiresAt) {
		st.Status, st.StatusReason = domain.SessionExpired, ReasonSessionExpired
	}
	return st
}

// CleanupReport counts what CleanupExpiredSessions did.
type CleanupReport struct {
	Expired         int // pending sessions marked expired
	Recovered       int // exchanging sessions a crash left: completed (grant stored) or failed
	Deleted         int // final sessions removed after the retention
	EventsDelivered int // auth.granted events queued late
	Unreadable      int // records skipped
}

// LogValue logs the report as one group (every caller the same way).
func (r CleanupReport) LogValue() slog.Value {
	return slog.GroupValue(slog.Int("expired", r.Expired), slog.Int("recovered", r.Recovered), slog.Int("deleted", r.Deleted),
		slog.Int("eventsDelivered", r.EventsDelivered), slog.Int("unreadable", r.Unreadable))
}

// String is the report for a person.
func (r CleanupReport) String() string {
	return fmt.Sprintf("expired %d, interrupted exchanges settled %d, deleted %d, late auth.granted delivered %d, unreadable %d",
		r.Expired, r.Recovered, r.Deleted, r.EventsDelivered, r.Unreadable)
}

// SessionRetention is the default of how long after its expiry a
// finished session is kept (so a replayed callback is answered "already
// used", and for the operator) before cleanup deletes it;
// Config.SessionRetention sets another. The finished sessions level off at
// about the sessions begun in SessionTTL + retention.
const SessionRetention = 24 * time.Hour

// CleanupExpiredSessions marks pending sessions past their expiry as
// expired, settles exchanges a crash interrupted, delivers auth.granted
// events whose first delivery failed, and
// deletes finished sessions whose expiry is the retention
// (Config.SessionRetention) or more ago.
// It reads the store's sweep sets (domain.SessionIndex), so its cost
// follows the sessions it acts on, not how many the store holds.
func (m *Manager) CleanupExpiredSessions(ctx context.Context) (CleanupReport, error) {
	var rep CleanupReport
	now := m.now()
	// A store that cannot tell an unreadable record's set (the file
	// store) reports it in every list: count it once.
	unreadable := map[string]bool{}
	list := func(set domain.SweepSet, expiredBy time.Time) ([]domain.Session, error) {
		sessions, bad, err := m.cfg.Store.ListSweepSessions(ctx, set, expiredBy)
		if err != nil {
			return nil, fmt.Errorf("cleanup: list %s sessions: %w", set, err)
		}
		for _, b := range bad {
			if !unreadable[b.Error()] {
				unreadable[b.Error()] = true
				m.log.WarnContext(ctx, "cleanup skipped an unreadable session", "err", b)
			}
		}
		rep.Unreadable = len(unreadable)
		return sessions, nil
	}

	expired, err := list(domain.SweepPending, now)
	if err != nil {
		return rep, err
	}
	for _, s := range expired {
		s.Status, s.StatusReason = domain.SessionExpired, ReasonSessionExpired
		if _, err := m.cfg.Store.UpdateSession(ctx, s); err == nil {
			rep.Expired++
		} else if !errors.Is(err, domain.ErrConflict) {
			return rep, fmt.Errorf("cleanup: expire %s: %w", s.ID, err)
		} else {
			continue
		}
		// A tool call parked on this consent learns it will not come.
		if err := m.emitExpired(ctx, s); err != nil {
			m.log.WarnContext(ctx, "cleanup: auth.expired not queued", "authSessionId", s.ID, "err", err)
		}
	}

	// A callback that died after claiming its session left it exchanging:
	// settle it once the exchange surely is over.
	interrupted, err := list(domain.SweepExchanging, now.Add(-exchangeGrace))
	if err != nil {
		return rep, err
	}
	for _, s := range interrupted {
		done, err := m.recoverExchange(ctx, s)
		if err != nil {
			return rep, fmt.Errorf("cleanup: settle exchanging %s: %w", s.ID, err)
		}
		if done {
			rep.Recovered++
		}
	}

	undelivered, err := list(domain.SweepEventPending, time.Time{})
	if err != nil {
		return rep, err
	}
	for _, s := range undelivered {
		g, err := m.cfg.Store.GetGrant(ctx, GrantID(s.OAuthAppRef, s.Subject))
		if err != nil {
			m.log.WarnContext(ctx, "cleanup: grant of pending event unreadable", "authSessionId", s.ID, "err", err)
			continue
		}
		if err := m.emitGranted(ctx, s, g); err != nil {
			m.log.WarnContext(ctx, "cleanup: auth.granted still not queued", "authSessionId", s.ID, "err", err)
			continue
		}
		s.EventPending = false
		if _, err := m.cfg.Store.UpdateSession(ctx, s); err != nil && !errors.Is(err, domain.ErrConflict) {
			return rep, fmt.Errorf("cleanup: mark event delivered %s: %w", s.ID, err)
		}
		rep.EventsDelivered++
	}

	old, err := list(domain.SweepFinished, now.Add(-m.cfg.SessionRetention))
	if err != nil {
		return rep, err
	}
	for _, s := range old {
		if err := m.cfg.Store.DeleteSession(ctx, s.ID); err == nil {
			rep.Deleted++
		} else if !errors.Is(err, domain.ErrNotFound) {
			return rep, fmt.Errorf("cleanup: delete %s: %w", s.ID, err)
		}
	}
	return rep, nil
}

// exchangeGrace is how long after its expiry a session may still be
// exchanging: a callback arrives before the expiry and its exchange and
// subject check are each bounded by the provider timeout. Past it, the
// callback that claimed the session has died.
const exchangeGrace = 2 * time.Minute

// ReasonExchangeInterrupted marks a session whose callback died between
// claiming it and storing the grant.
const ReasonExchangeInterrupted = "exchange_interrupted"

// recoverExchange settles a session a crashed callback left exchanging:
// when a grant for its (app, subject) was stored since the session began,
// the consent was kept (the file store's grant write landed, the session's
// did not): the session completes and auth.granted goes out. Otherwise
// nothing was stored and the session fails. false when another writer
// settled it first.
func (m *Manager) recoverExchange(ctx context.Context, s domain.Session) (bool, error) {
	g, err := m.cfg.Store.GetGrant(ctx, GrantID(s.OAuthAppRef, s.Subject))
	kept := err == nil && !g.Revoked && !g.UpdatedAt.Before(s.CreatedAt)
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		m.log.WarnContext(ctx, "cleanup: grant of an interrupted exchange unreadable; session failed", "authSessionId", s.ID, "err", err)
	}
	if !kept {
		s.Status, s.StatusReason = domain.SessionFailed, ReasonExchangeInterrupted
	} else {
		now := m.now().UTC()
		s.Status, s.CompletedAt, s.EventPending = domain.SessionCompleted, &now, true
	}
	s, err = m.cfg.Store.UpdateSession(ctx, s)
	if errors.Is(err, domain.ErrConflict) {
		return false, nil
	}
	if err != nil || !kept {
		return err == nil, err
	}
	m.log.InfoContext(ctx, "cleanup: interrupted exchange had stored its grant; session completed", "authSessionId", s.ID)
	if err := m.emitGranted(ctx, s, g); err != nil {
		m.log.WarnContext(ctx, "cleanup: auth.granted not queued; next sweep retries", "authSessionId", s.ID, "err", err)
		return true, nil
	}
	s.EventPending = false
	if _, err := m.cfg.Store.UpdateSession(ctx, s); err != nil && !errors.Is(err, domain.ErrConflict) {
		return true, err
	}
	return true, nil
}

// PendingBlock builds the auth.pending context block for one agent
// instance, named by its whole resume target (swarm, instance key, agent):
// the pending, unexpired sessions that resume exactly that target, with no
// verifier, token or sealed value (each link carries its own state, as it
// must to work). Its links are live consent
// links — whoever completes one binds the grant and wakes the parked
// turn — so another swarm that shares the instance key and Agent name
// never sees them. It reads the store's index of that target's pending
// sessions, never every session. An incomplete target is an error
// wrapping domain.ErrInvalidID.
func (m *Manager) PendingBlock(ctx context.Context, target domain.ResumeTarget) (AuthPendingBlock, error) {
	block := AuthPendingBlock{Type: "auth.pending", Items: []AuthPendingItem{}}
	if err := target.Validate(); err != nil {
		return block, fmt.Errorf("auth.pending: %w", err)
	}
	// Unreadable sessions are left out: their links could not be rebuilt
	// either, and the sweep reports them.
	sessions, _, err := m.cfg.Store.ListPendingSessions(ctx, target, m.now())
	if err != nil {
		return block, fmt.Errorf("auth.pending: list pending sessions: %w", err)
	}
	// The store answers for target; a session of any other target (a
	// store that filters loosely) must still never reach the block.
	sessions = slices.DeleteFunc(sessions, func(s domain.Session) bool { return s.Resume.Target() != target })
	// An agent that asked for different scopes, or again when its session
	// was about to expire, has several pending sessions for one (app,
	// subject); the user needs one link: the newest.
	newest := map[string]domain.Session{}
	for _, s := range sessions {
		k := s.OAuthAppRef.String() + "\x00" + s.Subject
		if cur, ok := newest[k]; !ok || s.CreatedAt.After(cur.CreatedAt) {
			newest[k] = s
		}
	}
	keys := make([]string, 0, len(newest))
	for k := range newest {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		s := newest[k]
		link, err := m.linkOf(ctx, s)
		if err != nil {
			// Its callback could not match the state either: no link.
			m.log.WarnContext(ctx, "auth.pending skipped a session whose link cannot be rebuilt", "authSessionId", s.ID, "err", err)
			continue
		}
		item := AuthPendingItem{
			AuthSessionID:    s.ID,
			OAuthAppRef:      s.OAuthAppRef,
			Provider:         s.Provider,
			SubjectMode:      s.SubjectMode,
			AuthorizationURL: link,
			ExpiresAt:        s.ExpiresAt,
		}
		var prompt *DeviceCodePrompt
		if d := s.Flow.DeviceCode; d != nil {
			item.DeviceCode = &PendingDevice{VerificationURI: d.VerificationURI, UserCode: d.UserCode}
			prompt = &DeviceCodePrompt{VerificationURI: d.VerificationURI, UserCode: d.UserCode}
		}
		item.Message = promptMessage(s.Provider, prompt)
		block.Items = append(block.Items, item)
	}
	return block, nil
}
