package changeset

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestMerge3(t *testing.T) {
	tests := []struct {
		name               string
		base, ours, theirs string
		want               string // when clean
		conflict           bool
	}{
		// Identities.
		{name: "nothing changed", base: "a\nb\n", ours: "a\nb\n", theirs: "a\nb\n", want: "a\nb\n"},
		{name: "only ours changed", base: "a\nb\n", ours: "a\nB\n", theirs: "a\nb\n", want: "a\nB\n"},
		{name: "only theirs changed", base: "a\nb\n", ours: "a\nb\n", theirs: "A\nb\n", want: "A\nb\n"},
		{name: "ours equals theirs", base: "a\nb\n", ours: "x\n", theirs: "x\n", want: "x\n"},
		{name: "both empty the file", base: "a\nb\n", ours: "", theirs: "", want: ""},

		// Disjoint edits.
		{
			name:   "edits at top and bottom",
			base:   "a\nb\nc\nd\ne\n",
			ours:   "A\nb\nc\nd\ne\n",
			theirs: "a\nb\nc\nd\nE\n",
			want:   "A\nb\nc\nd\nE\n",
		},
		{
			name:   "one unchanged line between edits",
			base:   "a\nb\nc\n",
			ours:   "A\nb\nc\n",
			theirs: "a\nb\nC\n",
			want:   "A\nb\nC\n",
		},
		{
			name:   "insertions at different places",
			base:   "a\nb\nc\n",
			ours:   "a\nx\nb\nc\n",
			theirs: "a\nb\ny\nc\n",
			want:   "a\nx\nb\ny\nc\n",
		},
		{
			name:   "deletions of different lines",
			base:   "a\nb\nc\nd\ne\n",
			ours:   "a\nc\nd\ne\n",
			theirs: "a\nb\nc\ne\n",
			want:   "a\nc\ne\n",
		},
		{
			name:   "insertion at the top and at the end",
			base:   "a\nb\n",
			ours:   "top\na\nb\n",
			theirs: "a\nb\nend\n",
			want:   "top\na\nb\nend\n",
		},
		{
			name:   "several edits per side interleaved",
			base:   "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			ours:   "one\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			theirs: "1\n2\nthree\n4\n5\n6\nseven\n8\nnine\n",
			want:   "one\n2\nthree\n4\nfive\n6\nseven\n8\nnine\n",
		},
		{
			name: "yaml bundle edits in different documents",
			base: "kind: Agent\nname: a\nspec:\n  modelRef: m1\n---\nkind: Tool\nname: t\nspec:\n  timeout: 30\n",
			ours: "kind: Agent\nname: a\nspec:\n  modelRef: m2\n---\nkind: Tool\nname: t\nspec:\n  timeout: 30\n",
			theirs: "kind: Agent\nname: a\nspec:\n  modelRef: m1\n---\nkind: Tool\nname: t\nspec:\n  timeout: 60\n" +
				"  retries: 2\n",
			want: "kind: Agent\nname: a\nspec:\n  modelRef: m2\n---\nkind: Tool\nname: t\nspec:\n  timeout: 60\n  retries: 2\n",
		},

		// Same change on both sides.
		{
			name:   "same edit on both sides",
			base:   "a\nb\nc\n",
			ours:   "a\nB\nc\nx\n",
			theirs: "a\nB\nc\n",
			want:   "a\nB\nc\nx\n",
		},
		{
			name:   "same insertion at the end",
			base:   "a\nb\nc\nd\n",
			ours:   "A\nb\nc\nd\ne\n",
			theirs: "a\nb\nc\nd\ne\n",
			want:   "A\nb\nc\nd\ne\n",
		},
		{
			name:   "same deletion on both sides",
			base:   "a\nb\nc\nd\ne\n",
			ours:   "A\nb\nc\ne\n",
			theirs: "a\nb\nc\ne\n",
			want:   "A\nb\nc\ne\n",
		},
		{
			name:     "different texts for one overlapping stretch",
			base:     "a\nb\nc\nd\ne\nf\n",
			ours:     "a\nB\nc\nD\ne\nF\n",
			theirs:   "a\nB\nC\nD\ne\nf\n",
			conflict: true, // ours keeps c, theirs changes it: the texts differ
		},
		{
			name:   "same two edits, one more on one side",
			base:   "a\nb\nc\nd\ne\n",
			ours:   "a\nB\nc\nD\ne\nz\n",
			theirs: "a\nB\nc\nD\ne\n",
			want:   "a\nB\nc\nD\ne\nz\n",
		},

		// Conflicts.
		{
			name:     "same line edited differently",
			base:     "a\nb\nc\n",
			ours:     "a\nX\nc\n",
			theirs:   "a\nY\nc\n",
			conflict: true,
		},
		{
			name:     "adjacent lines edited",
			base:     "a\nb\nc\nd\n",
			ours:     "a\nB\nc\nd\n",
			theirs:   "a\nb\nC\nd\n",
			conflict: true,
		},
		{
			name:     "one side deletes a hunk the other edits",
			base:     "a\nb\nc\nd\ne\n",
			ours:     "a\ne\n",
			theirs:   "a\nb\nC\nd\ne\n",
			conflict: true,
		},
		{
			name:     "one side empties the file the other edits",
			base:     "a\nb\nc\n",
			ours:     "",
			theirs:   "a\nB\nc\n",
			conflict: true,
		},
		{
			name:     "different insertions at the end",
			base:     "a\nb\n",
			ours:     "a\nb\nx\n",
			theirs:   "a\nb\ny\n",
			conflict: true,
		},
		{
			name:     "different insertions at the same place",
			base:     "a\nb\n",
			ours:     "a\nx\nb\n",
			theirs:   "a\ny\nb\n",
			conflict: true,
		},
		{
			name:     "insertion where the other side's edit ends",
			base:     "a\nb\nc\n",
			ours:     "a\nB\nc\n",
			theirs:   "a\nb\nx\nc\n",
			conflict: true,
		},
		{
			name:     "insertion where the other side's edit starts",
			base:     "a\nb\nc\n",
			ours:     "a\nB\nc\n",
			theirs:   "a\nx\nb\nc\n",
			conflict: true,
		},

		// No newline at the end.
		{
			name:   "no trailing newline, edits at top and bottom",
			base:   "a\nm\nb",
			ours:   "A\nm\nb",
			theirs: "a\nm\nB",
			want:   "A\nm\nB",
		},
		{
			name:   "no trailing newline, a line appended",
			base:   "a\nm\nb",
			ours:   "A\nm\nb",
			theirs: "a\nm\nb\nc",
			want:   "A\nm\nb\nc",
		},
		{
			name:   "trailing newline added by both",
			base:   "a\nm\nb",
			ours:   "A\nm\nb\n",
			theirs: "a\nm\nb\n",
			want:   "A\nm\nb\n",
		},
		{
			name:   "trailing newline removed, other edits the top",
			base:   "a\nm\nb\n",
			ours:   "a\nm\nb",
			theirs: "A\nm\nb\n",
			want:   "A\nm\nb",
		},
		{
			name:     "trailing newline added, other edits the last line",
			base:     "a\nm\nb",
			ours:     "a\nm\nb\n",
			theirs:   "a\nm\nB",
			conflict: true,
		},
		{
			name:     "different lines appended without newline",
			base:     "a\nb\n",
			ours:     "a\nb\nx",
			theirs:   "a\nb\ny",
			conflict: true,
		},
		{
			name:   "single line without newline replaced",
			base:   "a",
			ours:   "b",
			theirs: "a",
			want:   "b",
		},

		// Empty base: both sides add the file.
		{name: "empty base, same content", base: "", ours: "a\nb\n", theirs: "a\nb\n", want: "a\nb\n"},
		{name: "empty base, different content", base: "", ours: "a\n", theirs: "b\n", conflict: true},
		{name: "empty base, one side adds", base: "", ours: "a\n", theirs: "", want: "a\n"},
		{name: "empty base, common first line", base: "", ours: "a\nb\n", theirs: "a\nc\n", conflict: true},

		// CRLF lines are lines like any other.
		{
			name:   "crlf edits at top and bottom",
			base:   "a\r\nb\r\nc\r\nd\r\n",
			ours:   "A\r\nb\r\nc\r\nd\r\n",
			theirs: "a\r\nb\r\nc\r\nD\r\n",
			want:   "A\r\nb\r\nc\r\nD\r\n",
		},
		{
			name:   "crlf turned lf on one line, other edits elsewhere",
			base:   "a\r\nb\r\nc\r\nd\r\n",
			ours:   "a\nb\r\nc\r\nd\r\n",
			theirs: "a\r\nb\r\nc\r\nD\r\n",
			want:   "a\nb\r\nc\r\nD\r\n",
		},
		{
			name:     "crlf turned lf on a line the other edits",
			base:     "a\r\nb\r\nc\r\n",
			ours:     "a\r\nb\nc\r\n",
			theirs:   "a\r\nB\r\nc\r\n",
			conflict: true,
		},
		{
			name:     "whole file crlf to lf against an edit",
			base:     "a\r\nb\r\nc\r\n",
			ours:     "a\nb\nc\n",
			theirs:   "a\r\nb\r\nC\r\n",
			conflict: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, swap := range []bool{false, true} {
				ours, theirs := tt.ours, tt.theirs
				if swap {
					ours, theirs = theirs, ours
				}
				merged, conflict := Merge3([]byte(tt.base), []byte(ours), []byte(theirs))
				if conflict != tt.conflict {
					t.Fatalf("Merge3(swap=%v) conflict = %v, want %v (merged %q)", swap, conflict, tt.conflict, merged)
				}
				if conflict {
					if merged != nil {
						t.Errorf("Merge3(swap=%v) merged = %q on conflict, want nil", swap, merged)
					}
					continue
				}
				if merged == nil {
					t.Errorf("Merge3(swap=%v) merged = nil on a clean merge", swap)
				}
				if string(merged) != tt.want {
					t.Errorf("Merge3(swap=%v) = %q, want %q", swap, merged, tt.want)
				}
			}
		})
	}
}

