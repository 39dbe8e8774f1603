package turn

import (
	"errors"
	"testing"
	"time"
)

func TestStatsHours(t *testing.T) {
	h := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     int
		first    time.Time
		err      error
	}{
		{"aligned day", h, h.Add(24 * time.Hour), 24, h, nil},
		{"empty", h, h, 0, time.Time{}, nil},
		{"from rounded down", h.Add(30 * time.Minute), h.Add(90 * time.Minute), 2, h, nil},
		{"to not included", h, h.Add(time.Hour), 1, h, nil},
		{"other zone", h.In(time.FixedZone("X", 5*3600+1800)), h.Add(2 * time.Hour), 2, h, nil},
		{"a week", h, h.Add(MaxStatsHours * time.Hour), MaxStatsHours, h, nil},
		{"a week and an hour", h, h.Add((MaxStatsHours + 1) * time.Hour), 0, time.Time{}, ErrStatsRange},
		{"backwards", h, h.Add(-time.Hour), 0, time.Time{}, ErrStatsRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := StatsHours(tc.from, tc.to)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if len(got) != tc.want {
				t.Fatalf("%d hours, want %d", len(got), tc.want)
			}
			if len(got) > 0 && (!got[0].Equal(tc.first) || got[0].Location() != time.UTC) {
				t.Errorf("first hour %v, want %v UTC", got[0], tc.first)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Sub(got[i-1]) != time.Hour {
					t.Fatalf("hours %v, %v are not consecutive", got[i-1], got[i])
				}
			}
		})
	}
}

func TestStatsHourAndCompleted(t *testing.T) {
	end := time.Date(2026, 11, 24, 10, 59, 59, 999, time.FixedZone("Y", -3600))
	tr := Turn{ID: "t1", Status: TurnCompleted, EndedAt: &end}
	h, err := StatsHour(tr)
	if err != nil || !h.Equal(time.Date(2026, 11, 24, 11, 0, 0, 0, time.UTC)) || h.Location() != time.UTC {
		t.Fatalf("StatsHour = %v, %v", h, err)
	}
	if _, err := StatsHour(Turn{ID: "t2", Status: TurnRunning}); err == nil {
		t.Error("a running turn has an hour")
	}
	for _, tc := range []struct {
		t    Turn
		want bool
	}{
		{Turn{Status: TurnCompleted}, true},
		{Turn{Status: TurnCompleted, Error: &Failure{Code: "step_limit_reached"}}, false},
		{Turn{Status: TurnFailed}, false},
		{Turn{Status: TurnInterrupted}, false},
	} {
		if got := StatsCompleted(tc.t); got != tc.want {
			t.Errorf("StatsCompleted(%s, %v) = %v", tc.t.Status, tc.t.Error, got)
		}
	}
}
