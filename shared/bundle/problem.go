package bundle

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
)

// Problem is one thing wrong with (or, as a warning, worth telling about) a
// bundle.
type Problem struct {
	File     string // bundle-relative file name
	Line     int    // 1-based line; 0 when the YAML parser gave none
	Resource string // "OAuthApp/demo-user"; empty for file-level problems
	Field    string // field path, "spec.endpoints.tokenUrl"; empty for whole documents
	Message  string
}

// String renders the problem as
// "file:line: Kind/name: field.path: message", leaving out the parts that
// are empty.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(p.Line))
	}
	for _, s := range []string{p.Resource, p.Field, p.Message} {
		if s != "" {
			b.WriteString(": ")
			b.WriteString(s)
		}
	}
	return b.String()
}

// ValidationError is every problem that stops a bundle from loading.
type ValidationError struct {
	Problems []Problem
	// Warnings found along the way, for a caller that wants to show them
	// too; they are not part of Error().
	Warnings []Problem
}

// Error lists the problems, one per line.
func (e *ValidationError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// sortProblems orders problems by file and line, keeping the order in which
// they were found otherwise, so output is stable and reads top to bottom.
func sortProblems(ps []Problem) {
	slices.SortStableFunc(ps, func(a, b Problem) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line))
	})
}

// oneLine keeps a message on one line whatever user text went into it.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ").Replace(s)
}
