package storetest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// The domain.SessionIndex part of the suite. Its main risk is an index
// that does not follow a status change: every way a session leaves pending
// (claim, failure, expiry, completion, deletion, time) is tried, and the
// session must leave the reuse lookup, the pending list and its sweep set.
//
// A store's index may follow its records with a lag (DynamoDB's global
// secondary indexes): what the port allows to lag is asserted with
// eventually, what it does not (a stale entry never yields a session that
// has left pending or its set) at once.

// indexWait bounds how long eventually waits for a lagging index.
const indexWait = 5 * time.Second

// eventually retries check until it returns "" or indexWait passes, then
// fails with the last complaint.
func eventually(t *testing.T, check func() string) {
	t.Helper()
	deadline := time.Now().Add(indexWait)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// newReuseKey returns a reuse key no other test uses.
func newReuseKey() string {
	return domain.SessionReuseKey(domain.ObjectRef{Kind: "OAuthApp", Name: "storetest"}, NewSessionID(), []string{"read"}, domain.ResumeInfo{})
}

// indexSession is a pending session created at t0 that expires ten
// minutes later, with no pending event and no reuse key.
func indexSession() domain.Session {
	s := SampleSession(NewSessionID())
	s.EventPending = false
	return s
}

// reusable is an indexSession holding key.
func reusable(key string) domain.Session {
	s := indexSession()
	s.ReuseKey = key
	return s
}

// sessionDiff describes how got differs from want, or is "".
func sessionDiff(got, want domain.Session) string {
	if g, w := normSession(got), normSession(want); !reflect.DeepEqual(g, w) {
		return fmt.Sprintf("%s differs\n got: %+v\nwant: %+v", got.ID, g, w)
	}
	return ""
}

func ids(sessions []domain.Session) []string {
	out := make([]string, len(sessions))
	for i, s := range sessions {
		out[i] = s.ID
	}
	return out
}

func sortedIDs(sessions ...domain.Session) []string {
	out := ids(sessions)
	slices.Sort(out)
	return out
}

func testReuseKey(t *testing.T, s domain.Store) {
	ctx := context.Background()
	key := newReuseKey()
	_, err := s.FindPendingSession(ctx, key, t0)
	wantErr(t, err, domain.ErrNotFound, "FindPendingSession on an empty store")
	for _, bad := range []string{"", "rk-../../x", "as-0123456789abcdef0123456789abcdef", strings.ToUpper(key)} {
		_, err = s.FindPendingSession(ctx, bad, t0)
		wantErr(t, err, domain.ErrInvalidID, fmt.Sprintf("FindPendingSession(%q)", bad))
		wantErr(t, s.CreateSession(ctx, reusable(bad+"x")), domain.ErrInvalidID, fmt.Sprintf("CreateSession with reuse key %q", bad+"x"))
	}

	a := reusable(key)
	noErr(t, s.CreateSession(ctx, a), "CreateSession with a reuse key")
	got, err := s.FindPendingSession(ctx, key, t0)
	noErr(t, err, "FindPendingSession")
	sameSession(t, got, a, "FindPendingSession")
	lastUse := a.ExpiresAt.Add(-domain.SessionReuseMargin - time.Millisecond)
	got, err = s.FindPendingSession(ctx, key, lastUse)
	noErr(t, err, "FindPendingSession just before the margin")
	if got.ID != a.ID {
		t.Fatalf("FindPendingSession just before the margin: %s, want %s", got.ID, a.ID)
	}
	_, err = s.FindPendingSession(ctx, key, a.ExpiresAt.Add(-domain.SessionReuseMargin))
	wantErr(t, err, domain.ErrNotFound, "FindPendingSession with only the margin left")
	_, err = s.FindPendingSession(ctx, newReuseKey(), t0)
	wantErr(t, err, domain.ErrNotFound, "FindPendingSession of another key")

	// While a holds the key, no other session takes it, and none is
	// written.
	b := reusable(key)
	b.CreatedAt = t0.Add(time.Minute)
	wantErr(t, s.CreateSession(ctx, b), domain.ErrConflict, "CreateSession with a key a pending session holds")
	_, err = s.GetSession(ctx, b.ID)
	wantErr(t, err, domain.ErrNotFound, "GetSession of the refused session")
	got, err = s.FindPendingSession(ctx, key, b.CreatedAt)
	noErr(t, err, "FindPendingSession after the refused create")
	if got.ID != a.ID {
		t.Fatalf("after the refused create the key finds %s, want %s", got.ID, a.ID)
	}
	// Sessions without a key never take or find one.
	noErr(t, s.CreateSession(ctx, indexSession()), "CreateSession without a reuse key")
	noErr(t, s.CreateSession(ctx, indexSession()), "CreateSession without a reuse key")

	// Once a has no more than the margin left, a new session takes the key.
	c := reusable(key)
	c.CreatedAt = a.ExpiresAt.Add(-domain.SessionReuseMargin)
	c.ExpiresAt = c.CreatedAt.Add(10 * time.Minute)
	noErr(t, s.CreateSession(ctx, c), "CreateSession once the holder is within the margin")
	got, err = s.FindPendingSession(ctx, key, c.CreatedAt)
	noErr(t, err, "FindPendingSession of the new holder")
	sameSession(t, got, c, "FindPendingSession of the new holder")
}

// testReuseKeyLeavesPending: whichever way a session leaves pending, the
// reuse lookup stops returning it at once, and the key is free again.
func testReuseKeyLeavesPending(t *testing.T, s domain.Store) {
	ctx := context.Background()
	update := func(st domain.SessionStatus) func(t *testing.T, sess domain.Session) time.Time {
		return func(t *testing.T, sess domain.Session) time.Time {
			sess.Status = st
			_, err := s.UpdateSession(ctx, sess)
			noErr(t, err, "UpdateSession to "+string(st))
			return t0.Add(time.Minute)
		}
	}
	for _, tc := range []struct {
		name string
		// leave moves sess out of pending and returns a time from which
		// on the key must be free.
		leave func(t *testing.T, sess domain.Session) time.Time
	}{
		{"claimed", update(domain.SessionExchanging)},
		{"failed", update(domain.SessionFailed)},
		{"marked expired", update(domain.SessionExpired)},
		{"completed", func(t *testing.T, sess domain.Session) time.Time {
			_, _, err := s.CompleteSession(ctx, sess.ID, t0.Add(time.Minute), SampleGrant(NewGrantID()))
			noErr(t, err, "CompleteSession")
			return t0.Add(time.Minute)
		}},
		{"claimed and completed", func(t *testing.T, sess domain.Session) time.Time {
			sess.Status = domain.SessionExchanging
			_, err := s.UpdateSession(ctx, sess)
			noErr(t, err, "claim")
			_, _, err = s.CompleteSession(ctx, sess.ID, t0.Add(time.Minute), SampleGrant(NewGrantID()))
			noErr(t, err, "CompleteSession")
			return t0.Add(time.Minute)
		}},
		{"deleted", func(t *testing.T, sess domain.Session) time.Time {
			noErr(t, s.DeleteSession(ctx, sess.ID), "DeleteSession")
			return t0.Add(time.Minute)
		}},
		{"expires", func(t *testing.T, sess domain.Session) time.Time { return sess.ExpiresAt }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := newReuseKey()
			a := reusable(key)
			noErr(t, s.CreateSession(ctx, a), "CreateSession")
			read, err := s.GetSession(ctx, a.ID)
			noErr(t, err, "GetSession")
			free := tc.leave(t, read)
			_, err = s.FindPendingSession(ctx, key, free)
			wantErr(t, err, domain.ErrNotFound, "FindPendingSession after the session left pending")
			b := reusable(key)
			b.CreatedAt, b.ExpiresAt = free, free.Add(10*time.Minute)
			noErr(t, s.CreateSession(ctx, b), "CreateSession with the key once free")
			got, err := s.FindPendingSession(ctx, key, free)
			noErr(t, err, "FindPendingSession of the new session")
			if got.ID != b.ID {
				t.Fatalf("the key finds %s, want the new session %s", got.ID, b.ID)
			}
		})
	}
}

