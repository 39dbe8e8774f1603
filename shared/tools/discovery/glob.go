package discovery

// The glob matcher is written here rather than taken from a library
// because none has the semantics the seed's fnmatch gives selectors:
// path.Match and filepath.Match stop "*" at "/", are case-sensitive and
// give "[" and "\" meanings that tool names and paths do not expect;
// github.com/gobwas/glob has no case folding; translating to a regular
// expression would work (RE2 is linear too) but costs a compile, an
// allocation-heavy automaton and quoting of every literal for each of
// thousands of selector × tool checks at index build.
//
// The algorithm never backtracks. A pattern is split at its stars into
// fixed-length segments (a "?" is one rune of any value): the first must
// match at the start of the value, the last at its end, and the ones in
// between are found left to right, each at its leftmost occurrence after
// the previous one — taking the leftmost occurrence is always safe because
// a star can absorb anything that a later occurrence would have skipped.
// Each search is a bit-parallel Shift-And scan, so the whole match reads
// every rune of the value once: O(len(value) · ⌈len(segment)/64⌉) time,
// linear for segments up to 64 runes, whatever the pattern.

const anyRune rune = -1 // a "?" in a segment

type glob struct {
	exact  bool      // no star: first must equal the whole value
	first  []rune    // before the first star
	middle []segment // between stars, in order
	last   []rune    // after the last star
}

type segment struct {
	runes []rune
	words int // uint64 words of Shift-And state
	// ascii[c*words:(c+1)*words] is the mask of positions that rune c
	// (< 128) matches; other holds the masks of the non-ASCII runes of
	// the segment; wild is the mask of the "?" positions, which every
	// rune matches.
	ascii []uint64
	other map[rune][]uint64
	wild  []uint64
}

func compileGlob(p string) *glob {
	var parts [][]rune // the segments between stars: one more than the stars
	cur := []rune{}
	for _, r := range p {
		switch r {
		case '*':
			parts = append(parts, cur)
			cur = []rune{}
		case '?':
			cur = append(cur, anyRune)
		default:
			cur = append(cur, foldRune(r))
		}
	}
	parts = append(parts, cur)
	if len(parts) == 1 {
		return &glob{exact: true, first: parts[0]}
	}
	g := &glob{first: parts[0], last: parts[len(parts)-1]}
	for _, m := range parts[1 : len(parts)-1] {
		if len(m) > 0 { // "**" is "*"
			g.middle = append(g.middle, newSegment(m))
		}
	}
	return g
}

func newSegment(runes []rune) segment {
	s := segment{runes: runes, words: (len(runes) + 63) / 64}
	s.ascii = make([]uint64, 128*s.words)
	s.wild = make([]uint64, s.words)
	for i, r := range runes {
		w, bit := i/64, uint64(1)<<(i%64)
		switch {
		case r == anyRune:
			s.wild[w] |= bit
		case r < 128:
			s.ascii[int(r)*s.words+w] |= bit
		default:
			if s.other == nil {
				s.other = map[rune][]uint64{}
			}
			m := s.other[r]
			if m == nil {
				m = make([]uint64, s.words)
				s.other[r] = m
			}
			m[w] |= bit
		}
	}
	for c := range 128 {
		for w := range s.words {
			s.ascii[c*s.words+w] |= s.wild[w]
		}
	}
	for _, m := range s.other {
		for w := range s.words {
			m[w] |= s.wild[w]
		}
	}
	return s
}

// mask returns the positions of the segment that rune c matches.
func (s *segment) mask(c rune) []uint64 {
	if 0 <= c && c < 128 {
		return s.ascii[int(c)*s.words : (int(c)+1)*s.words]
	}
	if m, ok := s.other[c]; ok {
		return m
	}
	return s.wild
}

// find returns the end of the leftmost occurrence of the segment in
// v[from:to], and whether there is one. (A window shorter than the
// segment needs no check of its own: the scan cannot reach the final
// state in it, and costs less than the segment's length.)
func (s *segment) find(v []rune, from, to int) (int, bool) {
	n := len(s.runes)
	if s.words == 1 {
		var d uint64
		final := uint64(1) << (n - 1)
		for j := from; j < to; j++ {
			d = ((d << 1) | 1) & s.mask(v[j])[0]
			if d&final != 0 {
				return j + 1, true
			}
		}
		return 0, false
	}
	d := make([]uint64, s.words)
	lastWord, final := (n-1)/64, uint64(1)<<((n-1)%64)
	for j := from; j < to; j++ {
		m := s.mask(v[j])
		carry := uint64(1)
		for w := range d {
			next := d[w] >> 63
			d[w] = ((d[w] << 1) | carry) & m[w]
			carry = next
		}
		if d[lastWord]&final != 0 {
			return j + 1, true
		}
	}
	return 0, false
}

// matchAt reports whether fixed matches v starting at i (in bounds).
func matchAt(fixed, v []rune, i int) bool {
	for k, r := range fixed {
		if r != anyRune && r != v[i+k] {
			return false
		}
	}
	return true
}

// match reports whether the folded value v matches.
func (g *glob) match(v []rune) bool {
	n := len(v)
	if g.exact {
		return n == len(g.first) && matchAt(g.first, v, 0)
	}
	if n < len(g.first)+len(g.last) {
		return false
	}
	if !matchAt(g.first, v, 0) || !matchAt(g.last, v, n-len(g.last)) {
		return false
	}
	pos, end := len(g.first), n-len(g.last)
	for i := range g.middle {
		e, ok := g.middle[i].find(v, pos, end)
		if !ok {
			return false
		}
		pos = e
	}
	return true
}
