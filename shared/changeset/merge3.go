package changeset

// This file holds the line-based three-way merge of one file's content,
// used when a changeset commits after the active head has moved.

import (
	"bytes"
	"math"
)

// Merge3 merges the changes from base to ours and from base to theirs, line by line.
// conflict reports overlapping changes; merged is then nil.
//
// It follows git's default merge, without conflict markers. Lines keep their
// terminators, so "a\n", "a\r\n" and a last "a" without a newline are three
// different lines. Each side's changes against base are hunks: a run of base
// lines replaced by a run of new lines. Hunks of the two sides that overlap
// in base, or touch (one ends where the other starts, or both insert at the
// same place), conflict unless both sides turn that stretch of base into the
// same text, which is then taken once. Hunks with at least one unchanged base
// line between them both apply.
//
// A clean merge returns a new slice, never nil, even when it is empty.
func Merge3(base, ours, theirs []byte) (merged []byte, conflict bool) {
	switch {
	case bytes.Equal(ours, theirs), bytes.Equal(theirs, base):
		return append([]byte{}, ours...), false
	case bytes.Equal(ours, base):
		return append([]byte{}, theirs...), false
	}
	return merge3(base, ours, theirs, nil)
}

// MergeWithMarkers is Merge3 that, where the sides conflict, keeps both
// with git's conflict markers around each conflicting stretch —
// "<<<<<<< changeset", ours, "=======", theirs, ">>>>>>> active <theirLabel>"
// — and merges the rest; conflict reports whether it wrote any.
func MergeWithMarkers(base, ours, theirs []byte, theirLabel string) (merged []byte, conflict bool) {
	if m, c := Merge3(base, ours, theirs); !c {
		return m, false
	}
	mark := func(dst, ourText, theirText []byte) []byte {
		dst = append(dst, "<<<<<<< changeset\n"...)
		dst = append(dst, withNewline(ourText)...)
		dst = append(dst, "=======\n"...)
		dst = append(dst, withNewline(theirText)...)
		return append(dst, ">>>>>>> active "+theirLabel+"\n"...)
	}
	return merge3(base, ours, theirs, mark)
}

// merge3 merges base, ours and theirs line by line; mark, when not nil,
// writes a conflicting stretch, else a conflict ends the merge.
func merge3(base, ours, theirs []byte, mark func(dst, ourText, theirText []byte) []byte) ([]byte, bool) {
	baseLines, ourLines, theirLines := splitLines(base), splitLines(ours), splitLines(theirs)
	ids := lineIDs{}
	baseIDs := ids.of(baseLines)
	ourHunks := diffLines(baseIDs, ids.of(ourLines), costLimit(len(baseLines)+len(ourLines)))
	theirHunks := diffLines(baseIDs, ids.of(theirLines), costLimit(len(baseLines)+len(theirLines)))
	// A clean merge of disjoint hunks is exactly this long.
	size := max(0, len(ours)+len(theirs)-len(base))
	return mergeHunks(baseLines, ourLines, theirLines, ourHunks, theirHunks, size, mark)
}

// splitLines cuts text after each '\n'; a last line without one is a line too.
func splitLines(text []byte) [][]byte {
	lines := make([][]byte, 0, bytes.Count(text, []byte{'\n'})+1)
	for len(text) > 0 {
		n := bytes.IndexByte(text, '\n') + 1
		if n == 0 {
			n = len(text)
		}
		lines = append(lines, text[:n:n])
		text = text[n:]
	}
	return lines
}

// lineIDs numbers distinct lines, so that the diff compares ints, not bytes.
type lineIDs map[string]int

func (m lineIDs) of(lines [][]byte) []int {
	ids := make([]int, len(lines))
	for i, line := range lines {
		id, ok := m[string(line)]
		if !ok {
			id = len(m)
			m[string(line)] = id
		}
		ids[i] = id
	}
	return ids
}

// hunk replaces base[baseStart:baseEnd] with side[sideStart:sideEnd]. One of
// the two ranges may be empty (an insertion or a deletion), never both.
// Consecutive hunks of one side have at least one unchanged base line
// between them.
type hunk struct {
	baseStart, baseEnd int
	sideStart, sideEnd int
}