// testReuseKeyRace: of concurrent creators with one key exactly one
// writes a session; the others learn that the key is taken.
func testReuseKeyRace(t *testing.T, s domain.Store) {
	ctx := context.Background()
	key := newReuseKey()
	racers := make([]domain.Session, 20)
	for i := range racers {
		racers[i] = reusable(key)
	}
	errs := race(len(racers), func(i int) error { return s.CreateSession(ctx, racers[i]) })
	w := oneWinner(t, errs, "CreateSession race on one reuse key")
	got, err := s.FindPendingSession(ctx, key, t0)
	noErr(t, err, "FindPendingSession")
	if got.ID != racers[w].ID {
		t.Fatalf("the key finds %s, want the winner %s", got.ID, racers[w].ID)
	}
	for i, r := range racers {
		if _, err := s.GetSession(ctx, r.ID); i != w && err == nil {
			t.Fatalf("losing racer %d's session was written", i)
		}
	}
}

// pendingCheck returns a check for eventually: ListPendingSessions of
// target at at lists exactly want, each as created.
func pendingCheck(s domain.Store, target domain.ResumeTarget, at time.Time, want ...domain.Session) func() string {
	return func() string {
		got, bad, err := s.ListPendingSessions(context.Background(), target, at)
		if err != nil || len(bad) > 0 {
			return fmt.Sprintf("ListPendingSessions(%+v): %v, unreadable %v", target, err, bad)
		}
		slices.SortFunc(got, func(a, b domain.Session) int { return strings.Compare(a.ID, b.ID) })
		if g, w := ids(got), sortedIDs(want...); !slices.Equal(g, w) {
			return fmt.Sprintf("ListPendingSessions(%+v) = %v, want %v", target, g, w)
		}
		byID := map[string]domain.Session{}
		for _, w := range want {
			byID[w.ID] = w
		}
		for _, g := range got {
			if d := sessionDiff(g, byID[g.ID]); d != "" {
				return "listed session " + d
			}
		}
		return ""
	}
}

