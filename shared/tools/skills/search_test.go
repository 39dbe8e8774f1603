package skills

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"testing"
)

func mustIndex(t testing.TB, skills []Skill) *Index {
	t.Helper()
	ix, err := NewIndex(skills)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func assertScores(t *testing.T, got []Result, want []Result) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d results %v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || math.Abs(got[i].RelevanceScore-want[i].RelevanceScore) > 1e-12 {
			t.Errorf("result %d = %s %.15f, want %s %.15f", i, got[i].Name, got[i].RelevanceScore, want[i].Name, want[i].RelevanceScore)
		}
	}
}

// TestBM25HandComputed checks the scores of a corpus small enough to work
// out by hand. The query terms occur only in content, so only the content
// field counts (weight 1), and descriptions are empty.
//
//	alpha:   "apple banana apple"               len 3, tf(apple)=2
//	bravo:   "apple cherry cherry cherry cherry" len 5, tf(apple)=1, tf(cherry)=4
//	charlie: "banana cherry"                    len 2, tf(cherry)=1
//
// N = 3, avglen = 10/3, df(apple) = df(cherry) = 2, so for both terms
// idf = ln(1 + (3 − 2 + 0.5)/(2 + 0.5)) = ln(1.6) = 0.470003629245736.
// Length normalization 1 − 0.75 + 0.75·len/avglen: alpha 0.925, bravo 1.375,
// charlie 0.7. With tf' = tf/norm and part = tf'·(k1+1)/(k1+tf'), k1 = 1.2:
//
//	alpha  apple:  tf' = 2/0.925 = 80/37;  part = (176/37)/(124.4/37) = 176/124.4 = 1.414790996784566
//	bravo  apple:  tf' = 1/1.375 = 8/11;   part = 1.6/(21.2/11)       = 17.6/21.2  = 0.830188679245283
//	bravo  cherry: tf' = 4/1.375 = 32/11;  part = 6.4/(45.2/11)       = 70.4/45.2  = 1.557522123893805
//	charlie cherry: tf' = 1/0.7 = 10/7;    part = (22/7)/(18.4/7)     = 22/18.4    = 1.195652173913043
//
// Scores (sum of idf·part over the query's terms):
//
//	"apple":        alpha   = ln1.6 · 1.414790996784566 = 0.664956903112938
//	                bravo   = ln1.6 · 0.830188679245283 = 0.390191692204007
//	"apple cherry": bravo   = ln1.6 · (0.830188679245283 + 1.557522123893805) = 1.122232743064622
//	                alpha   = 0.664956903112938
//	                charlie = ln1.6 · 1.195652173913043 = 0.561960861054684
func TestBM25HandComputed(t *testing.T) {
	ix := mustIndex(t, []Skill{
		{Name: "alpha", Content: "apple banana apple", Scope: ScopeGlobal},
		{Name: "bravo", Content: "apple cherry cherry cherry cherry", Scope: ScopeGlobal},
		{Name: "charlie", Content: "banana cherry", Scope: ScopeGlobal},
	})
	idf := math.Log(1.6)
	assertScores(t, ix.Search(Query{Text: "apple"}), []Result{
		{Skill: Skill{Name: "alpha"}, RelevanceScore: idf * 176 / 124.4},
		{Skill: Skill{Name: "bravo"}, RelevanceScore: idf * 17.6 / 21.2},
	})
	assertScores(t, ix.Search(Query{Text: "Apple, CHERRY! apple"}), []Result{
		{Skill: Skill{Name: "bravo"}, RelevanceScore: idf * (17.6/21.2 + 70.4/45.2)},
		{Skill: Skill{Name: "alpha"}, RelevanceScore: idf * 176 / 124.4},
		{Skill: Skill{Name: "charlie"}, RelevanceScore: idf * 22 / 18.4},
	})
	// The literal values from the comment, so a change of formula cannot
	// hide behind the same arithmetic on both sides.
	assertScores(t, ix.Search(Query{Text: "apple"}), []Result{
		{Skill: Skill{Name: "alpha"}, RelevanceScore: 0.664956903112938},
		{Skill: Skill{Name: "bravo"}, RelevanceScore: 0.390191692204007},
	})
	assertScores(t, ix.Search(Query{Text: "apple cherry"}), []Result{
		{Skill: Skill{Name: "bravo"}, RelevanceScore: 1.122232743064622},
		{Skill: Skill{Name: "alpha"}, RelevanceScore: 0.664956903112938},
		{Skill: Skill{Name: "charlie"}, RelevanceScore: 0.561960861054684},
	})
	// A term no skill contains adds nothing; a query of only such terms finds nothing.
	if rs := ix.Search(Query{Text: "durian"}); len(rs) != 0 {
		t.Fatalf("Search(durian) = %v, want none", rs)
	}
}