// TestMerge3DoesNotAlias checks that the caller may change the result
// without changing the inputs, on the shortcut paths too.
func TestMerge3DoesNotAlias(t *testing.T) {
	for _, tc := range [][3]string{
		{"a\n", "a\n", "b\n"},
		{"a\n", "b\n", "a\n"},
		{"a\n", "b\n", "b\n"},
		{"a\nm\nc\n", "A\nm\nc\n", "a\nm\nC\n"},
	} {
		base, ours, theirs := []byte(tc[0]), []byte(tc[1]), []byte(tc[2])
		merged, conflict := Merge3(base, ours, theirs)
		if conflict {
			t.Fatalf("Merge3(%q, %q, %q) conflicts", base, ours, theirs)
		}
		for i := range merged {
			merged[i] = '#'
		}
		if string(base) != tc[0] || string(ours) != tc[1] || string(theirs) != tc[2] {
			t.Errorf("writing to the result of Merge3(%q, %q, %q) changed an input", tc[0], tc[1], tc[2])
		}
	}
}

func TestSplitLines(t *testing.T) {
	tests := []struct {
		text string
		want []string
	}{
		{"", nil},
		{"\n", []string{"\n"}},
		{"a", []string{"a"}},
		{"a\nb", []string{"a\n", "b"}},
		{"a\r\nb\r\n", []string{"a\r\n", "b\r\n"}},
		{"a\n\nb\n", []string{"a\n", "\n", "b\n"}},
		{"a\rb\n", []string{"a\rb\n"}},
	}
	for _, tt := range tests {
		var got []string
		for _, line := range splitLines([]byte(tt.text)) {
			got = append(got, string(line))
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) || len(got) != len(tt.want) {
			t.Errorf("splitLines(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

// TestDiffLinesMinimal compares the number of changed lines with a longest
// common subsequence found by dynamic programming, on random inputs over
// small alphabets, where many alignments tie.
func TestDiffLinesMinimal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		a := randomIDs(rng, rng.IntN(30), 1+rng.IntN(6))
		b := randomIDs(rng, rng.IntN(30), 1+rng.IntN(6))
		hunks := diffLines(a, b, costLimit(len(a)+len(b)))
		checkHunks(t, a, b, hunks)
		changed := 0
		for _, h := range hunks {
			changed += h.baseEnd - h.baseStart + h.sideEnd - h.sideStart
		}
		if want := len(a) + len(b) - 2*lcsLength(a, b); changed != want {
			t.Fatalf("diffLines(%v, %v) changes %d lines, a minimal diff changes %d", a, b, changed, want)
		}
	}
}

// TestDiffLinesCostLimit forces the cost limit that guards the time on
// pathological inputs, and checks the diff stays valid.
func TestDiffLinesCostLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		a := randomIDs(rng, rng.IntN(80), 1+rng.IntN(4))
		b := randomIDs(rng, rng.IntN(80), 1+rng.IntN(4))
		checkHunks(t, a, b, diffLines(a, b, rng.IntN(4)))
	}
}

