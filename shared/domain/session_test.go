package domain

import (
	"testing"
	"time"
)

func TestSessionReusableAt(t *testing.T) {
	now := time.Date(2026, 1, 31, 9, 0, 0, 0, time.UTC)
	pending := Session{ReuseKey: "rk-x", Status: SessionPending, ExpiresAt: now.Add(10 * time.Minute)}
	for _, tc := range []struct {
		name string
		mut  func(*Session)
		want bool
	}{
		{"pending with time left", func(*Session) {}, true},
		{"no reuse key", func(s *Session) { s.ReuseKey = "" }, false},
		{"exchanging", func(s *Session) { s.Status = SessionExchanging }, false},
		{"completed", func(s *Session) { s.Status = SessionCompleted }, false},
		{"failed", func(s *Session) { s.Status = SessionFailed }, false},
		{"expired status", func(s *Session) { s.Status = SessionExpired }, false},
		{"just over the margin left", func(s *Session) { s.ExpiresAt = now.Add(SessionReuseMargin + time.Nanosecond) }, true},
		{"exactly the margin left", func(s *Session) { s.ExpiresAt = now.Add(SessionReuseMargin) }, false},
		{"less than the margin left", func(s *Session) { s.ExpiresAt = now.Add(30 * time.Second) }, false},
		{"past its expiry", func(s *Session) { s.ExpiresAt = now.Add(-time.Minute) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := pending
			tc.mut(&s)
			if got := s.ReusableAt(now); got != tc.want {
				t.Fatalf("ReusableAt = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSweepSetOf(t *testing.T) {
	for _, tc := range []struct {
		status       SessionStatus
		eventPending bool
		want         SweepSet
	}{
		{SessionPending, false, SweepPending},
		{SessionExchanging, false, SweepExchanging},
		{SessionCompleted, true, SweepEventPending},
		{SessionCompleted, false, SweepFinished},
		{SessionFailed, false, SweepFinished},
		{SessionExpired, false, SweepFinished},
		// Only a completed session has an event to send.
		{SessionFailed, true, SweepFinished},
	} {
		t.Run(string(tc.status), func(t *testing.T) {
			if got := SweepSetOf(Session{Status: tc.status, EventPending: tc.eventPending}); got != tc.want {
				t.Fatalf("SweepSetOf(%s, eventPending %v) = %s, want %s", tc.status, tc.eventPending, got, tc.want)
			}
		})
	}
}
