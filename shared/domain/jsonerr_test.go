package domain

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONErrorWithoutContent(t *testing.T) {
	var v struct{ N int }
	for in, want := range map[string]string{
		`{"N":"s3cret-value"}`: "field N: cannot decode a JSON string into int",
		`{"N":1,}`:             "invalid JSON at byte 8",
		`{"N":`:                "truncated JSON",
	} {
		err := json.Unmarshal([]byte(in), &v)
		if in == `{"N":` {
			err = json.NewDecoder(strings.NewReader(in)).Decode(&v)
		}
		got := JSONErrorWithoutContent(err)
		if got != want || strings.Contains(got, "s3cret") {
			t.Errorf("%s: %q, want %q", in, got, want)
		}
	}
}