// TestDiffLinesLargeRewrite checks that two large unrelated files with the
// same few repeated lines diff quickly and validly.
func TestDiffLinesLargeRewrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	a := randomIDs(rng, 20000, 3)
	b := randomIDs(rng, 20000, 3)
	checkHunks(t, a, b, diffLines(a, b, costLimit(len(a)+len(b))))
}

func randomIDs(rng *rand.Rand, n, alphabet int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = rng.IntN(alphabet)
	}
	return ids
}

// checkHunks checks that hunks are ordered, apart, in range, and turn a into b.
func checkHunks(t *testing.T, a, b []int, hunks []hunk) {
	t.Helper()
	var got []int
	pos, sidePos := 0, 0
	for k, h := range hunks {
		if h.baseStart > h.baseEnd || h.sideStart > h.sideEnd || h.baseEnd > len(a) || h.sideEnd > len(b) {
			t.Fatalf("diffLines(%v, %v): hunk %d %+v out of range", a, b, k, h)
		}
		if h.baseStart == h.baseEnd && h.sideStart == h.sideEnd {
			t.Fatalf("diffLines(%v, %v): hunk %d %+v is empty", a, b, k, h)
		}
		if k > 0 && (h.baseStart <= pos || h.sideStart <= sidePos) {
			t.Fatalf("diffLines(%v, %v): hunk %d %+v does not follow the previous one apart", a, b, k, h)
		}
		if h.baseStart-pos != h.sideStart-sidePos {
			t.Fatalf("diffLines(%v, %v): hunk %d %+v unchanged runs differ in length", a, b, k, h)
		}
		got = append(got, a[pos:h.baseStart]...)
		got = append(got, b[h.sideStart:h.sideEnd]...)
		pos, sidePos = h.baseEnd, h.sideEnd
	}
	got = append(got, a[pos:]...)
	if fmt.Sprint(got) != fmt.Sprint(b) {
		t.Fatalf("diffLines(%v, %v) hunks %+v give %v", a, b, hunks, got)
	}
}

