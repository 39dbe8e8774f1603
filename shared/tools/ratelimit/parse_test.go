package ratelimit

import (
	"strings"
	"testing"
)

func TestParseLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Limit
		err  string
	}{
		{"60/m", Limit{Rate: 1, Burst: 60}, ""},
		{" 10/s:2 ", Limit{Rate: 10, Burst: 2}, ""},
		{"3600/h:1", Limit{Rate: 1, Burst: 1}, ""},
		{"60", Limit{}, "want <calls>/<s|m|h>"},
		{"0/m", Limit{}, "want <calls>/<s|m|h>"},
		{"5/d", Limit{}, "want <calls>/<s|m|h>"},
		{"5/s:x", Limit{}, "burst after ':'"},
		{"5/s:0", Limit{}, "burst 0"},
	} {
		got, err := ParseLimit(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseLimit(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

func TestParseLimits(t *testing.T) {
	ls, err := ParseLimits("", "get_menu=10/m, echo=100/s:20")
	if err != nil {
		t.Fatal(err)
	}
	if ls.Default != (Limit{Rate: 1, Burst: 60}) || ls.For("get_menu") != (Limit{Rate: 10.0 / 60, Burst: 10}) || ls.For("echo") != (Limit{Rate: 100, Burst: 20}) || ls.For("other") != ls.Default {
		t.Fatalf("limits = %+v", ls)
	}
	_, err = ParseLimits("1/s", "a=x,=1/s,b=1/s,b=2/s")
	for _, want := range []string{"tool a:", `per-tool limit "=1/s"`, "tool b: limited twice"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want it to contain %q", err, want)
		}
	}
}
