package skills

import (
	"strings"
	"unicode"
)

// tokenize appends the terms of s to dst: maximal runs of Unicode letters,
// digits and combining marks, lowercased. Everything else (spaces,
// punctuation, symbols, '_', '-') separates terms, so "pdf-extract" is
// "pdf" and "extract", and Korean text splits on its spaces and punctuation:
// "데이터 분석, 보고서" is "데이터", "분석", "보고서".
//
// Marks stay inside a term because scripts such as Devanagari and Thai
// write vowels as combining marks; splitting there would cut words apart.
//
// There is deliberately no stemming, stop-word list or morphological
// analysis: "reports" does not match "report", and a Korean word with a
// particle attached ("데이터를") does not match the bare word ("데이터").
// Nor is text Unicode-normalized: it is compared as given (NFC expected).
func tokenize(s string, dst []string) []string {
	start := -1
	for i, r := range s {
		if isTermRune(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			dst = append(dst, strings.ToLower(s[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		dst = append(dst, strings.ToLower(s[start:]))
	}
	return dst
}

func isTermRune(r rune) bool {
	if r < 0x80 {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}
