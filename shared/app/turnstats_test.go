package app

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn"
)

func TestParkedTime(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	at := func(typ string, sec int) turn.TurnEvent {
		return turn.TurnEvent{Type: typ, At: t0.Add(time.Duration(sec) * time.Second)}
	}
	for _, tc := range []struct {
		name   string
		events []turn.TurnEvent
		want   time.Duration
	}{
		{"never parked", []turn.TurnEvent{at(turn.EvTurnStarted, 0), at(turn.EvStepCompleted, 1), at(turn.EvTurnCompleted, 2)}, 0},
		{"parked and resumed", []turn.TurnEvent{at(turn.EvTurnStarted, 0), at(turn.EvTurnParked, 5), at(turn.EvTurnResumed, 35), at(turn.EvTurnCompleted, 40)}, 30 * time.Second},
		{"twice", []turn.TurnEvent{at(turn.EvTurnParked, 5), at(turn.EvTurnResumed, 15), at(turn.EvTurnParked, 20), at(turn.EvTurnResumed, 80), at(turn.EvTurnCompleted, 81)}, 70 * time.Second},
		{"two calls parked in one step", []turn.TurnEvent{at(turn.EvTurnParked, 5), at(turn.EvTurnParked, 6), at(turn.EvTurnResumed, 25)}, 20 * time.Second},
		{"interrupted while parked", []turn.TurnEvent{at(turn.EvTurnParked, 5), at(turn.EvTurnInterrupted, 65)}, time.Minute},
		{"failed while parked", []turn.TurnEvent{at(turn.EvTurnParked, 5), at(turn.EvTurnFailed, 7)}, 2 * time.Second},
		{"a resume without a park", []turn.TurnEvent{at(turn.EvTurnResumed, 5), at(turn.EvTurnCompleted, 9)}, 0},
		{"a clock that went back", []turn.TurnEvent{at(turn.EvTurnParked, 5), at(turn.EvTurnResumed, 3)}, 0},
		{"none", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parkedTime(tc.events); got != tc.want {
				t.Errorf("parkedTime = %v, want %v", got, tc.want)
			}
		})
	}
}

// statsRecorder is a TurnStats that remembers what it was told.
type statsRecorder struct {
	turns  []turn.Turn
	parked []float64
	err    error
}

func (r *statsRecorder) RecordTurnEnd(_ context.Context, t turn.Turn, parked float64) error {
	r.turns, r.parked = append(r.turns, t), append(r.parked, parked)
	return r.err
}

func (r *statsRecorder) Hours(context.Context, time.Time, time.Time) ([]turn.HourStats, error) {
	return nil, nil
}

// eventsStore is a turn.Store whose TurnEvents returns events (or err).
type eventsStore struct {
	turn.Store
	events []turn.TurnEvent
	err    error
}

func (s eventsStore) TurnEvents(_ context.Context, _ turn.InstanceKey, _ string, _ int64) (turn.Turn, []turn.TurnEvent, error) {
	return turn.Turn{}, s.events, s.err
}

func TestTurnStatsNotifier(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	end := t0.Add(time.Minute)
	stored := []turn.TurnEvent{{Type: turn.EvTurnParked, At: t0}, {Type: turn.EvTurnResumed, At: t0.Add(42 * time.Second)}, {Type: turn.EvTurnCompleted, At: end}}
	completed := turn.Turn{ID: "t1", Status: turn.TurnCompleted, EndedAt: &end}
	ctx := context.Background()

	t.Run("ends are recorded with the stored parked time", func(t *testing.T) {
		for _, typ := range []string{turn.EvTurnCompleted, turn.EvTurnFailed, turn.EvTurnInterrupted} {
			rec := &statsRecorder{}
			turnStats(rec, eventsStore{events: stored}, slog.New(slog.DiscardHandler))(ctx, completed, []turn.TurnEvent{{Type: typ, At: end}})
			if len(rec.turns) != 1 || rec.parked[0] != 42 || rec.turns[0].Error != nil {
				t.Errorf("%s: recorded %+v, parked %v", typ, rec.turns, rec.parked)
			}
		}
	})
	t.Run("other events are not", func(t *testing.T) {
		rec := &statsRecorder{}
		n := turnStats(rec, eventsStore{events: stored}, nil)
		for _, typ := range []string{turn.EvTurnStarted, turn.EvStepCompleted, turn.EvTurnParked, turn.EvTurnResumed, turn.EvToolFailed} {
			n(ctx, completed, []turn.TurnEvent{{Type: typ, At: end}})
		}
		if len(rec.turns) != 0 {
			t.Errorf("recorded %+v", rec.turns)
		}
	})
	t.Run("the step limit counts as failed, once", func(t *testing.T) {
		rec := &statsRecorder{}
		turnStats(rec, eventsStore{}, nil)(ctx, completed, []turn.TurnEvent{{Type: turn.EvStepLimitReached, At: end}, {Type: turn.EvTurnCompleted, At: end}})
		if len(rec.turns) != 1 || turn.StatsCompleted(rec.turns[0]) || rec.turns[0].Error.Code != "step_limit_reached" {
			t.Errorf("recorded %+v", rec.turns)
		}
	})
	t.Run("a failed events read records with the commit's events", func(t *testing.T) {
		rec := &statsRecorder{}
		var logs bytes.Buffer
		turnStats(rec, eventsStore{err: errors.New("store down")}, slog.New(slog.NewJSONHandler(&logs, nil)))(ctx, completed,
			[]turn.TurnEvent{{Type: turn.EvTurnParked, At: t0}, {Type: turn.EvTurnInterrupted, At: t0.Add(3 * time.Second)}})
		if len(rec.turns) != 1 || rec.parked[0] != 3 || !strings.Contains(logs.String(), "store down") {
			t.Errorf("recorded %+v parked %v; log %s", rec.turns, rec.parked, logs.String())
		}
	})
	t.Run("a failed record is logged, never panics or fails", func(t *testing.T) {
		rec := &statsRecorder{err: errors.New("table gone")}
		var logs bytes.Buffer
		turnStats(rec, eventsStore{events: stored}, slog.New(slog.NewJSONHandler(&logs, nil)))(ctx, completed, []turn.TurnEvent{{Type: turn.EvTurnCompleted, At: end}})
		if !strings.Contains(logs.String(), "was not recorded") || !strings.Contains(logs.String(), "table gone") {
			t.Errorf("log %s", logs.String())
		}
	})
}
