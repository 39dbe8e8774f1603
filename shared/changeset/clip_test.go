package changeset

import "testing"

// TestClip: a string of at most n bytes is kept; a longer one is cut at a
// rune start at or before n and marked with an ellipsis, never inside a
// rune, and never before its first byte.
func TestClip(t *testing.T) {
	for _, tt := range []struct {
		s    string
		n    int
		want string
	}{
		{"abc", 3, "abc"},
		{"abc", 4, "abc"},
		{"abcd", 3, "abc…"},
		{"", 0, ""},
		{"aé", 3, "aé"},
		{"aé", 2, "a…"},          // é is 2 bytes: cut before it
		{"aéb", 3, "aé…"},        // after it
		{"\x80\x80\x80", 1, "…"}, // no rune start at or before 1 but 0
	} {
		if got := clip(tt.s, tt.n); got != tt.want {
			t.Errorf("clip(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

// TestMergeWithMarkersEmptySide: where one side deleted the lines the
// other changed, its part between the markers is empty.
func TestMergeWithMarkersEmptySide(t *testing.T) {
	got, conflict := MergeWithMarkers([]byte("a\nb\nc\n"), []byte("a\nc\n"), []byte("a\nB\nc\n"), "git:1")
	want := "a\n<<<<<<< changeset\n=======\nB\n>>>>>>> active git:1\nc\n"
	if !conflict || string(got) != want {
		t.Fatalf("MergeWithMarkers = %v %q, want a conflict %q", conflict, got, want)
	}
	got, conflict = MergeWithMarkers([]byte("a\nb\nc\n"), []byte("a\nB\nc\n"), []byte("a\nc\n"), "git:1")
	want = "a\n<<<<<<< changeset\nB\n=======\n>>>>>>> active git:1\nc\n"
	if !conflict || string(got) != want {
		t.Fatalf("MergeWithMarkers = %v %q, want a conflict %q", conflict, got, want)
	}
}
