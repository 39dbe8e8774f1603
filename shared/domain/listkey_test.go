package domain

import (
	"errors"
	"testing"
	"time"
)

func TestListKeyOrder(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	older, newer := ListKey(t0, "grant-b"), ListKey(t0.Add(time.Nanosecond), "grant-a")
	if !(newer < older) {
		t.Fatalf("newer %s does not sort before older %s", newer, older)
	}
	if a, b := ListKey(t0, "x-a"), ListKey(t0, "x-b"); !(a < b) {
		t.Fatalf("ties: %s, %s", a, b)
	}
	since := ListKeySince(t0)
	if !(older < since) || !(newer < since) || !(ListKey(t0.Add(-time.Nanosecond), "z") > since) {
		t.Fatalf("since bound %s misplaced", since)
	}
	if ListKey(time.Time{}, "a") != ListKey(time.Unix(0, 0), "a") {
		t.Fatal("a zero time is not 1970")
	}
	for _, k := range []string{older, ListKey(time.Time{}, "as-0123")} {
		if _, _, err := ParseListKey(k); err != nil {
			t.Errorf("ParseListKey(%q): %v", k, err)
		}
	}
	for _, k := range []string{"", "x", older + "/", "922337203685477580.grant", "9223372036854775807.", "9223372036854775807.a b", "9223372036854775807.../x"} {
		if _, _, err := ParseListKey(k); !errors.Is(err, ErrInvalidID) {
			t.Errorf("ParseListKey(%q) = %v, want ErrInvalidID", k, err)
		}
	}
}

func TestPageLimit(t *testing.T) {
	for in, want := range map[int]int{0: DefaultPageLimit, 1: 1, 100: 100} {
		if got, err := PageLimit(in); err != nil || got != want {
			t.Errorf("PageLimit(%d) = %d, %v", in, got, err)
		}
	}
	for _, in := range []int{-1, 101} {
		if _, err := PageLimit(in); !errors.Is(err, ErrInvalidID) {
			t.Errorf("PageLimit(%d): %v", in, err)
		}
	}
}