// mergeHunks walks both hunk lists over base. Hunks that overlap or touch
// are grouped into one chunk, transitively; a chunk with hunks from one side
// takes that side's text, and one with hunks from both sides is clean only
// if both sides give the same text for it.
func mergeHunks(base, ours, theirs [][]byte, ourHunks, theirHunks []hunk, size int, mark func(dst, ourText, theirText []byte) []byte) ([]byte, bool) {
	out := make([]byte, 0, size)
	conflict := false
	copied := 0 // base lines before this are in out
	i, j := 0, 0
	for i < len(ourHunks) || j < len(theirHunks) {
		ni, nj := i, j
		var lo, hi int
		if nj == len(theirHunks) || (ni < len(ourHunks) && ourHunks[ni].baseStart <= theirHunks[nj].baseStart) {
			lo, hi = ourHunks[ni].baseStart, ourHunks[ni].baseEnd
			ni++
		} else {
			lo, hi = theirHunks[nj].baseStart, theirHunks[nj].baseEnd
			nj++
		}
		// A hunk starting at hi touches the chunk: git counts that as a
		// conflict too, since no unchanged line keeps the edits apart.
		for {
			if ni < len(ourHunks) && ourHunks[ni].baseStart <= hi {
				hi = max(hi, ourHunks[ni].baseEnd)
				ni++
			} else if nj < len(theirHunks) && theirHunks[nj].baseStart <= hi {
				hi = max(hi, theirHunks[nj].baseEnd)
				nj++
			} else {
				break
			}
		}
		out = appendLines(out, base[copied:lo])
		switch {
		case nj == j:
			out = applyHunks(out, base, ours, ourHunks[i:ni], lo, hi)
		case ni == i:
			out = applyHunks(out, base, theirs, theirHunks[j:nj], lo, hi)
		default:
			ourText := applyHunks(nil, base, ours, ourHunks[i:ni], lo, hi)
			theirText := applyHunks(nil, base, theirs, theirHunks[j:nj], lo, hi)
			switch {
			case bytes.Equal(ourText, theirText):
				out = append(out, ourText...)
			case mark == nil:
				return nil, true
			default:
				out, conflict = mark(out, ourText, theirText), true
			}
		}
		copied, i, j = hi, ni, nj
	}
	return appendLines(out, base[copied:]), conflict
}

// applyHunks appends base[lo:hi] with hunks, which lie within it, applied.
func applyHunks(dst []byte, base, side [][]byte, hunks []hunk, lo, hi int) []byte {
	for _, h := range hunks {
		dst = appendLines(dst, base[lo:h.baseStart])
		dst = appendLines(dst, side[h.sideStart:h.sideEnd])
		lo = h.baseEnd
	}
	return appendLines(dst, base[lo:hi])
}

func appendLines(dst []byte, lines [][]byte) []byte {
	for _, line := range lines {
		dst = append(dst, line...)
	}
	return dst
}

// The diff below is a small Myers diff of our own rather than the line mode
// of github.com/sergi/go-diff: that one stops at a wall-clock deadline by
// default, after which its answer depends on the machine's speed, while a
// merge must give the same answer everywhere; it encodes each distinct line
// as a rune and panics past about 1.1 million of them; and it would be one
// more direct dependency for about 150 lines.

// diffLines returns the hunks that turn a into b, from a minimal edit script
// unless the search costs more than maxCost edits in one step (see split).
func diffLines(a, b []int, maxCost int) []hunk {
	changedA, changedB := make([]bool, len(a)), make([]bool, len(b))
	lo := 0
	for lo < len(a) && lo < len(b) && a[lo] == b[lo] {
		lo++
	}
	aHi, bHi := len(a), len(b)
	for aHi > lo && bHi > lo && a[aHi-1] == b[bHi-1] {
		aHi, bHi = aHi-1, bHi-1
	}
	markChanges(a[lo:aHi], b[lo:bHi], changedA[lo:aHi], changedB[lo:bHi], maxCost)
	return hunksOf(changedA, changedB)
}