// swarmTarget is the resume target of agent in swarm's instance.
func swarmTarget(swarm, instance, agent string) domain.ResumeTarget {
	return domain.ResumeTarget{SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: swarm}, InstanceKey: instance, AgentName: agent}
}

// pendingFor creates an indexSession resuming target, changed by mut.
func pendingFor(t *testing.T, s domain.Store, target domain.ResumeTarget, mut func(*domain.Session)) domain.Session {
	t.Helper()
	sess := indexSession()
	sess.Resume.SwarmRef, sess.Resume.InstanceKey, sess.Resume.AgentName = target.SwarmRef, target.InstanceKey, target.AgentName
	if mut != nil {
		mut(&sess)
	}
	noErr(t, s.CreateSession(context.Background(), sess), "CreateSession")
	return sess
}

func testPendingForInstance(t *testing.T, s domain.Store) {
	ctx := context.Background()
	inst := "1700000000." + NewSessionID()[3:9]
	mk := func(instance, agent string, mut func(*domain.Session)) domain.Session {
		t.Helper()
		return pendingFor(t, s, swarmTarget("default", instance, agent), mut)
	}
	tg := func(instance, agent string) domain.ResumeTarget { return swarmTarget("default", instance, agent) }
	at := t0.Add(time.Minute)
	p1 := mk(inst, "planner", nil)
	p2 := mk(inst, "planner", func(s *domain.Session) { s.ExpiresAt = at.Add(time.Millisecond) })
	p3 := mk(inst, "planner", func(s *domain.Session) { s.ReuseKey = newReuseKey() })
	other := mk(inst, "coder", nil)
	elsewhere := mk(inst+"0", "planner", nil)
	mk(inst, "planner", func(s *domain.Session) { s.ExpiresAt = at }) // expired at at
	mk(inst, "planner", func(s *domain.Session) { s.Status = domain.SessionExchanging })
	mk(inst, "planner", func(s *domain.Session) { s.Status = domain.SessionCompleted })
	mk(inst, "planner", func(s *domain.Session) { s.Status = domain.SessionFailed })
	mk(inst, "planner", func(s *domain.Session) { s.Status = domain.SessionExpired })
	// Targets whose parts, run together, are alike.
	ab := mk("a#b", "c", nil)
	bc := mk("a", "b#c", nil)

	eventually(t, pendingCheck(s, tg(inst, "planner"), at, p1, p2, p3))
	eventually(t, pendingCheck(s, tg(inst, "coder"), at, other))
	eventually(t, pendingCheck(s, tg(inst+"0", "planner"), at, elsewhere))
	eventually(t, pendingCheck(s, tg("a#b", "c"), at, ab))
	eventually(t, pendingCheck(s, tg("a", "b#c"), at, bc))
	eventually(t, pendingCheck(s, tg(inst, "nobody"), at))
	eventually(t, pendingCheck(s, tg(inst, "planner"), at.Add(time.Millisecond), p1, p3))

	// Every way of leaving pending takes a session off the list.
	claimed := p1
	claimed.Status = domain.SessionExchanging
	_, err := s.UpdateSession(ctx, claimed)
	noErr(t, err, "claim")
	eventually(t, pendingCheck(s, tg(inst, "planner"), at, p2, p3))
	_, _, err = s.CompleteSession(ctx, p2.ID, at, SampleGrant(NewGrantID()))
	noErr(t, err, "CompleteSession")
	eventually(t, pendingCheck(s, tg(inst, "planner"), at, p3))
	noErr(t, s.DeleteSession(ctx, p3.ID), "DeleteSession")
	eventually(t, pendingCheck(s, tg(inst, "planner"), at))
	failed := other
	failed.Status = domain.SessionFailed
	_, err = s.UpdateSession(ctx, failed)
	noErr(t, err, "fail")
	eventually(t, pendingCheck(s, tg(inst, "coder"), at))
	expired := elsewhere
	expired.Status = domain.SessionExpired
	_, err = s.UpdateSession(ctx, expired)
	noErr(t, err, "expire")
	eventually(t, pendingCheck(s, tg(inst+"0", "planner"), at))
}

