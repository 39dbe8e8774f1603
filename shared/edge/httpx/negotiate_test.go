package httpx

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPrefersHTML(t *testing.T) {
	for accept, want := range map[string]bool{
		"": false, "*/*": false, "application/json": false, "application/json, text/html": false,
		"text/html": true, "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": true, // Chromium, Firefox
		"text/*": true, "text/*, application/json;q=0.5": true, "text/html;q=0": false,
		"text/html;q=0.4, application/json;q=0.6": false, "application/json;q=0.1, */*": true, // JSON least wanted
		"text/html;q=0.9, */*;q=1": false, "garbage;;": false,
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if got := PrefersHTML(r); got != want {
			t.Errorf("Accept %q: PrefersHTML = %v, want %v", accept, got, want)
		}
	}
}

// FuzzPrefersHTML: any Accept header is read without a panic, and one that
// names neither HTML nor a wildcard never gets the page.
func FuzzPrefersHTML(f *testing.F) {
	for _, s := range []string{"", "text/html", "*/*;q=0.8", "text/*;q=x", "application/json;q=1.5, text/html", ";;,", "text/html;q=0.5;q=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Accept"] = []string{accept}
		got := PrefersHTML(r)
		if got && !strings.Contains(accept, "/") {
			t.Fatalf("Accept %q prefers HTML", accept)
		}
	})
}