// markChanges marks the lines of a and b that are not in a longest common
// subsequence. Lines found only on one side cannot be in one, so they are
// marked first and left out of the search, as git's xdiff does: a rewritten
// file then costs little.
func markChanges(a, b []int, changedA, changedB []bool, maxCost int) {
	if len(a) == 0 || len(b) == 0 {
		fill(changedA)
		fill(changedB)
		return
	}
	numIDs := 0
	for _, id := range a {
		numIDs = max(numIDs, id+1)
	}
	for _, id := range b {
		numIDs = max(numIDs, id+1)
	}
	inA, inB := make([]bool, numIDs), make([]bool, numIDs)
	for _, id := range a {
		inA[id] = true
	}
	for _, id := range b {
		inB[id] = true
	}
	keptA, indexA := keep(a, inB, changedA)
	keptB, indexB := keep(b, inA, changedB)
	size := 2*((len(keptA)+len(keptB)+1)/2) + 2
	m := myers{
		a: keptA, b: keptB,
		changedA: make([]bool, len(keptA)), changedB: make([]bool, len(keptB)),
		fwd: make([]int, size), bwd: make([]int, size),
		maxCost: maxCost,
	}
	m.compare(0, len(keptA), 0, len(keptB))
	for k, changed := range m.changedA {
		changedA[indexA[k]] = changed
	}
	for k, changed := range m.changedB {
		changedB[indexB[k]] = changed
	}
}

// keep returns the lines of s that occur on the other side, with their
// indexes in s, and marks the others changed.
func keep(s []int, onOtherSide []bool, changed []bool) (kept, index []int) {
	kept, index = make([]int, 0, len(s)), make([]int, 0, len(s))
	for i, id := range s {
		if onOtherSide[id] {
			kept = append(kept, id)
			index = append(index, i)
		} else {
			changed[i] = true
		}
	}
	return kept, index
}

func fill(changed []bool) {
	for i := range changed {
		changed[i] = true
	}
}

// hunksOf groups runs of changed lines into hunks. Unchanged lines pair up in
// order; should one side run out of them first, the rest of the other side
// is taken as changed, so the walk always ends.
func hunksOf(changedA, changedB []bool) []hunk {
	var hunks []hunk
	i, j := 0, 0
	for i < len(changedA) || j < len(changedB) {
		if i < len(changedA) && j < len(changedB) && !changedA[i] && !changedB[j] {
			i, j = i+1, j+1
			continue
		}
		h := hunk{baseStart: i, sideStart: j}
		for i < len(changedA) && (changedA[i] || j == len(changedB)) {
			i++
		}
		for j < len(changedB) && (changedB[j] || i == len(changedA)) {
			j++
		}
		h.baseEnd, h.sideEnd = i, j
		hunks = append(hunks, h)
	}
	return hunks
}

// costLimit bounds the edits one middle-snake search may explore before it
// settles for a good split instead of the best one, as xdiff does; below
// 2*256 edits per split the diff is always minimal.
func costLimit(lines int) int {
	return max(256, int(math.Sqrt(float64(lines))))
}

// myers is the linear-space divide-and-conquer form of Myers' O(ND) diff
// ("An O(ND) Difference Algorithm and Its Variations", 1986, section 4b).
type myers struct {
	a, b               []int
	changedA, changedB []bool
	fwd, bwd           []int // furthest x per diagonal; reused by every split
	maxCost            int
}

// compare marks the changes between a[aLo:aHi] and b[bLo:bHi].
func (m *myers) compare(aLo, aHi, bLo, bHi int) {
	for {
		for aLo < aHi && bLo < bHi && m.a[aLo] == m.b[bLo] {
			aLo, bLo = aLo+1, bLo+1
		}
		for aLo < aHi && bLo < bHi && m.a[aHi-1] == m.b[bHi-1] {
			aHi, bHi = aHi-1, bHi-1
		}
		if aLo == aHi || bLo == bHi {
			fill(m.changedA[aLo:aHi])
			fill(m.changedB[bLo:bHi])
			return
		}
		x, y, ok := m.split(m.a[aLo:aHi], m.b[bLo:bHi])
		if !ok {
			fill(m.changedA[aLo:aHi])
			fill(m.changedB[bLo:bHi])
			return
		}
		// Recurse on the first part and loop on the second, so the stack
		// stays shallow even when the cost limit splits many times.
		m.compare(aLo, aLo+x, bLo, bLo+y)
		aLo, bLo = aLo+x, bLo+y
	}
}