// testPendingPerTarget: the pending list is keyed by the whole resume
// target. Two swarms that share an Agent name and an instance key (the
// attack of issue 17: swarm "other" was shown, and completed, swarm
// "victim"'s consent link) each list only their own sessions, and so do
// targets whose parts, run together, read alike.
func testPendingPerTarget(t *testing.T, s domain.Store) {
	ctx := context.Background()
	inst := "C" + NewSessionID()[3:11]
	at := t0.Add(time.Minute)
	victimT := swarmTarget("victim", inst, "assistant")
	victim := pendingFor(t, s, victimT, nil)
	victimUser := pendingFor(t, s, victimT, func(s *domain.Session) { s.SubjectMode = domain.SubjectModeGlobal })
	otherT := swarmTarget("other", inst, "assistant")
	kindT := victimT
	kindT.SwarmRef.Kind = "Team"
	kind := pendingFor(t, s, kindT, nil)
	// Sessions whose resume names no complete target (none, or the
	// instance and agent without a swarm, as before issue 17) are in no
	// target's list.
	pendingFor(t, s, domain.ResumeTarget{InstanceKey: inst, AgentName: "assistant"}, nil)
	pendingFor(t, s, domain.ResumeTarget{}, nil)
	// Parts run together alike across the swarm's kind and name, the
	// swarm and the instance key, the instance key and the agent.
	shifted := []domain.ResumeTarget{
		{SwarmRef: domain.ObjectRef{Kind: "Swarmv", Name: "ictim"}, InstanceKey: inst, AgentName: "assistant"},
		swarmTarget("victim"+inst[:1], inst[1:], "assistant"),
		swarmTarget("victim", inst+"a", "ssistant"),
	}
	var shiftedSessions []domain.Session
	for _, tg := range shifted {
		shiftedSessions = append(shiftedSessions, pendingFor(t, s, tg, nil))
	}

	eventually(t, pendingCheck(s, victimT, at, victim, victimUser))
	eventually(t, pendingCheck(s, kindT, at, kind))
	for i, tg := range shifted {
		eventually(t, pendingCheck(s, tg, at, shiftedSessions[i]))
	}
	// With every session listed under its own target, none is under
	// another: asserted at once, not eventually (no lag excuses it).
	noLag := func(check func() string) {
		t.Helper()
		if msg := check(); msg != "" {
			t.Fatal(msg)
		}
	}
	noLag(pendingCheck(s, otherT, at))
	noLag(pendingCheck(s, victimT, at, victim, victimUser))

	// The other swarm's own consent is its own, and leaves the victim's
	// list as it was.
	mine := pendingFor(t, s, otherT, nil)
	eventually(t, pendingCheck(s, otherT, at, mine))
	noLag(pendingCheck(s, victimT, at, victim, victimUser))

	for name, tg := range map[string]domain.ResumeTarget{
		"no swarm":      {InstanceKey: inst, AgentName: "assistant"},
		"no swarm kind": {SwarmRef: domain.ObjectRef{Name: "victim"}, InstanceKey: inst, AgentName: "assistant"},
		"no instance":   swarmTarget("victim", "", "assistant"),
		"no agent":      swarmTarget("victim", inst, ""),
		"nothing":       {},
	} {
		_, _, err := s.ListPendingSessions(ctx, tg, at)
		wantErr(t, err, domain.ErrInvalidID, "ListPendingSessions of an incomplete target ("+name+")")
	}
}