// TestFieldWeights puts one term in a different field of each skill. Every
// field has the same length in every skill, so every length normalization
// is 1, and tf' is the field weight: name 3, description 2, content 1.
// df = N = 3, idf = ln(1 + 0.5/3.5) = ln(8/7), and part = w·2.2/(1.2+w):
// name 6.6/4.2 = 11/7, description 4.4/3.2 = 11/8, content 2.2/2.2 = 1.
func TestFieldWeights(t *testing.T) {
	ix := mustIndex(t, []Skill{
		{Name: "sigma", Description: "other words here", Content: "zeta text body", Scope: ScopeGlobal},
		{Name: "zeta", Description: "other words here", Content: "filler text body", Scope: ScopeGlobal},
		{Name: "omega", Description: "zeta words here", Content: "filler text body", Scope: ScopeGlobal},
	})
	idf := math.Log(8.0 / 7)
	assertScores(t, ix.Search(Query{Text: "zeta"}), []Result{
		{Skill: Skill{Name: "zeta"}, RelevanceScore: idf * 11 / 7},
		{Skill: Skill{Name: "omega"}, RelevanceScore: idf * 11 / 8},
		{Skill: Skill{Name: "sigma"}, RelevanceScore: idf},
	})
}

func TestTiesBreakByName(t *testing.T) {
	ix := mustIndex(t, []Skill{
		{Name: "delta", Content: "same words", Scope: ScopeGlobal},
		{Name: "bravo", Content: "same words", Scope: ScopeGlobal},
		{Name: "bravo", Content: "same words", Scope: ScopeTenant, TenantID: "t"},
		{Name: "alpha", Content: "same words", Scope: ScopeGlobal},
	})
	q := Query{Text: "same", TenantID: "t", AllowedSkillNames: []string{"bravo"}}
	for range 20 {
		rs := ix.Search(q)
		var got []string
		for _, r := range rs {
			got = append(got, string(r.Scope)+":"+r.Name)
			if r.RelevanceScore != rs[0].RelevanceScore {
				t.Fatalf("scores differ: %v", rs)
			}
		}
		want := []string{"global:alpha", "global:bravo", "tenant:bravo", "global:delta"}
		if !slices.Equal(got, want) {
			t.Fatalf("order = %v, want %v", got, want)
		}
	}
}

func TestEmptyQueryListsByName(t *testing.T) {
	ix := mustIndex(t, []Skill{
		{Name: "charlie", Scope: ScopeGlobal},
		{Name: "alpha", Scope: ScopeGlobal},
		{Name: "bravo", Scope: ScopeTenant, TenantID: "t"},
	})
	for _, text := range []string{"", "   ", "?!—…"} {
		rs := ix.Search(Query{Text: text, TenantID: "t", AllowedSkillNames: []string{"bravo"}})
		var got []string
		for _, r := range rs {
			got = append(got, r.Name)
			if r.RelevanceScore != 0 {
				t.Fatalf("score %v, want 0", r.RelevanceScore)
			}
		}
		if want := []string{"alpha", "bravo", "charlie"}; !slices.Equal(got, want) {
			t.Fatalf("Search(%q) = %v, want %v", text, got, want)
		}
	}
	empty := mustIndex(t, nil)
	if rs := empty.Search(Query{}); rs == nil || len(rs) != 0 {
		t.Fatalf("empty index: %#v, want an empty non-nil slice", rs)
	}
}

func TestTopKBounds(t *testing.T) {
	var corpus []Skill
	for i := range 150 {
		corpus = append(corpus, Skill{Name: fmt.Sprintf("skill-%03d", i), Content: "shared term", Scope: ScopeGlobal})
	}
	ix := mustIndex(t, corpus)
	tests := []struct{ topK, want int }{
		{-5, DefaultTopK}, {0, DefaultTopK}, {1, 1}, {7, 7}, {100, 100}, {101, MaxTopK}, {1 << 30, MaxTopK},
	}
	for _, tc := range tests {
		for _, text := range []string{"", "shared"} {
			if got := len(ix.Search(Query{Text: text, TopK: tc.topK})); got != tc.want {
				t.Errorf("TopK %d, text %q: %d results, want %d", tc.topK, text, got, tc.want)
			}
		}
	}
	small := mustIndex(t, corpus[:3])
	if got := len(small.Search(Query{Text: "shared", TopK: 50})); got != 3 {
		t.Errorf("3 skills, TopK 50: %d results", got)
	}
}

