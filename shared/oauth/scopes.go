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

// notGrantedAgain answers a request the grant does not cover when the last
// consent already asked for all of it: the provider declined some scopes,
// and another consent would be answered the same way.
func notGrantedAgain(g grantScopes, scopes []string) (Result, bool) {
	if g.revoked || len(g.requested) == 0 || IsSubset(scopes, g.granted) || !IsSubset(scopes, g.requested) {
		return Result{}, false
	}
	missing := missingScopes(scopes, g.granted)
	res := ErrorResult(CodeScopeNotGranted, fmt.Sprintf(
		"at the last consent the provider did not grant %s (granted: %s): ask for fewer scopes, or change the app (offline_access, for one, needs options.prompt: consent) and revoke the grant to ask again",
		quoteList(missing), quoteList(g.granted)))
	res.Error.Scopes = missing
	return res, true
}

// grantScopes is what notGrantedAgain reads of a grant.
type grantScopes struct {
	revoked            bool
	requested, granted []string
}
