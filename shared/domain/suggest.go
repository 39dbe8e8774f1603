package domain

import "strings"

// Suggest is agentauth's one "did you mean": the name among known that
// name most likely misspells, or "" when none is near enough. The bundle
// loader says it of a YAML field, the HTTP edge of a JSON field.
//
// In order: the same name in another case ("Auth" → "auth"); else the
// nearest whole name within a few edits — a letter changed, added,
// dropped, or two swapped, case ignored ("scope" → "scopes"); else the
// nearest name whose beginning is within those edits, for a name cut
// short ("agnet" → "agentName"). The edits allowed grow with the name's
// length: 1 up to 4 letters, 2 up to 8, then 3; a name under 3 letters
// gets only the case match. Ties go to the first in known.
func Suggest(name string, known []string) string {
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return k
		}
	}
	n := []rune(strings.ToLower(name))
	limit := suggestEdits(len(n))
	if limit == 0 {
		return ""
	}
	best, bestD := "", limit+1
	for _, k := range known {
		if d := editDistance(n, []rune(strings.ToLower(k))); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return best
	}
	for _, k := range known {
		kr := []rune(strings.ToLower(k))
		if len(kr) <= len(n) {
			continue
		}
		// The beginning of k as long as name, give or take a letter (one
		// dropped or added in name shifts where it ends).
		for m := len(n) - 1; m <= len(n)+1 && m <= len(kr); m++ {
			if d := editDistance(n, kr[:m]); d < bestD {
				best, bestD = k, d
			}
		}
	}
	return best
}

// suggestEdits is how many edits Suggest allows for a name of n letters.
func suggestEdits(n int) int {
	switch {
	case n < 3:
		return 0
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

// editDistance is the optimal string alignment distance of a and b: the
// fewest letters changed, added, dropped or swapped with their neighbour
// (each letter edited once) that turn a into b.
func editDistance(a, b []rune) int {
	// Three rows of the table: two back (for a swap), one back, this one.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
