package ratelimit

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestDecide(t *testing.T) {
	g := Limit{Rate: 1, Burst: 3}.GCRA() // T = 1 s, τ = 2 s
	const s = 1_000_000
	for _, tc := range []struct {
		name      string
		tat, now  int64
		wantTAT   int64
		wantOK    bool
		wantRetry time.Duration
	}{
		{"new key", 0, 100 * s, 101 * s, true, 0},
		{"idle", 50 * s, 100 * s, 101 * s, true, 0},
		{"tat at now", 100 * s, 100 * s, 101 * s, true, 0},
		{"busy within tolerance", 102 * s, 100 * s, 103 * s, true, 0},
		{"just over", 103 * s, 100 * s, 103 * s, false, time.Second},
		{"one microsecond over", 102*s + 1, 100 * s, 102*s + 1, false, time.Second},
		{"far over", 110 * s, 100 * s, 110 * s, false, 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tat, ok, retry := g.Decide(tc.tat, tc.now)
			if tat != tc.wantTAT || ok != tc.wantOK || retry != tc.wantRetry {
				t.Fatalf("Decide(%d, %d) = %d, %v, %v; want %d, %v, %v", tc.tat, tc.now, tat, ok, retry, tc.wantTAT, tc.wantOK, tc.wantRetry)
			}
		})
	}
}

func TestLimitValidate(t *testing.T) {
	// MaxWindow is a leap year: at 1 call/s, a burst of that many seconds
	// is the largest a limit may have.
	const window = 366 * 24 * 3600
	for _, tc := range []struct {
		name string
		l    Limit
		want string // in the error; "" for a valid limit
	}{
		{"NaN rate", Limit{Rate: math.NaN(), Burst: 1}, "want a positive number"},
		{"zero rate", Limit{Rate: 0, Burst: 1}, "want a positive number"},
		{"negative rate", Limit{Rate: -1, Burst: 1}, "want a positive number"},
		{"infinite rate", Limit{Rate: math.Inf(1), Burst: 1}, "at most"},
		{"rate at MaxRate", Limit{Rate: 1e6, Burst: 1}, ""},
		{"zero burst", Limit{Rate: 1, Burst: 0}, "want at least 1"},
		{"slow rate", Limit{Rate: 0.001, Burst: 10}, ""},
		{"large burst", Limit{Rate: 100, Burst: 1000}, ""},
		{"refill of exactly MaxWindow", Limit{Rate: 1, Burst: window}, ""},
		{"refill one second past MaxWindow", Limit{Rate: 1, Burst: window + 1}, "longer than"},
		{"refill of 400 days", Limit{Rate: 1, Burst: 400 * 24 * 3600}, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("%+v: %v", tc.l, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%+v: err = %v, want one saying %q", tc.l, err, tc.want)
			}
		})
	}
}

func TestKey(t *testing.T) {
	ab, err := Key("ab", "c")
	if err != nil {
		t.Fatal(err)
	}
	// The separator keeps the principal and the tool apart (issue 9, item 23).
	for _, k := range [][2]string{{"a", "bc"}, {"abc", "x"}, {"c", "ab"}} {
		other, err := Key(k[0], k[1])
		if err != nil || other == ab {
			t.Errorf("Key(%q, %q) = %q, %v; Key(ab, c) is %q", k[0], k[1], other, err, ab)
		}
	}
	if again, _ := Key("ab", "c"); again != ab {
		t.Error("Key is not stable")
	}
	if len(ab) != 64 || strings.Trim(ab, "0123456789abcdef") != "" {
		t.Errorf("Key = %q, want 64 lowercase hex digits", ab)
	}
	for _, k := range [][2]string{{"", "search"}, {"alice", ""}, {"alice\x00x", "y"}, {"alice", "x\x00y"}, {"\x00alice", "y"}, {"alice", "\x00y"}} {
		if got, err := Key(k[0], k[1]); err == nil || got != "" {
			t.Errorf("Key(%q, %q) = %q, %v; want an error", k[0], k[1], got, err)
		}
	}
}
