package changeset

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// newMyers sizes the search buffers for split(a, b) as markChanges does.
func newMyers(a, b []int, maxCost int) *myers {
	size := 2*((len(a)+len(b)+1)/2) + 2
	return &myers{fwd: make([]int, size), bwd: make([]int, size), maxCost: maxCost}
}

// TestSplitOnAShortestPath checks, on random inputs that meet split's
// precondition (non-empty, first and last lines differ), that a search
// without a cost limit finds a point strictly inside whenever the two have
// a line in common, and that the point lies on a shortest edit path: the
// common lines before it and after it add up to a longest common
// subsequence of the whole. With no line in common there is nothing to
// split on, and split says so (compare then marks all of both changed).
func TestSplitOnAShortestPath(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for found := 0; found < 2000; {
		a := randomIDs(rng, 1+rng.IntN(12), 1+rng.IntN(5))
		b := randomIDs(rng, 1+rng.IntN(12), 1+rng.IntN(5))
		if a[0] == b[0] || a[len(a)-1] == b[len(b)-1] {
			continue
		}
		found++
		x, y, ok := newMyers(a, b, len(a)+len(b)).split(a, b)
		if lcsLength(a, b) == 0 {
			if ok {
				t.Fatalf("split(%v, %v) = (%d, %d), want no point: no line in common", a, b, x, y)
			}
			continue
		}
		if !ok {
			t.Fatalf("split(%v, %v) found no point", a, b)
		}
		if x < 0 || y < 0 || x > len(a) || y > len(b) || x+y == 0 || x+y == len(a)+len(b) {
			t.Fatalf("split(%v, %v) = (%d, %d), not strictly inside", a, b, x, y)
		}
		if got, want := lcsLength(a[:x], b[:y])+lcsLength(a[x:], b[y:]), lcsLength(a, b); got != want {
			t.Fatalf("split(%v, %v) = (%d, %d): %d common lines through it, a longest common subsequence has %d", a, b, x, y, got, want)
		}
	}
}

// TestSplitPastTheCostLimit pins the point split settles for once the
// search has spent its cost limit without the two ends meeting: the point
// carried furthest (largest x+y) by the forward or the backward search,
// the forward one on a tie, and on each side the first diagonal found
// (insertions before deletions) on a tie, so that a merge gives the same
// answer everywhere.
func TestSplitPastTheCostLimit(t *testing.T) {
	tests := []struct {
		name    string
		a, b    []int
		maxCost int
		x, y    int
		ok      bool
	}{
		{
			// With no edit to spend the search stays at the two ends, which
			// differ: no point strictly inside.
			name: "no edit allowed", a: []int{1, 2}, b: []int{2, 1}, maxCost: 0,
			x: 0, y: 0, ok: false,
		},
		{
			// Inserting 0 lets the forward search run along 1 2 3 to (3, 4);
			// one edit from the end (4 against 5) reaches no common line.
			name: "forward furthest after an insertion", a: []int{1, 2, 3, 4}, b: []int{0, 1, 2, 3, 5}, maxCost: 1,
			x: 3, y: 4, ok: true,
		},
		{
			// Inserting the last 4 lets the backward search run back along
			// 3 2 1 to (1, 2); one edit from the start reaches no common line.
			name: "backward furthest after an insertion", a: []int{5, 1, 2, 3}, b: []int{6, 7, 1, 2, 3, 4}, maxCost: 1,
			x: 1, y: 2, ok: true,
		},
		{
			// Deleting the last 5 lets the backward search match 4 and stop
			// at (3, 0).
			name: "backward furthest after a deletion", a: []int{1, 2, 3, 4, 5}, b: []int{4}, maxCost: 1,
			x: 3, y: 0, ok: true,
		},
		{
			// Every point one edit from either end is as far as any other:
			// the forward search's insertion, (0, 1), is taken.
			name: "all tie", a: []int{1, 2, 3}, b: []int{3, 2, 1}, maxCost: 1,
			x: 0, y: 1, ok: true,
		},
		{
			// From the end, inserting 1 then matching 0 and deleting 0 then
			// matching 1 go equally far (x+y = 3 of 6); the insertion comes
			// first and ends at (2, 1). From the start one edit matches
			// nothing.
			name: "backward tie", a: []int{7, 1, 0}, b: []int{8, 0, 1}, maxCost: 1,
			x: 2, y: 1, ok: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, y, ok := newMyers(tt.a, tt.b, tt.maxCost).split(tt.a, tt.b)
			if x != tt.x || y != tt.y || ok != tt.ok {
				t.Errorf("split(%v, %v) with cost limit %d = (%d, %d, %v), want (%d, %d, %v)",
					tt.a, tt.b, tt.maxCost, x, y, ok, tt.x, tt.y, tt.ok)
			}
		})
	}
}

