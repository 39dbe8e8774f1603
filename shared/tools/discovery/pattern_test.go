package discovery

import (
	"strings"
	"testing"
	"time"
)

func TestPattern(t *testing.T) {
	tests := []struct {
		pattern, value string
		want           bool
	}{
		// "*" and "" match everything, the empty value included.
		{"*", "", true}, {"*", "/a/b", true}, {"", "", true}, {"", "anything", true},
		// Globs cover the whole value.
		{"list_menu", "list_menu", true},
		{"list_menu", "list_menu_x", false},
		{"list", "list_menu", false},
		{"list_*", "list_menu", true},
		{"list_*", "list_", true},
		{"list_*", "get_list_menu", false},
		{"*_menu", "list_menu", true},
		{"*_menu", "list_menus", false},
		{"*menu*", "the_menu_list", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "acb", false},
		{"a*b*c", "abcbc", true},
		{"a*a", "a", false}, // prefix and suffix must not overlap
		{"a*a", "aa", true},
		{"**", "x", true},
		{"a**b", "ab", true},
		// "*" crosses "/".
		{"/api/*", "/api/v1/users/{id}", true},
		{"/api/*/users", "/api/v1/beta/users", true},
		{"*/users/*", "/api/users/42", true},
		{"/api/*", "/apix/v1", false},
		// "?" is exactly one character, "/" included, multibyte included.
		{"get?", "gets", true},
		{"get?", "get", false},
		{"get?", "getss", false},
		{"a?c", "a/c", true},
		{"a?c", "aéc", true},
		{"?*?", "ab", true},
		{"?*?", "a", false},
		// Case-insensitive, Unicode simple folding.
		{"LIST_*", "list_menu", true},
		{"list_*", "LIST_MENU", true},
		{"get", "GET", true},
		{"*ÉTÉ*", "un été chaud", true},
		{"k", "\u212a", true}, // Kelvin sign folds to k
		{"\u212a*", "kilo", true},
		{"*s", "ſ", true},            // long s folds to s
		{"straße", "STRASSE", false}, // simple folding: ß is not "ss"
		// Everything else is literal.
		{"[ab]", "a", false},
		{"[ab]", "[AB]", true},
		{`a\*`, `a\xyz`, true},
		{`a\*`, `a*`, false}, // "\" does not escape: "a\" then a star
		{"a.c", "abc", false},
		// Regular expressions: anchored at the start, not the end, case-insensitive.
		{"regex:get_", "get_user", true},
		{"regex:get_", "forget_user", false},
		{"regex:.*user", "get_user_id", true},
		{"regex:GET_(USER|ORDER)$", "get_order", true},
		{"regex:get_(user|order)$", "get_orders", false},
		{"regex:/api/v[0-9]+/", "/API/V2/users", true},
		{"regex:x|y", "zy", false}, // both alternatives anchored
		{"regex:", "anything", true},
		{"REGEX:get", "REGEX:get", true}, // the prefix is case-sensitive: this is a glob
	}
	for _, tt := range tests {
		p, err := CompilePattern(tt.pattern)
		if err != nil {
			t.Errorf("CompilePattern(%q): %v", tt.pattern, err)
			continue
		}
		if got := p.Match(tt.value); got != tt.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tt.pattern, tt.value, got, tt.want)
		}
		if got := refGlob(tt.pattern, tt.value); !strings.HasPrefix(tt.pattern, RegexPrefix) && tt.pattern != "" && got != tt.want {
			t.Errorf("reference glob disagrees with the table for %q, %q", tt.pattern, tt.value)
		}
		if p.String() != tt.pattern {
			t.Errorf("String() = %q", p.String())
		}
	}
}

