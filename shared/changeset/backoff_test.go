package changeset

import (
	"context"
	"testing"
	"time"
)

// TestBackoffDelay pins the jitter of the wait between swap attempts: 1 ms
// plus up to n-1 ms, n doubling from 8 after the first lost swap and
// staying at 64 from the fourth on.
func TestBackoffDelay(t *testing.T) {
	for _, tt := range []struct {
		attempt int
		n       int
	}{
		{1, 8}, {2, 16}, {3, 32}, {4, 64}, {5, 64}, {swapAttempts - 1, 64},
	} {
		var asked []int
		lowest := backoffDelay(tt.attempt, func(n int) int { asked = append(asked, n); return 0 })
		highest := backoffDelay(tt.attempt, func(n int) int { asked = append(asked, n); return n - 1 })
		if len(asked) != 2 || asked[0] != tt.n || asked[1] != tt.n {
			t.Errorf("attempt %d drew its jitter with %v, want IntN(%d) once each", tt.attempt, asked, tt.n)
		}
		if lowest != time.Millisecond || highest != time.Duration(tt.n)*time.Millisecond {
			t.Errorf("attempt %d waits %v to %v, want 1ms to %dms", tt.attempt, lowest, highest, tt.n)
		}
	}
}

// TestBackoffFirstAttemptDoesNotWait: the first attempt goes at once,
// even with a context that has ended (a wait would report it).
func TestBackoffFirstAttemptDoesNotWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backoff(ctx, 0); err != nil {
		t.Fatalf("backoff(attempt 0) = %v, want nil without waiting", err)
	}
	if err := sleep(ctx, time.Hour); err != context.Canceled {
		t.Fatalf("sleep with an ended context = %v, want %v", err, context.Canceled)
	}
}
