package app_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/turntest"
	"github.com/agentauth/agentauth/shared/turn"
)

// stepClock is the engine's clock: it moves only when the test says.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// countedPlane is a turntest plane whose turn ends are counted in its own
// turn store's TurnStats (the file store), as Build wires it.
func countedPlane(t *testing.T, script ...turntest.Answer) (*turntest.Plane, turn.TurnStats, *stepClock) {
	t.Helper()
	p := turntest.New(t, script...)
	stats, ok := p.Engine.Store.(turn.TurnStats)
	if !ok {
		t.Fatalf("the plane's store %T keeps no turn stats", p.Engine.Store)
	}
	// Within the hour, so the turn's end stays in the hour it started.
	c := &stepClock{t: time.Now().UTC().Truncate(time.Hour).Add(-2*time.Hour + 10*time.Minute)}
	p.Engine.Now = c.now
	p.Turns.CountTurns(stats, nil)
	return p, stats, c
}

func hourOf(t *testing.T, stats turn.TurnStats, h time.Time) turn.HourStats {
	t.Helper()
	got, err := stats.Hours(context.Background(), h, h.Add(time.Hour))
	if err != nil || len(got) != 1 {
		t.Fatalf("hours: %v %v", got, err)
	}
	return got[0]
}

// TestCompletedTurnIsCounted: a scripted turn that completes counts once
// in the hour it ended, and a redelivery of its event adds nothing.
func TestCompletedTurnIsCounted(t *testing.T) {
	ctx := context.Background()
	p, stats, c := countedPlane(t, turntest.Say("hello"))
	ev, err := p.Turns.Post(ctx, "support", "k1", app.Incoming{Text: "hi", Auth: alice})
	if err != nil {
		t.Fatal(err)
	}
	p.Deliver(t)
	h := c.now().Truncate(time.Hour)
	if got := hourOf(t, stats, h); got.Completed != 1 || got.Failed != 0 || got.Parked != 0 || got.ParkedSeconds != 0 {
		t.Fatalf("hour %+v, want one completed turn", got)
	}
	if err := p.Engine.Handle(ctx, ev); err != nil { // the queue delivers it again
		t.Fatal(err)
	}
	if got := hourOf(t, stats, h); got.Completed != 1 {
		t.Errorf("after a redelivery: %+v", got)
	}
	if got := hourOf(t, stats, h.Add(-time.Hour)); got.Completed+got.Failed != 0 {
		t.Errorf("the hour before: %+v", got)
	}
}

// TestParkedTurnIsCounted: a turn that parks on consent for 90 s, is
// granted and completes counts as completed and parked, with its wait.
func TestParkedTurnIsCounted(t *testing.T) {
	ctx := context.Background()
	p, stats, c := countedPlane(t, turntest.Call("whoami", `{}`), turntest.Say("you are alice"))
	if _, err := p.Turns.Post(ctx, "support", "k2", app.Incoming{Text: "who am i", Auth: alice}); err != nil {
		t.Fatal(err)
	}
	p.Deliver(t)
	h := c.now().Truncate(time.Hour)
	if got := hourOf(t, stats, h); got.Completed+got.Failed != 0 {
		t.Fatalf("a parked turn counted: %+v", got)
	}
	c.advance(90 * time.Second)
	p.Tools.Grant()
	granted := domain.Event{ID: "as-1", SwarmRef: domain.ObjectRef{Kind: "Swarm", Name: "support"}, InstanceKey: "k2", AgentName: "assistant",
		Input: `{"type":"auth.granted"}`, Metadata: map[string]string{"authSessionId": "as-1"}}
	if err := p.Engine.Handle(ctx, granted); err != nil {
		t.Fatal(err)
	}
	p.Deliver(t)
	if got := hourOf(t, stats, h); got.Completed != 1 || got.Parked != 1 || got.ParkedSeconds != 90 {
		t.Fatalf("hour %+v, want one completed turn parked 90 s", got)
	}
}
