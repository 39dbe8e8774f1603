package turnstoretest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn"
)

// StatsPair is two handles on one TurnStats backing store that share
// nothing in memory (two Stores on one home, two Stores on one table), as
// two processes would be; B may be A when the store has no such thing.
type StatsPair struct{ A, B turn.TurnStats }

// RunStats runs the TurnStats suite against fresh stores from newStats.
// The hours it records are a day or two old: within turn.StatsRetention.
func RunStats(t *testing.T, newStats func(t *testing.T) StatsPair) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, StatsPair)
	}{
		{"ZeroFilled", testStatsZeroFilled},
		{"CompletedAndFailed", testStatsCompletedAndFailed},
		{"HourBoundaries", testStatsHourBoundaries},
		{"Idempotent", testStatsIdempotent},
		{"ConcurrentSameTurn", testStatsConcurrentSameTurn},
		{"ConcurrentTurns", testStatsConcurrentTurns},
		{"Parked", testStatsParked},
		{"Bound", testStatsBound},
		{"NotEnded", testStatsNotEnded},
		{"Expired", testStatsExpired},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStats(t)) })
	}
}

// statsBase is an hour two days ago: recent enough to be kept.
func statsBase() time.Time { return time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour) }

// EndedTurn is an ended turn of instance k for the stats suites: status
// completed, failed or interrupted, ended at end.
func EndedTurn(k turn.InstanceKey, id string, status turn.TurnStatus, end time.Time) turn.Turn {
	start := end.Add(-time.Minute)
	return turn.Turn{ID: id, Instance: k, Status: status, StartedAt: start, EndedAt: &end, TraceID: "trace-" + id}
}

func record(t *testing.T, s turn.TurnStats, tr turn.Turn, parked float64) {
	t.Helper()
	if err := s.RecordTurnEnd(context.Background(), tr, parked); err != nil {
		t.Fatalf("record turn %s: %v", tr.ID, err)
	}
}

func hours(t *testing.T, s turn.TurnStats, from, to time.Time) []turn.HourStats {
	t.Helper()
	got, err := s.Hours(context.Background(), from, to)
	if err != nil {
		t.Fatalf("hours [%s, %s): %v", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	return got
}

// wantHour compares one hour's figures (parked seconds to a millisecond:
// a store may keep them as decimal text).
func wantHour(t *testing.T, got, want turn.HourStats) {
	t.Helper()
	if !got.Hour.Equal(want.Hour) || got.Hour.Location() != time.UTC || got.Completed != want.Completed || got.Failed != want.Failed ||
		got.Parked != want.Parked || math.Abs(got.ParkedSeconds-want.ParkedSeconds) > 1e-3 {
		t.Errorf("hour = %+v,\n want %+v", got, want)
	}
}

func testStatsZeroFilled(t *testing.T, p StatsPair) {
	h := statsBase()
	record(t, p.A, EndedTurn(Key(t), "t1", turn.TurnCompleted, h.Add(2*time.Hour+time.Minute)), 0)
	got := hours(t, p.A, h, h.Add(4*time.Hour))
	if len(got) != 4 {
		t.Fatalf("%d hours, want 4: %+v", len(got), got)
	}
	for i, g := range got {
		want := turn.HourStats{Hour: h.Add(time.Duration(i) * time.Hour)}
		if i == 2 {
			want.Completed = 1
		}
		wantHour(t, g, want)
	}
	if got := hours(t, p.A, h, h); len(got) != 0 {
		t.Errorf("an empty range gave %d hours", len(got))
	}
	// An hour no one recorded in, alone: zero, not an error.
	wantHour(t, hours(t, p.B, h.Add(-time.Hour), h)[0], turn.HourStats{Hour: h.Add(-time.Hour)})
}

func testStatsCompletedAndFailed(t *testing.T, p StatsPair) {
	h := statsBase()
	k := Key(t)
	record(t, p.A, EndedTurn(k, "ok1", turn.TurnCompleted, h.Add(time.Minute)), 0)
	record(t, p.A, EndedTurn(k, "ok2", turn.TurnCompleted, h.Add(2*time.Minute)), 0)
	record(t, p.A, EndedTurn(k, "fail", turn.TurnFailed, h.Add(3*time.Minute)), 0)
	record(t, p.A, EndedTurn(k, "stop", turn.TurnInterrupted, h.Add(4*time.Minute)), 0)
	limit := EndedTurn(k, "limit", turn.TurnCompleted, h.Add(5*time.Minute))
	limit.Error = &turn.Failure{Code: "step_limit_reached", Message: "the turn reached maxStepsPerTurn"}
	record(t, p.B, limit, 0)
	wantHour(t, hours(t, p.A, h, h.Add(time.Hour))[0], turn.HourStats{Hour: h, Completed: 2, Failed: 3})
}

func testStatsHourBoundaries(t *testing.T, p StatsPair) {
	h := statsBase()
	k := Key(t)
	record(t, p.A, EndedTurn(k, "last", turn.TurnCompleted, h.Add(time.Hour-time.Nanosecond)), 0)
	record(t, p.A, EndedTurn(k, "first", turn.TurnCompleted, h.Add(time.Hour)), 0)
	// Another zone: counted in its UTC hour.
	record(t, p.A, EndedTurn(k, "zoned", turn.TurnFailed, h.Add(time.Hour+time.Minute).In(time.FixedZone("UTC+5:30", 5*3600+1800))), 0)
	got := hours(t, p.B, h.Add(30*time.Minute), h.Add(2*time.Hour))
	if len(got) != 2 {
		t.Fatalf("%d hours, want 2 (from rounded down to its hour)", len(got))
	}
	wantHour(t, got[0], turn.HourStats{Hour: h, Completed: 1})
	wantHour(t, got[1], turn.HourStats{Hour: h.Add(time.Hour), Completed: 1, Failed: 1})
}

func testStatsIdempotent(t *testing.T, p StatsPair) {
	h := statsBase()
	k := Key(t)
	tr := EndedTurn(k, "t1", turn.TurnCompleted, h.Add(time.Minute))
	record(t, p.A, tr, 12)
	record(t, p.A, tr, 12)
	record(t, p.B, tr, 12) // another process, no memory of the first
	// The same turn id on another instance is another turn.
	other := EndedTurn(Key(t), "t1", turn.TurnFailed, h.Add(time.Minute))
	other.Instance.Key += "-other"
	record(t, p.B, other, 0)
	record(t, p.A, other, 0)
	wantHour(t, hours(t, p.A, h, h.Add(time.Hour))[0], turn.HourStats{Hour: h, Completed: 1, Failed: 1, Parked: 1, ParkedSeconds: 12})
}

func testStatsConcurrentSameTurn(t *testing.T, p StatsPair) {
	h := statsBase()
	k := Key(t)
	const rounds = 5
	for i := range rounds {
		tr := EndedTurn(k, fmt.Sprintf("t%d", i), turn.TurnCompleted, h.Add(time.Duration(i)*time.Minute))
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for _, s := range []turn.TurnStats{p.A, p.B, p.A, p.B} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.RecordTurnEnd(context.Background(), tr, 1.5)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", i, err)
			}
		}
	}
	wantHour(t, hours(t, p.A, h, h.Add(time.Hour))[0], turn.HourStats{Hour: h, Completed: rounds, Parked: rounds, ParkedSeconds: 1.5 * rounds})
}

