package oauth

import (
	"fmt"
	"slices"
	"strings"
)

// CodeScopeNotGranted is ours: the last consent asked for these scopes and
// the provider granted fewer. Asking again would loop (the provider
// answers the same way), so the caller learns which scopes are missing.
const CodeScopeNotGranted = "scopeNotGranted"

// scopeAliases are the provider echoes known to differ from what was
// asked: Google answers the OpenID short scopes with their URL forms.
var scopeAliases = map[string]map[string]string{
	"google": {
		"https://www.googleapis.com/auth/userinfo.email":   "email",
		"https://www.googleapis.com/auth/userinfo.profile": "profile",
	},
}

// grantedScopes reads a token response's scope: space-separated per RFC
// 6749, comma-separated by GitHub and Slack; a provider's known aliases
// are mapped back to the form the app asked for, so a grant compares with
// the app's scopes.
func grantedScopes(provider, raw string, requested []string) []string {
	fields := strings.FieldsFunc(raw, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	aliases := scopeAliases[strings.ToLower(provider)]
	out := make([]string, 0, len(fields))
	for _, f := range fields {
		if short, ok := aliases[f]; ok && slices.Contains(requested, short) {
			f = short
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// missingScopes are the scopes of want that granted lacks, in want's order.
func missingScopes(want, granted []string) []string {
	var out []string
	for _, s := range want {
		if !slices.Contains(granted, s) {
			out = append(out, s)
		}
	}
	return out
}

// protocolScopes ask the provider for a refresh token (offline_access)
// or an ID token (openid), not for access to an API: a token granted
// without them still does what the app's API scopes ask for.
var protocolScopes = []string{"offline_access", "openid"}

// apiScopes are scopes without the protocol scopes: what a token must
// carry for a request to be answered with it.
func apiScopes(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		if !slices.Contains(protocolScopes, s) {
			out = append(out, s)
		}
	}
	return out
}

// notGrantedAgain answers a request the grant does not cover when the last
// consent already asked for all of it: the provider declined some API
// scopes, and another consent would be answered the same way. A declined
// protocol scope (an OpenID provider drops offline_access without
// prompt=consent) does not count: the token still serves the request,
// without a refresh token.
func notGrantedAgain(g grantScopes, scopes []string) (Result, bool) {
	api := apiScopes(scopes)
	if g.revoked || len(g.requested) == 0 || IsSubset(api, g.granted) || !IsSubset(scopes, g.requested) {
		return Result{}, false
	}
	missing := missingScopes(api, g.granted)
	res := ErrorResult(CodeScopeNotGranted, fmt.Sprintf(
		"at the last consent the provider did not grant %s (granted: %s): ask for fewer scopes, or change the app and revoke the grant to ask again",
		quoteList(missing), quoteList(g.granted)))
	res.Error.Scopes = missing
	return res, true
}

// grantScopes is what notGrantedAgain reads of a grant.
type grantScopes struct {
	revoked            bool
	requested, granted []string
}