func lcsLength(a, b []int) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for i := range a {
		for j := range b {
			if a[i] == b[j] {
				cur[j+1] = prev[j] + 1
			} else {
				cur[j+1] = max(cur[j], prev[j+1])
			}
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// separator is a line that disjointEdits keeps out of the edited parts, so
// that it stays unchanged on both sides between their edits.
const separator = "\x00merge3 separator\x00\n"

// disjointEdits builds a base of top + separator + bottom, ours with top
// replaced by newTop, and theirs with bottom replaced by newBottom, and the
// merge of the two.
func disjointEdits(top, newTop, bottom, newBottom []byte) (base, ours, theirs, want []byte) {
	top, newTop = wholeLines(top), wholeLines(newTop)
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	return join(top, []byte(separator), bottom),
		join(newTop, []byte(separator), bottom),
		join(top, []byte(separator), newBottom),
		join(newTop, []byte(separator), newBottom)
}

// wholeLines drops lines equal to separator and ends text with a newline.
func wholeLines(text []byte) []byte {
	var out []byte
	for _, line := range splitLines(text) {
		if !bytes.HasSuffix(line, []byte{'\n'}) {
			line = append(line, '\n')
		}
		if string(line) != separator {
			out = append(out, line...)
		}
	}
	return out
}

func FuzzMerge3(f *testing.F) {
	f.Add([]byte("a\nb\nc\n"), []byte("A\nb\nc\n"), []byte("a\nb\nC\n"))
	f.Add([]byte("a\nb\nc\n"), []byte("a\nX\nc\n"), []byte("a\nY\nc\n"))
	f.Add([]byte(""), []byte("a\n"), []byte("b\n"))
	f.Add([]byte("a\nm\nb"), []byte("A\nm\nb"), []byte("a\nm\nb\nc"))
	f.Add([]byte("a\r\nb\r\nc\r\n"), []byte("a\nb\r\nc\r\n"), []byte("a\r\nb\r\nC\r\n"))
	f.Add([]byte("x\nx\nx\ny\n"), []byte("x\ny\nx\n"), []byte("y\nx\nx\nx\n"))
	f.Fuzz(func(t *testing.T, base, x, y []byte) {
		if merged, conflict := Merge3(base, base, x); conflict || !bytes.Equal(merged, x) {
			t.Fatalf("Merge3(b, b, x) = %q, %v; want x = %q", merged, conflict, x)
		}
		if merged, conflict := Merge3(base, x, base); conflict || !bytes.Equal(merged, x) {
			t.Fatalf("Merge3(b, x, b) = %q, %v; want x = %q", merged, conflict, x)
		}
		if merged, conflict := Merge3(base, x, x); conflict || !bytes.Equal(merged, x) {
			t.Fatalf("Merge3(b, x, x) = %q, %v; want x = %q", merged, conflict, x)
		}

		merged, conflict := Merge3(base, x, y)
		if conflict != (merged == nil) {
			t.Fatalf("Merge3(%q, %q, %q) = %q, %v: merged must be nil exactly on conflict", base, x, y, merged, conflict)
		}
		again, againConflict := Merge3(base, x, y)
		swapped, swappedConflict := Merge3(base, y, x)
		if !bytes.Equal(again, merged) || againConflict != conflict {
			t.Fatalf("Merge3(%q, %q, %q) is not deterministic", base, x, y)
		}
		if !bytes.Equal(swapped, merged) || swappedConflict != conflict {
			t.Fatalf("Merge3(%q, %q, %q) = %q, %v but swapped = %q, %v", base, x, y, merged, conflict, swapped, swappedConflict)
		}

		b, o, th, want := disjointEdits(x, y, base, x)
		if merged, conflict := Merge3(b, o, th); conflict || !bytes.Equal(merged, want) {
			t.Fatalf("disjoint edits: Merge3(%q, %q, %q) = %q, %v; want %q", b, o, th, merged, conflict, want)
		}

		ids := lineIDs{}
		baseIDs, xIDs := ids.of(splitLines(base)), ids.of(splitLines(x))
		checkHunks(t, baseIDs, xIDs, diffLines(baseIDs, xIDs, costLimit(len(baseIDs)+len(xIDs))))
		checkHunks(t, baseIDs, xIDs, diffLines(baseIDs, xIDs, 1))
	})
}

// BenchmarkMerge3 merges a 2,000-line file with 20 disjoint edits per side.
func BenchmarkMerge3(b *testing.B) {
	var base, ours, theirs strings.Builder
	for i := range 2000 {
		line := fmt.Sprintf("  key%04d: value %d\n", i, i%7)
		base.WriteString(line)
		switch {
		case i%100 == 10:
			fmt.Fprintf(&ours, "  key%04d: ours %d\n", i, i)
		case i%100 == 60:
			fmt.Fprintf(&theirs, "  key%04d: theirs %d\n  added%04d: true\n", i, i, i)
			ours.WriteString(line)
			continue
		default:
			ours.WriteString(line)
		}
		theirs.WriteString(line)
	}
	baseText, ourText, theirText := []byte(base.String()), []byte(ours.String()), []byte(theirs.String())
	if _, conflict := Merge3(baseText, ourText, theirText); conflict {
		b.Fatal("benchmark input conflicts")
	}
	b.ReportAllocs()
	for b.Loop() {
		Merge3(baseText, ourText, theirText)
	}
}

func ExampleMerge3() {
	base := []byte("name: agent\nmodel: small\ntimeout: 30\n")
	ours := []byte("name: agent\nmodel: large\ntimeout: 30\n")
	theirs := []byte("name: agent\nmodel: small\ntimeout: 30\nretries: 2\n")
	merged, conflict := Merge3(base, ours, theirs)
	fmt.Printf("%s%v\n", merged, conflict)

	_, conflict = Merge3(base, ours, []byte("name: agent\nmodel: medium\ntimeout: 30\n"))
	fmt.Println(conflict)
	// Output:
	// name: agent
	// model: large
	// timeout: 30
	// retries: 2
	// false
	// true
}

// TestMergeWithMarkers: the conflicting stretch alone is wrapped in git's
// markers, ours first; what merges cleanly around it is merged; a clean
// merge has no markers.
func TestMergeWithMarkers(t *testing.T) {
	base := "a\nb\nc\nd\ne\n"
	ours := "A\nb\nc-ours\nd\ne\n"
	theirs := "a\nb\nc-theirs\nd\nE"
	got, conflict := MergeWithMarkers([]byte(base), []byte(ours), []byte(theirs), "git:123")
	want := "A\nb\n<<<<<<< changeset\nc-ours\n=======\nc-theirs\n>>>>>>> active git:123\nd\nE"
	if !conflict || string(got) != want {
		t.Fatalf("got %v\n%s\nwant\n%s", conflict, got, want)
	}
	got, conflict = MergeWithMarkers([]byte(base), []byte(ours), []byte("a\nb\nc\nd\nE\n"), "git:123")
	if conflict || string(got) != "A\nb\nc-ours\nd\nE\n" {
		t.Fatalf("a clean merge: %v %q", conflict, got)
	}
	// A side without a final newline still gets its marker on a line of
	// its own.
	got, conflict = MergeWithMarkers([]byte("x"), []byte("y"), []byte("z"), "git:1")
	if !conflict || string(got) != "<<<<<<< changeset\ny\n=======\nz\n>>>>>>> active git:1\n" {
		t.Fatalf("no final newline: %q", got)
	}
}