// TestSplitWithoutLimitOnALongerSide checks a split point whose x+y
// equals len(a)-len(b): it is inside, and split must say so.
func TestSplitWithoutLimitOnALongerSide(t *testing.T) {
	a, b := []int{1, 2, 3, 4, 5}, []int{3}
	x, y, ok := newMyers(a, b, len(a)+len(b)).split(a, b)
	if x != 3 || y != 1 || !ok {
		t.Errorf("split(%v, %v) = (%d, %d, %v), want (3, 1, true): the only common line, 3, ends the first part", a, b, x, y, ok)
	}
}

// TestMergeSizedExactly checks that a clean merge of disjoint edits
// allocates its result once, at its final length: merge3 sizes it as
// len(ours)+len(theirs)-len(base).
func TestMergeSizedExactly(t *testing.T) {
	for _, tc := range [][3]string{
		{"a\nm\nc\n", "A long first line\nm\nc\n", "a\nm\nC\n"},
		{"a\nm\nc\nd\n", "a\nm\n", "a2\nm\nc\nd\n"},
		{"one\ntwo\nthree\nfour\nfive\n", "one\n2\nthree\nfour\nfive\n", "one\ntwo\nthree\nfour\n5\nsix\n"},
	} {
		merged, conflict := Merge3([]byte(tc[0]), []byte(tc[1]), []byte(tc[2]))
		if conflict {
			t.Fatalf("Merge3(%q, %q, %q) conflicts", tc[0], tc[1], tc[2])
		}
		if want := len(tc[1]) + len(tc[2]) - len(tc[0]); len(merged) != want || cap(merged) != want {
			t.Errorf("Merge3(%q, %q, %q) = %q: len %d, cap %d, want both %d", tc[0], tc[1], tc[2], merged, len(merged), cap(merged), want)
		}
	}
}

// TestHunksOfOneSideRunsOut: unchanged lines pair up in order; when one
// side has more of them, the rest of that side is changed, in one last
// hunk, and the walk ends.
func TestHunksOfOneSideRunsOut(t *testing.T) {
	for _, tt := range []struct {
		name               string
		changedA, changedB []bool
		want               []hunk
	}{
		{"a has one more", []bool{false, false}, []bool{false}, []hunk{{baseStart: 1, baseEnd: 2, sideStart: 1, sideEnd: 1}}},
		{"b has one more", []bool{false}, []bool{false, false}, []hunk{{baseStart: 1, baseEnd: 1, sideStart: 1, sideEnd: 2}}},
		{"a has more after a change", []bool{true, false, false}, []bool{false}, []hunk{{baseStart: 0, baseEnd: 1, sideStart: 0, sideEnd: 0}, {baseStart: 2, baseEnd: 3, sideStart: 1, sideEnd: 1}}},
	} {
		got := hunksOf(tt.changedA, tt.changedB)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: hunksOf(%v, %v) = %+v, want %+v", tt.name, tt.changedA, tt.changedB, got, tt.want)
		}
	}
}