func TestPatternErrors(t *testing.T) {
	for _, p := range []string{"regex:(a", "regex:a)|(b", `regex:\`, "regex:[z-a]", "regex:a{2,1}"} {
		if _, err := CompilePattern(p); err == nil || !strings.Contains(err.Error(), "invalid regular expression") || !strings.Contains(err.Error(), p) {
			t.Errorf("CompilePattern(%q) err = %v", p, err)
		}
	}
}

func TestGlobLongSegments(t *testing.T) {
	// Middle segments longer than one Shift-And word.
	long := strings.Repeat("ab?", 40) // 120 runes
	value := "xx" + strings.Repeat("abz", 40) + "yy"
	for _, tt := range []struct {
		pattern, value string
		want           bool
	}{
		{"*" + long + "*", value, true},
		{"x*" + long + "*y", value, true},
		{"*" + long + "*", strings.Repeat("abz", 39), false},
		{"*" + long + "c*", value, false},
		{"*" + strings.Repeat("a", 65) + "*", strings.Repeat("a", 64) + "b" + strings.Repeat("a", 65), true},
		{"*" + strings.Repeat("a", 65) + "*", strings.Repeat("a", 64) + "b" + strings.Repeat("a", 64), false},
		{"*" + strings.Repeat("é", 70) + "*", "x" + strings.Repeat("É", 70), true},
	} {
		p, _ := CompilePattern(tt.pattern)
		if got := p.Match(tt.value); got != tt.want {
			t.Errorf("%d-rune pattern on %d-rune value = %v, want %v", len(tt.pattern), len(tt.value), got, tt.want)
		}
		if got := refGlob(tt.pattern, tt.value); got != tt.want {
			t.Errorf("reference disagrees")
		}
	}
}

// refGlob is the obvious dynamic-programming glob: d[i][j] is whether the
// first i runes of the pattern match the first j of the value. It folds
// case with strings.EqualFold, independently of foldRune.
func refGlob(pattern, value string) bool {
	p, v := []rune(pattern), []rune(value)
	d := make([][]bool, len(p)+1)
	for i := range d {
		d[i] = make([]bool, len(v)+1)
	}
	d[0][0] = true
	for i := 1; i <= len(p); i++ {
		for j := 0; j <= len(v); j++ {
			switch p[i-1] {
			case '*':
				d[i][j] = d[i-1][j] || (j > 0 && d[i][j-1])
			case '?':
				d[i][j] = j > 0 && d[i-1][j-1]
			default:
				d[i][j] = j > 0 && d[i-1][j-1] && strings.EqualFold(string(p[i-1]), string(v[j-1]))
			}
		}
	}
	return d[len(p)][len(v)]
}

func TestGlobIsLinear(t *testing.T) {
	// The classic backtracking killer: a*a*a*...b against aaaa...a. A
	// backtracking matcher takes exponential time (quadratic with a
	// single backtrack point); this one scans the value once per segment
	// at most, so a million runes take milliseconds.
	value := strings.Repeat("a", 1_000_000)
	start := time.Now()
	for _, tt := range []struct {
		pattern, value string
		want           bool
	}{
		{strings.Repeat("a*", 30) + "b", value, false},
		{strings.Repeat("a*", 30) + "b", value + "b", true},
		// A naive substring search would compare ~60 runes at each of a
		// million positions.
		{strings.Repeat("*"+strings.Repeat("a", 60)+"b", 3) + "*", value, false},
		{"*" + strings.Repeat("?", 100) + "b*", value, false},
	} {
		p, _ := CompilePattern(tt.pattern)
		if got := p.Match(tt.value); got != tt.want {
			t.Errorf("Match = %v, want %v", got, tt.want)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("four matches over a million runes took %v", d)
	}
}

// TestGlobEdges: the edges of the matcher's tables and windows, each
// checked against the reference.
func TestGlobEdges(t *testing.T) {
	a64b := strings.Repeat("a", 64) + "b"
	for _, tt := range []struct {
		name, pattern, value string
		want                 bool
	}{
		{"NUL is an ASCII rune of a segment", "*a\x00b*", "xa\x00bx", true},
		{"U+0080, the first rune past ASCII, in a scanned value", "*a*", "\u0080\u0080a", true},
		{"U+0080 in a segment", "*\u0080*", "x\u0080", true},
		{"U+0080 in a segment, not in the value", "*\u0080*", "x\u0081", false},
		{"a middle segment stays out of the suffix", "*b*b", "ab", false},
		{"a middle segment ends before the suffix", "*b*b", "abb", true},
		{"a middle segment stays out of the prefix", "a*a*", "a", false},
		{"the next segment starts after a long one ends", "*" + a64b + "*b*", a64b, false},
		{"the next segment starts after a long one ends, found", "*" + a64b + "*b*", a64b + "b", true},
		{"a 127-rune segment", "*" + strings.Repeat("c", 127) + "*", "x" + strings.Repeat("c", 127), true},
		{"a 128-rune segment", "*" + strings.Repeat("c", 128) + "*", "x" + strings.Repeat("c", 128) + "y", true},
		{"a 128-rune segment, one short", "*" + strings.Repeat("c", 128) + "*", "x" + strings.Repeat("c", 127) + "y", false},
		{"a window shorter than the segment", "ab*cde*f", "abcdf", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := CompilePattern(tt.pattern)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Match(tt.value); got != tt.want {
				t.Errorf("Match = %v, want %v", got, tt.want)
			}
			if got := refGlob(tt.pattern, tt.value); got != tt.want {
				t.Errorf("reference = %v, want %v", got, tt.want)
			}
		})
	}
}