// TestTopKKeepsTheBest checks the bounded selection against a full sort.
func TestTopKKeepsTheBest(t *testing.T) {
	var corpus []Skill
	for i := range 300 {
		content := "x"
		for j := range i % 17 {
			content += fmt.Sprintf(" w%d term", j)
		}
		corpus = append(corpus, Skill{Name: fmt.Sprintf("s%03d", (i*7919)%300), Content: content, Scope: ScopeGlobal})
	}
	ix := mustIndex(t, corpus)
	all := ix.Search(Query{Text: "term w3 w9", TopK: MaxTopK})
	full := slices.Clone(all)
	slices.SortStableFunc(full, func(a, b Result) int {
		if a.RelevanceScore != b.RelevanceScore {
			if a.RelevanceScore > b.RelevanceScore {
				return -1
			}
			return 1
		}
		return compareSkills(&a.Skill, &b.Skill)
	})
	for _, k := range []int{1, 5, 10, 33} {
		got := ix.Search(Query{Text: "term w3 w9", TopK: k})
		for i := range got {
			if got[i].Name != full[i].Name || got[i].RelevanceScore != full[i].RelevanceScore {
				t.Fatalf("TopK %d: result %d = %s, want %s", k, i, got[i].Name, full[i].Name)
			}
		}
	}
}

// TestOtherTenantsDoNotMoveScores checks that collection statistics come
// from the visible skills only: adding another tenant's skills that are full
// of the query's terms changes no score a caller sees.
func TestOtherTenantsDoNotMoveScores(t *testing.T) {
	base := []Skill{
		{Name: "alpha", Description: "merge pdf files", Content: "merge many pdf files into one", Scope: ScopeGlobal},
		{Name: "bravo", Description: "split pdf", Content: "split a pdf into pages", Scope: ScopeGlobal},
		{Name: "mine", Description: "merge invoices", Content: "merge invoice pdf", Scope: ScopeTenant, TenantID: "a"},
	}
	noisy := append(slices.Clone(base),
		Skill{Name: "theirs-1", Description: "merge merge merge", Content: "pdf pdf pdf merge", Scope: ScopeTenant, TenantID: "b"},
		Skill{Name: "theirs-2", Description: "merge", Content: "merge pdf", Scope: ScopeTenant, TenantID: "b"},
		Skill{Name: "mine-hidden", Description: "merge", Content: "pdf", Scope: ScopeTenant, TenantID: "a"},
	)
	q := Query{Text: "merge pdf", TenantID: "a", AllowedSkillNames: []string{"mine", "theirs-1", "theirs-2"}}
	want := mustIndex(t, base).Search(q)
	got := mustIndex(t, noisy).Search(q)
	if len(want) != 3 {
		t.Fatalf("baseline: %v", want)
	}
	assertScores(t, got, want)
}

func TestResultJSON(t *testing.T) {
	b, err := json.Marshal(Result{Skill: Skill{Name: "n", Description: "d", Content: "c", Scope: ScopeTenant, TenantID: "t"}, RelevanceScore: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"n","description":"d","content":"c","scope":"tenant","tenant_id":"t","relevance_score":1.5}`
	if string(b) != want {
		t.Fatalf("JSON = %s, want %s", b, want)
	}
}

func TestKoreanSearch(t *testing.T) {
	ix := mustIndex(t, []Skill{
		{Name: "데이터-분석", Description: "데이터 분석 보고서를 작성합니다", Content: "판매 데이터 분석", Scope: ScopeGlobal},
		{Name: "번역", Description: "문서 번역", Content: "영어 문서를 한국어로 번역", Scope: ScopeGlobal},
		{Name: "pdf-merge", Description: "merge PDF files", Content: "데이터 없음", Scope: ScopeGlobal},
	})
	rs := ix.Search(Query{Text: "데이터 분석"})
	if len(rs) != 2 || rs[0].Name != "데이터-분석" || rs[1].Name != "pdf-merge" {
		t.Fatalf("Search(데이터 분석) = %v", rs)
	}
	if rs := ix.Search(Query{Text: "번역, 문서?"}); len(rs) != 1 || rs[0].Name != "번역" {
		t.Fatalf("Search(번역, 문서?) = %v", rs)
	}
}

func TestMaxQueryTerms(t *testing.T) {
	ix := mustIndex(t, []Skill{{Name: "late", Content: "needle", Scope: ScopeGlobal}})
	text := ""
	for i := range MaxQueryTerms {
		text += fmt.Sprintf("filler%d ", i)
	}
	if rs := ix.Search(Query{Text: text + "needle"}); len(rs) != 0 {
		t.Fatalf("term past MaxQueryTerms was scored: %v", rs)
	}
	// Repeats do not use up the budget.
	if rs := ix.Search(Query{Text: "x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x x needle"}); len(rs) != 1 {
		t.Fatalf("repeated terms: %v", rs)
	}
}