// sweepCheck returns a check for eventually: ListSweepSessions(set,
// expiredBy) lists exactly want, in that order, each as stored.
func sweepCheck(s domain.Store, set domain.SweepSet, expiredBy time.Time, want ...domain.Session) func() string {
	return func() string {
		got, bad, err := s.ListSweepSessions(context.Background(), set, expiredBy)
		if err != nil || len(bad) > 0 {
			return fmt.Sprintf("ListSweepSessions(%s, %v): %v, unreadable %v", set, expiredBy, err, bad)
		}
		if g, w := ids(got), ids(want); !slices.Equal(g, w) {
			return fmt.Sprintf("ListSweepSessions(%s, %v) = %v, want %v", set, expiredBy, g, w)
		}
		for i := range got {
			stored, err := s.GetSession(context.Background(), got[i].ID)
			if err != nil {
				return fmt.Sprintf("GetSession %s: %v", got[i].ID, err)
			}
			if d := sessionDiff(got[i], stored); d != "" {
				return "listed session is not as stored: " + d
			}
		}
		return ""
	}
}

// notIn checks at once that set does not list sess: a session that has
// left a set is never returned from it.
func notIn(t *testing.T, s domain.Store, set domain.SweepSet, sess domain.Session, what string) {
	t.Helper()
	got, _, err := s.ListSweepSessions(context.Background(), set, time.Time{})
	noErr(t, err, "ListSweepSessions")
	if slices.Contains(ids(got), sess.ID) {
		t.Fatalf("%s: ListSweepSessions(%s) still lists %s", what, set, sess.ID)
	}
}

