package engine

import (
	"context"
	"testing"

	"github.com/agentauth/agentauth/shared/turn"
)

// revoked delivers auth.revoked naming session, as the OAuth core queues
// it when a call's grant was refused and revoked.
func (f *fixture) revoked(t *testing.T, id, session string) {
	t.Helper()
	ev := f.event(id, `{"type":"auth.revoked","grantId":"grant-1","reason":"refresh_rejected","authSessionId":"`+session+`"}`)
	ev.Metadata = map[string]string{"eventType": EventAuthRevoked, "authSessionId": session, "grantId": "grant-1"}
	if err := f.e.Handle(context.Background(), ev); err != nil {
		t.Fatalf("Handle %s: %v", id, err)
	}
}

// TestAuthRevokedIsRecorded: auth.revoked is recorded and runs nothing —
// it starts no turn, waits in no backlog, and leaves a call parked on
// the consent it names parked, for that consent's auth.granted to resume
// once.
func TestAuthRevokedIsRecorded(t *testing.T) {
	t.Run("an idle instance", func(t *testing.T) {
		f := newFixture(t, say("hello alice"))
		f.send(t, "ev-1", "hi")
		f.revoked(t, "revoked:as-new", "as-new")
		f.revoked(t, "revoked:as-new", "as-new") // a duplicate
		st := f.state(t)
		if len(st.Turns) != 1 || f.model.count() != 1 || len(st.Backlog) != 0 || st.Instance.ActiveTurn != "" || !st.HasProcessed("revoked:as-new") {
			t.Fatalf("%d turns, %d model calls, backlog %d, active %q: want the one turn, nothing queued, the event recorded",
				len(st.Turns), f.model.count(), len(st.Backlog), st.Instance.ActiveTurn)
		}
	})
	t.Run("a call parked on the consent it names", func(t *testing.T) {
		f := newFixture(t, callTools("whoami"), say("you are alice"))
		tools := newConsentTools(map[string]string{"whoami": "as-new"})
		f.e.Tools = tools
		f.send(t, "ev-1", "who am I?")
		f.revoked(t, "revoked:as-new", "as-new")
		f.revoked(t, "revoked:as-other", "as-other") // another consent: nothing waits for it
		st := f.state(t)
		tr := lastTurn(st)
		if tr.Status != turn.TurnParked || len(st.Backlog) != 0 || tools.ran("whoami") != 0 || f.model.count() != 1 {
			t.Fatalf("turn %s, backlog %d, whoami ran %d, model calls %d: want the call still parked, nothing queued",
				tr.Status, len(st.Backlog), tools.ran("whoami"), f.model.count())
		}
		tools.grant("as-new")
		f.grantSession(t, "as-new", "as-new")
		tr = lastTurn(f.state(t))
		if tr.Status != turn.TurnCompleted || tr.Final != "you are alice" || tools.ran("whoami") != 1 {
			t.Fatalf("after the consent: turn %s %q, whoami ran %d", tr.Status, tr.Final, tools.ran("whoami"))
		}
	})
}
