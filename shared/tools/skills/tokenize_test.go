package skills

import (
	"slices"
	"testing"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"empty", "", nil},
		{"only separators", " \t\n-_.,;:!?()[]{}'\"/\\|@#$%^&*+=<>~`", nil},
		{"english, lowercased", "Merge PDF files", []string{"merge", "pdf", "files"}},
		{"punctuation and symbols split", "pdf-extract_v2 (beta): x.y/z", []string{"pdf", "extract", "v2", "beta", "x", "y", "z"}},
		{"digits are terms", "top 10 in 2026", []string{"top", "10", "in", "2026"}},
		{"no stemming", "reports reporting report", []string{"reports", "reporting", "report"}},
		{"korean splits on spaces and punctuation", "데이터 분석, 보고서 작성!", []string{"데이터", "분석", "보고서", "작성"}},
		{"korean particles stay attached", "데이터를 분석합니다", []string{"데이터를", "분석합니다"}},
		{"korean and english mixed", "PDF를 병합(merge)", []string{"pdf를", "병합", "merge"}},
		{"unicode case folding", "ÉCOLE Straße ΣΟΦΙΑ", []string{"école", "straße", "σοφια"}},
		{"combining marks stay in the term", "हिन्दी भाषा", []string{"हिन्दी", "भाषा"}},
		{"non-ascii digits", "٣ apples", []string{"٣", "apples"}},
		{"emoji and symbols separate", "fast🚀search™ok", []string{"fast", "search", "ok"}},
		{"invalid utf-8 separates", "ab\xffcd", []string{"ab", "cd"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tokenize(tc.in, nil)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("tokenize(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
