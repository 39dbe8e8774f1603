package discovery

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// RegexPrefix marks a selector pattern as a regular expression.
const RegexPrefix = "regex:"

// Pattern is a compiled ToolSelector pattern:
//
//   - "" and "*" match every value;
//   - "regex:<re>" is a case-insensitive regular expression (Go RE2
//     syntax) anchored at the start of the value, not at its end, like
//     Python's re.match: "regex:get_" matches "get_user";
//   - anything else is a case-insensitive glob over the whole value: "*"
//     matches any run of characters, "/" included, and "?" exactly one
//     character; every other character, "[" and "\" included, is literal.
//
// Case-insensitive means Unicode simple case folding, as in
// strings.EqualFold and the regexp package's (?i).
type Pattern struct {
	src string
	all bool
	re  *regexp.Regexp
	g   *glob
}

// CompilePattern compiles p. Only a "regex:" pattern can fail to compile.
func CompilePattern(p string) (*Pattern, error) {
	if p == "" || p == "*" {
		return &Pattern{src: p, all: true}, nil
	}
	if expr, ok := strings.CutPrefix(p, RegexPrefix); ok {
		re, err := compileAnchored(expr, true)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %v", p, err)
		}
		return &Pattern{src: p, re: re}, nil
	}
	return &Pattern{src: p, g: compileGlob(p)}, nil
}

// compileAnchored compiles expr anchored at the start of the text. expr
// is parsed on its own first, so that "a)|(b" cannot close the anchoring
// group and leave an unanchored alternative behind.
func compileAnchored(expr string, foldCase bool) (*regexp.Regexp, error) {
	if _, err := syntax.Parse(expr, syntax.Perl); err != nil {
		return nil, fmt.Errorf("invalid regular expression: %s", regexpReason(err))
	}
	flags := ""
	if foldCase {
		flags = "(?i)"
	}
	re, err := regexp.Compile(flags + `^(?:` + expr + `)`)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression: %s", regexpReason(err))
	}
	return re, nil
}

// regexpReason drops the regexp package's "error parsing regexp: " prefix.
func regexpReason(err error) string {
	var e *syntax.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("%s: %q", e.Code, e.Expr)
	}
	return err.Error()
}

// String returns the pattern as written.
func (p *Pattern) String() string { return p.src }

// Match reports whether s matches the pattern.
func (p *Pattern) Match(s string) bool {
	switch {
	case p.all:
		return true
	case p.re != nil:
		return p.re.MatchString(s)
	}
	return p.g.match(foldRunes(s))
}

// matchFolded is Match for a value already put through foldRunes (globs)
// and kept as written (regular expressions fold by themselves).
func (p *Pattern) matchFolded(raw string, folded []rune) bool {
	switch {
	case p.all:
		return true
	case p.re != nil:
		return p.re.MatchString(raw)
	}
	return p.g.match(folded)
}

// foldRune maps r to the smallest rune of its simple case folding orbit,
// so that two runes are equal under strings.EqualFold exactly when their
// folds are equal.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			return r - ('a' - 'A')
		}
		return r
	}
	min := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < min {
			min = f
		}
	}
	return min
}

// foldRunes decodes s (invalid UTF-8 bytes become U+FFFD, as in a range
// loop) and folds every rune.
func foldRunes(s string) []rune {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		out = append(out, foldRune(r))
	}
	return out
}