func testSweepSets(t *testing.T, s domain.Store) {
	ctx := context.Background()
	now := t0.Add(48 * time.Hour)
	mk := func(st domain.SessionStatus, eventPending bool, expiresAt time.Time) domain.Session {
		t.Helper()
		sess := indexSession()
		sess.Status, sess.EventPending = st, eventPending
		sess.CreatedAt, sess.ExpiresAt = expiresAt.Add(-10*time.Minute), expiresAt
		noErr(t, s.CreateSession(ctx, sess), "CreateSession")
		return sess
	}
	pendingOld := mk(domain.SessionPending, false, now.Add(-time.Minute))
	pendingLive := mk(domain.SessionPending, false, now.Add(5*time.Minute))
	exchanging := mk(domain.SessionExchanging, false, now.Add(-2*time.Minute))
	event := mk(domain.SessionCompleted, true, now.Add(-47*time.Hour))
	doneOld := mk(domain.SessionCompleted, false, now.Add(-25*time.Hour))
	failedOld := mk(domain.SessionFailed, false, now.Add(-30*time.Hour))
	expiredNew := mk(domain.SessionExpired, false, now.Add(-time.Hour))
	eventually(t, sweepCheck(s, domain.SweepPending, now, pendingOld))
	eventually(t, sweepCheck(s, domain.SweepPending, pendingOld.ExpiresAt, pendingOld))
	eventually(t, sweepCheck(s, domain.SweepPending, pendingOld.ExpiresAt.Add(-time.Millisecond)))
	eventually(t, sweepCheck(s, domain.SweepPending, time.Time{}, pendingOld, pendingLive))
	eventually(t, sweepCheck(s, domain.SweepExchanging, time.Time{}, exchanging))
	eventually(t, sweepCheck(s, domain.SweepExchanging, now.Add(-time.Hour)))
	eventually(t, sweepCheck(s, domain.SweepEventPending, time.Time{}, event))
	eventually(t, sweepCheck(s, domain.SweepFinished, now.Add(-24*time.Hour), failedOld, doneOld))
	eventually(t, sweepCheck(s, domain.SweepFinished, time.Time{}, failedOld, doneOld, expiredNew))
}

// testSweepSetsFollowWrites moves sessions through their sets with every
// write that changes one, and checks that they leave the old set at once
// and show up in the new one.
func testSweepSetsFollowWrites(t *testing.T, s domain.Store) {
	ctx := context.Background()
	a := indexSession()
	noErr(t, s.CreateSession(ctx, a), "CreateSession")
	eventually(t, sweepCheck(s, domain.SweepPending, time.Time{}, a))

	claimed := a
	claimed.Status = domain.SessionExchanging
	claimed, err := s.UpdateSession(ctx, claimed)
	noErr(t, err, "claim")
	notIn(t, s, domain.SweepPending, a, "after the claim")
	eventually(t, sweepCheck(s, domain.SweepExchanging, time.Time{}, claimed))

	_, _, err = s.CompleteSession(ctx, a.ID, t0.Add(time.Minute), SampleGrant(NewGrantID()))
	noErr(t, err, "CompleteSession")
	notIn(t, s, domain.SweepExchanging, a, "after completion")
	eventually(t, sweepCheck(s, domain.SweepFinished, time.Time{}, a))

	// A session whose record says its event is pending completes into the
	// event set, and leaves it once the event is sent.
	b := indexSession()
	b.EventPending = true
	b.ExpiresAt = a.ExpiresAt.Add(time.Second)
	noErr(t, s.CreateSession(ctx, b), "CreateSession")
	_, _, err = s.CompleteSession(ctx, b.ID, t0.Add(time.Minute), SampleGrant(NewGrantID()))
	noErr(t, err, "CompleteSession")
	notIn(t, s, domain.SweepPending, b, "after completion")
	eventually(t, sweepCheck(s, domain.SweepEventPending, time.Time{}, b))
	sent, err := s.GetSession(ctx, b.ID)
	noErr(t, err, "GetSession")
	sent.EventPending = false
	_, err = s.UpdateSession(ctx, sent)
	noErr(t, err, "UpdateSession: event sent")
	notIn(t, s, domain.SweepEventPending, b, "after the event was sent")
	eventually(t, sweepCheck(s, domain.SweepFinished, time.Time{}, a, b))

	c := indexSession()
	noErr(t, s.CreateSession(ctx, c), "CreateSession")
	expired := c
	expired.Status = domain.SessionExpired
	_, err = s.UpdateSession(ctx, expired)
	noErr(t, err, "expire")
	notIn(t, s, domain.SweepPending, c, "after expiry")

	noErr(t, s.DeleteSession(ctx, b.ID), "DeleteSession")
	notIn(t, s, domain.SweepFinished, b, "after deletion")
}
