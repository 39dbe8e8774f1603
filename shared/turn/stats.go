package turn

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// HourStats are the turns that ended in one UTC hour.
type HourStats struct {
	Hour          time.Time // the hour's start, UTC
	Completed     int
	Failed        int     // failed, interrupted or stopped at the step limit
	Parked        int     // of those, turns that parked on consent at least once
	ParkedSeconds float64 // their time parked in all
}

// TurnStats counts ended turns by hour. Recording is idempotent per turn:
// a turn recorded twice (a redelivery, a retried commit) counts once.
//
// RecordTurnEnd counts t in the UTC hour of t.EndedAt (a turn that has not
// ended is an error): as Completed when StatsCompleted(t), else as Failed;
// as Parked too when parkedSeconds > 0. A turn whose hour is older than
// StatsRetention is not recorded (nil: it would have expired already).
// Hours returns every hour of StatsHours(from, to), zero-filled where
// nothing was recorded or what was recorded has expired. Implementations:
// the file store (local/turnfile) and DynamoDB (aws/dynamostore,
// Store.TurnStats); both run testkit/turnstoretest.RunStats.
type TurnStats interface {
	RecordTurnEnd(ctx context.Context, t Turn, parkedSeconds float64) error
	Hours(ctx context.Context, from, to time.Time) ([]HourStats, error) // every hour in [from, to), zero-filled, oldest first; at most 168
}

const (
	// MaxStatsHours bounds the hours one TurnStats.Hours call returns: a
	// week.
	MaxStatsHours = 168
	// StatsRetention is how long the stores keep an hour's figures (and
	// the markers that make recording idempotent) after the hour starts:
	// a week and a day, so a week back from any moment is whole.
	StatsRetention = 8 * 24 * time.Hour
)

// ErrStatsRange: Hours was asked for more than MaxStatsHours hours, or
// for a range that ends before it starts.
var ErrStatsRange = errors.New("turn stats: the range must be at most 168 hours and not end before it starts")

// StatsHours are the starts of the hours of [from, to): from rounded down
// to its UTC hour, then every hour that starts before to. Empty when to
// is not after from.
func StatsHours(from, to time.Time) ([]time.Time, error) {
	if to.Before(from) {
		return nil, fmt.Errorf("%w: from %s, to %s", ErrStatsRange, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
	}
	first := from.UTC().Truncate(time.Hour)
	var out []time.Time
	for h := first; h.Before(to); h = h.Add(time.Hour) {
		if len(out) == MaxStatsHours {
			return nil, fmt.Errorf("%w: from %s, to %s", ErrStatsRange, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
		}
		out = append(out, h)
	}
	return out, nil
}

// StatsHour is the UTC hour t counts in (TurnStats.RecordTurnEnd): the
// hour of its end.
func StatsHour(t Turn) (time.Time, error) {
	if t.EndedAt == nil || !t.Status.Ended() {
		return time.Time{}, fmt.Errorf("turn stats: turn %q has not ended (status %q)", t.ID, t.Status)
	}
	return t.EndedAt.UTC().Truncate(time.Hour), nil
}

// StatsCompleted reports whether an ended turn counts as Completed: it
// completed and carries no Failure. The engine ends a turn stopped at the
// step limit as completed; whoever records it gives it a Failure (the
// app's stats notifier does: code step_limit_reached), so it counts as
// Failed, as the console shows it.
func StatsCompleted(t Turn) bool { return t.Status == TurnCompleted && t.Error == nil }

// StatsTurnKey names t for the idempotence of TurnStats: the instance's
// printable key and the turn id, which together name one turn for ever.
// Stores hash it; it holds the instance key, so it is never a path.
func StatsTurnKey(t Turn) string { return t.Instance.String() + "\x00" + t.ID }
