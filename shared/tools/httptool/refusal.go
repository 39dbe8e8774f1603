package httptool

import (
	"net/http"
	"strings"
)

// refusesToken reports whether resp refuses the request's bearer token,
// which means the upstream did nothing with the request: HTTP 401, or a
// 400 or 403 whose WWW-Authenticate has a Bearer challenge with
// error="invalid_token" (RFC 6750 §3.1: the token is expired, revoked or
// malformed; the RFC says 401 for it, and an API that answers 400 or 403
// refuses the token all the same). Only such an answer makes a call
// refresh its token and run again; no other status, and no missing
// answer, ever does.
func refusesToken(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return true
	case http.StatusBadRequest, http.StatusForbidden:
		return invalidTokenChallenge(resp.Header.Values("WWW-Authenticate"))
	}
	return false
}

// invalidTokenChallenge reports whether the WWW-Authenticate values hold
// a Bearer challenge whose error parameter is invalid_token (RFC 7235
// §4.1: challenges and their parameters separated by commas, quoted
// strings may hold commas; scheme and parameter names are
// case-insensitive).
func invalidTokenChallenge(values []string) bool {
	for _, v := range values {
		scheme := ""
		for _, part := range splitOutsideQuotes(v) {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			// A challenge starts with its scheme: a token followed by a
			// space (and its first parameter), or alone.
			if first, rest, _ := strings.Cut(part, " "); !strings.Contains(first, "=") {
				scheme, part = first, strings.TrimSpace(rest)
			}
			name, value, ok := strings.Cut(part, "=")
			if !ok || !strings.EqualFold(scheme, "bearer") || !strings.EqualFold(strings.TrimSpace(name), "error") {
				continue
			}
			value = strings.TrimSpace(value)
			if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
				value = value[1 : len(value)-1]
			}
			if value == "invalid_token" {
				return true
			}
		}
	}
	return false
}

// splitOutsideQuotes splits s at the commas outside quoted strings (a
// backslash escapes the next character inside one).
func splitOutsideQuotes(s string) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}
