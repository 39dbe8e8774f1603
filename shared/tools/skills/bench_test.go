package skills

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// benchCorpus generates n skills deterministically: words drawn from a
// 3,000-word vocabulary with a Zipf distribution (a few very common words,
// a long tail), names of 2–3 words, descriptions of 8–20 words and content
// of 80–400 words; one skill in five belongs to one of 20 tenants.
func benchCorpus(n int) ([]Skill, []string) {
	rng := rand.New(rand.NewPCG(5000, 1))
	syllables := []string{"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "da", "fe", "gu", "hi", "jo", "ba"}
	vocab := make([]string, 3000)
	for i := range vocab {
		var b strings.Builder
		for j := 0; j < 2+i%3; j++ {
			b.WriteString(syllables[rng.IntN(len(syllables))])
		}
		fmt.Fprintf(&b, "%d", i)
		vocab[i] = b.String()
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(5000, 2)), 1.1, 2, uint64(len(vocab)-1))
	words := func(k int) string {
		var b strings.Builder
		for i := range k {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(vocab[zipf.Uint64()])
		}
		return b.String()
	}
	skills := make([]Skill, n)
	for i := range skills {
		s := Skill{
			Name:        fmt.Sprintf("%s-%d", strings.ReplaceAll(words(2+rng.IntN(2)), " ", "-"), i),
			Description: words(8 + rng.IntN(13)),
			Content:     words(80 + rng.IntN(321)),
			Scope:       ScopeGlobal,
		}
		if i%5 == 0 {
			s.Scope, s.TenantID = ScopeTenant, fmt.Sprintf("tenant-%02d", i%20)
		}
		skills[i] = s
	}
	queries := make([]string, 64)
	for i := range queries {
		queries[i] = words(2 + rng.IntN(4))
	}
	return skills, queries
}

// BenchmarkSearch5000 is the budget: a search over 5,000 skills in
// at most 5 ms. Callers alternate between a tenant with an allow list of 25
// of its skills and a caller without tenant; queries have 2–5 words.
func BenchmarkSearch5000(b *testing.B) {
	skills, queries := benchCorpus(5000)
	ix, err := NewIndex(skills)
	if err != nil {
		b.Fatal(err)
	}
	var allowed []string
	for _, s := range skills {
		if s.TenantID == "tenant-00" && len(allowed) < 25 {
			allowed = append(allowed, s.Name)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q := Query{Text: queries[i%len(queries)], TopK: 10}
		if i%2 == 0 {
			q.TenantID, q.AllowedSkillNames = "tenant-00", allowed
		}
		if len(ix.Search(q)) == 0 {
			b.Fatalf("query %q found nothing", q.Text)
		}
		i++
	}
}

// BenchmarkSearch5000Empty lists all visible skills by name (empty query).
func BenchmarkSearch5000Empty(b *testing.B) {
	skills, _ := benchCorpus(5000)
	ix, err := NewIndex(skills)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ix.Search(Query{TopK: MaxTopK, TenantID: "tenant-00", AllowedSkillNames: []string{skills[0].Name}})
	}
}

// BenchmarkNewIndex5000 is the one-off cost of indexing 5,000 skills.
func BenchmarkNewIndex5000(b *testing.B) {
	skills, _ := benchCorpus(5000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewIndex(skills); err != nil {
			b.Fatal(err)
		}
	}
}