func testStatsConcurrentTurns(t *testing.T, p StatsPair) {
	h := statsBase()
	k := Key(t)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		s := p.A
		if i%2 == 1 {
			s = p.B
		}
		status := turn.TurnCompleted
		if i%4 == 0 {
			status = turn.TurnFailed
		}
		tr := EndedTurn(k, fmt.Sprintf("t%d", i), status, h.Add(time.Duration(i)*time.Second))
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- s.RecordTurnEnd(context.Background(), tr, 0)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantHour(t, hours(t, p.B, h, h.Add(time.Hour))[0], turn.HourStats{Hour: h, Completed: n - n/4, Failed: n / 4})
}

func testStatsParked(t *testing.T, p StatsPair) {
	h := statsBase()
	k := Key(t)
	record(t, p.A, EndedTurn(k, "p1", turn.TurnCompleted, h.Add(time.Minute)), 90)
	record(t, p.A, EndedTurn(k, "p2", turn.TurnFailed, h.Add(2*time.Minute)), 30.25)
	record(t, p.A, EndedTurn(k, "np", turn.TurnCompleted, h.Add(3*time.Minute)), 0)
	wantHour(t, hours(t, p.B, h, h.Add(time.Hour))[0], turn.HourStats{Hour: h, Completed: 2, Failed: 1, Parked: 2, ParkedSeconds: 120.25})
}

func testStatsBound(t *testing.T, p StatsPair) {
	h := statsBase()
	record(t, p.A, EndedTurn(Key(t), "t1", turn.TurnCompleted, h.Add(time.Minute)), 0)
	from := h.Add(-(turn.MaxStatsHours - 3) * time.Hour)
	got := hours(t, p.A, from, from.Add(turn.MaxStatsHours*time.Hour))
	if len(got) != turn.MaxStatsHours {
		t.Fatalf("%d hours, want %d", len(got), turn.MaxStatsHours)
	}
	for i, g := range got {
		if want := from.Add(time.Duration(i) * time.Hour); !g.Hour.Equal(want) {
			t.Fatalf("hour %d is %v, want %v (oldest first)", i, g.Hour, want)
		}
	}
	wantHour(t, got[turn.MaxStatsHours-3], turn.HourStats{Hour: h, Completed: 1})
	for _, r := range [][2]time.Time{{from, from.Add((turn.MaxStatsHours + 1) * time.Hour)}, {h, h.Add(-time.Hour)}} {
		if _, err := p.A.Hours(context.Background(), r[0], r[1]); !errors.Is(err, turn.ErrStatsRange) {
			t.Errorf("hours [%v, %v): err = %v, want ErrStatsRange", r[0], r[1], err)
		}
	}
}

func testStatsNotEnded(t *testing.T, p StatsPair) {
	running := EndedTurn(Key(t), "t1", turn.TurnRunning, statsBase())
	if err := p.A.RecordTurnEnd(context.Background(), running, 0); err == nil {
		t.Error("a running turn was recorded")
	}
	running.EndedAt = nil
	running.Status = turn.TurnCompleted
	if err := p.A.RecordTurnEnd(context.Background(), running, 0); err == nil {
		t.Error("a turn without an end was recorded")
	}
}

func testStatsExpired(t *testing.T, p StatsPair) {
	old := time.Now().UTC().Truncate(time.Hour).Add(-turn.StatsRetention - 2*time.Hour)
	// Recording an hour past retention is a no-op, and reads as zero.
	record(t, p.A, EndedTurn(Key(t), "old", turn.TurnCompleted, old.Add(time.Minute)), 5)
	wantHour(t, hours(t, p.A, old, old.Add(time.Hour))[0], turn.HourStats{Hour: old})
}
