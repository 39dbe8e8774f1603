package turn

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn/message"
)

var t0 = time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)

func key() InstanceKey { return InstanceKey{Swarm: "s", Key: "k", Agent: "a"} }

func commitOver(s State, mut func(*Commit)) Commit {
	inst := s.Instance
	inst.Key, inst.Version = key(), s.Instance.Version+1
	c := Commit{Expect: s.Instance.Version, Instance: inst}
	if mut != nil {
		mut(&c)
	}
	return c
}

func TestApplyRefusesBadCommits(t *testing.T) {
	s := NewState()
	for _, tc := range []struct {
		name string
		c    Commit
		want error
	}{
		{"wrong version step", Commit{Instance: Instance{Key: key(), Version: 2}}, nil},
		{"bad key", Commit{Instance: Instance{Key: InstanceKey{Swarm: "s"}, Version: 1}}, domain.ErrInvalidID},
		{"stale", Commit{Expect: 3, Instance: Instance{Key: key(), Version: 4}}, ErrStale},
		{"call without id", commitOver(s, func(c *Commit) { c.Calls = []Call{{TurnID: "t"}} }), nil},
		{"event without type", commitOver(s, func(c *Commit) { c.Events = []TurnEvent{{TurnID: "t"}} }), nil},
		{"pop beyond the backlog", commitOver(s, func(c *Commit) { c.BacklogPop = 1 }), nil},
		{"new base without rebase", commitOver(s, func(c *Commit) { c.NewBase = make([]message.Message, 1) }), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Apply(s, tc.c)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if got.Instance.Version != s.Instance.Version {
				t.Fatal("a refused commit changed the state")
			}
		})
	}
}

// TestRebaseForgetsEndedTurns: the state an instance keeps is bounded:
// calls of ended turns go at a turn's end, and only the latest KeepTurns
// ended turns stay with their events.
func TestRebaseForgetsEndedTurns(t *testing.T) {
	s := NewState()
	var err error
	for i := range KeepTurns + 10 {
		id := fmt.Sprint("t", i)
		tr := Turn{ID: id, Status: TurnCompleted, StartedAt: t0.Add(time.Duration(i) * time.Minute)}
		s, err = Apply(s, commitOver(s, func(c *Commit) {
			c.Turn = &tr
			c.Calls = []Call{{ID: "c", TurnID: id, State: CallOK}}
			c.Events = []TurnEvent{{TurnID: id, Type: EvTurnCompleted}}
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
	running := Turn{ID: "live", Status: TurnParked, StartedAt: t0.Add(time.Hour)}
	s, err = Apply(s, commitOver(s, func(c *Commit) {
		c.Turn = &running
		c.Calls = []Call{{ID: "c", TurnID: "live", State: CallParked}}
		c.Rebase = true
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Calls) != 1 || s.Calls["live/c"].State != CallParked {
		t.Fatalf("calls after rebase: %v", s.Calls)
	}
	if len(s.Turns) != KeepTurns+1 || len(s.TurnEvents) != KeepTurns {
		t.Fatalf("%d turns, %d event lists kept", len(s.Turns), len(s.TurnEvents))
	}
	if _, kept := s.Turns["t0"]; kept {
		t.Fatal("the oldest ended turn was kept")
	}
	if _, kept := s.Turns[fmt.Sprint("t", KeepTurns+9)]; !kept {
		t.Fatal("the newest ended turn was dropped")
	}
}

func TestInstanceKeyValidate(t *testing.T) {
	for _, k := range []InstanceKey{{}, {Swarm: "s", Key: "a/b", Agent: "x"}, {Swarm: "s", Key: "k", Agent: "a\\b"}, {Swarm: "s", Key: "\x00", Agent: "a"},
		{Swarm: "s", Key: string(make([]byte, 201)), Agent: "a"}, {Swarm: "s\xff", Key: "k", Agent: "a"}, {Swarm: "s", Key: "k\xc3", Agent: "a"}} {
		if err := k.Validate(); !errors.Is(err, domain.ErrInvalidID) {
			t.Errorf("%q: %v", k.String(), err)
		}
	}
	for _, k := range []InstanceKey{{Swarm: "default", Key: "1700000000.000100", Agent: "planner"}, {Swarm: "팀", Key: "스레드-1", Agent: "도우미"}} {
		if err := k.Validate(); err != nil {
			t.Fatal(err)
		}
	}
}