// split finds a point (x, y) on a shortest edit path from (0, 0) to
// (len(a), len(b)) by searching from both ends until the paths meet. Past
// maxCost edits it returns the point the search has carried furthest
// instead, which keeps the time bounded and the script valid but perhaps not
// minimal. ok is false only if no point strictly inside was found; a and b
// must be non-empty and differ in their first and last lines.
func (m *myers) split(a, b []int) (x, y int, ok bool) {
	n, mm := len(a), len(b)
	maxD := (n + mm + 1) / 2
	off := maxD
	size := 2*maxD + 2
	fwd, bwd := m.fwd[:size], m.bwd[:size]
	for i := range fwd {
		fwd[i], bwd[i] = -1, -1
	}
	fwd[off+1], bwd[off+1] = 0, 0
	delta := n - mm
	// With an odd delta the paths can first meet on a forward step, with an
	// even one on a backward step.
	front := delta%2 != 0
	k1start, k1end, k2start, k2end := 0, 0, 0, 0
	bestFwd, bestFwdX, bestFwdY := 0, 0, 0
	bestBwd, bestBwdX, bestBwdY := 0, 0, 0
	for d := 0; d < maxD; d++ {
		for k1 := -d + k1start; k1 <= d-k1end; k1 += 2 {
			i := off + k1
			var x1 int
			if k1 == -d || (k1 != d && fwd[i-1] < fwd[i+1]) {
				x1 = fwd[i+1]
			} else {
				x1 = fwd[i-1] + 1
			}
			y1 := x1 - k1
			for x1 < n && y1 < mm && a[x1] == b[y1] {
				x1, y1 = x1+1, y1+1
			}
			fwd[i] = x1
			switch {
			case x1 > n:
				k1end += 2
			case y1 > mm:
				k1start += 2
			default:
				if x1+y1 > bestFwd {
					bestFwd, bestFwdX, bestFwdY = x1+y1, x1, y1
				}
				if front {
					j := off + delta - k1
					if j >= 0 && j < size && bwd[j] != -1 && x1 >= n-bwd[j] {
						return inside(x1, y1, n, mm)
					}
				}
			}
		}
		for k2 := -d + k2start; k2 <= d-k2end; k2 += 2 {
			i := off + k2
			var x2 int
			if k2 == -d || (k2 != d && bwd[i-1] < bwd[i+1]) {
				x2 = bwd[i+1]
			} else {
				x2 = bwd[i-1] + 1
			}
			y2 := x2 - k2
			for x2 < n && y2 < mm && a[n-x2-1] == b[mm-y2-1] {
				x2, y2 = x2+1, y2+1
			}
			bwd[i] = x2
			switch {
			case x2 > n:
				k2end += 2
			case y2 > mm:
				k2start += 2
			default:
				if x2+y2 > bestBwd {
					bestBwd, bestBwdX, bestBwdY = x2+y2, x2, y2
				}
				if !front {
					j := off + delta - k2
					if j >= 0 && j < size && fwd[j] != -1 {
						x1 := fwd[j]
						if x1 >= n-x2 {
							return inside(x1, x1-(j-off), n, mm)
						}
					}
				}
			}
		}
		if d >= m.maxCost {
			if bestFwd >= bestBwd {
				return inside(bestFwdX, bestFwdY, n, mm)
			}
			return inside(n-bestBwdX, mm-bestBwdY, n, mm)
		}
	}
	return 0, 0, false
}

// inside reports (x, y) as a split point if it leaves both parts smaller
// than the whole, so that compare always ends.
func inside(x, y, n, mm int) (int, int, bool) {
	if x < 0 || y < 0 || x > n || y > mm || x+y == 0 || x+y == n+mm {
		return 0, 0, false
	}
	return x, y, true
}
