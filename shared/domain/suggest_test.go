package domain

import "testing"

func TestSuggest(t *testing.T) {
	resume := []string{"swarmRef", "instanceKey", "agentName"}
	token := []string{"oauthAppRef", "scopes", "minTtlSeconds", "turn"}
	for _, tc := range []struct {
		name  string
		known []string
		want  string
	}{
		{"Auth", []string{"actor", "auth"}, "auth"},                 // case first
		{"scope", token, "scopes"},                                  // one letter added
		{"scops", token, "scopes"},                                  // changed
		{"scoeps", token, "scopes"},                                 // swapped
		{"mintTlSeconds", token, "minTtlSeconds"},                   // case ignored in edits
		{"agnet", resume, "agentName"},                              // the beginning, swapped
		{"instance", resume, "instanceKey"},                         // the beginning, cut short
		{"agnt", resume, "agentName"},                               // the beginning, a letter dropped
		{"model", []string{"modelRef", "systemPrompt"}, "modelRef"}, // cut short
		{"maxSteps", []string{"maxStepsPerTurn"}, "maxStepsPerTurn"},
		{"nme", []string{"kind", "name"}, "name"},
		{"retries", []string{"retry"}, ""}, // three edits for seven letters: too far
		{"verb", []string{"source", "name", "path", "method"}, ""},
		{"zzz", token, ""},
		{"to", []string{"match", "route"}, ""}, // too short for an edit
		{"ID", []string{"id"}, "id"},           // but not for the case
		{"", token, ""},
		{"scope", nil, ""},
		{"oauth", []string{"oauthA", "oauthB"}, "oauthA"}, // a tie: the first
	} {
		if got := Suggest(tc.name, tc.known); got != tc.want {
			t.Errorf("Suggest(%q, %v) = %q, want %q", tc.name, tc.known, got, tc.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"agnet", "agent", 1}, {"ca", "abc", 3}, {"scope", "scopes", 1}, {"ärger", "aerger", 2},
	} {
		if got := editDistance([]rune(tc.a), []rune(tc.b)); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
