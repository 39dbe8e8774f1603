package httpx

import (
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// PrefersHTML reports whether r's Accept header ranks text/html above
// application/json, as a browser's does ("text/html,…,*/*;q=0.8"). An API
// client — no Accept, */*, application/json — gets JSON: a tie goes to
// JSON.
func PrefersHTML(r *http.Request) bool {
	htmlQ, jsonQ := -1.0, -1.0 // the q of the most specific range matching each
	htmlSpec, jsonSpec := -1, -1
	for _, header := range r.Header.Values("Accept") {
		for _, rng := range strings.Split(header, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(rng))
			if err != nil {
				continue
			}
			q := 1.0
			if v, ok := params["q"]; ok {
				if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			}
			if spec := specificity(mt, "text/html"); spec > htmlSpec {
				htmlQ, htmlSpec = q, spec
			}
			if spec := specificity(mt, "application/json"); spec > jsonSpec {
				jsonQ, jsonSpec = q, spec
			}
		}
	}
	return htmlQ > 0 && htmlQ > jsonQ
}

// specificity is how closely the media range mt matches the type want:
// 2 exactly, 1 by its subtype wildcard, 0 by */*, -1 not at all.
func specificity(mt, want string) int {
	switch {
	case mt == want:
		return 2
	case mt == "*/*":
		return 0
	case strings.HasSuffix(mt, "/*") && strings.HasPrefix(want, strings.TrimSuffix(mt, "*")):
		return 1
	}
	return -1
}
