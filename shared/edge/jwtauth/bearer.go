package jwtauth

import (
	"net/http"
	"strings"
)

// BearerToken returns the token from the request's "Authorization: Bearer"
// header. A missing header, or a Bearer scheme with no token, is
// missing_token; another scheme, several Authorization headers or a token
// with spaces in it is malformed.
func BearerToken(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch {
	case len(values) == 0:
		return "", reject(ReasonMissingToken)
	case len(values) > 1:
		return "", reject(ReasonMalformed)
	}
	v := strings.TrimSpace(values[0])
	if v == "" {
		return "", reject(ReasonMissingToken)
	}
	scheme, token, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", reject(ReasonMalformed)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", reject(ReasonMissingToken)
	}
	if strings.ContainsAny(token, " \t") {
		return "", reject(ReasonMalformed)
	}
	return token, nil
}
