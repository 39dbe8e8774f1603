// Package oauth is the OAuth core of agentauth: it answers getAccessToken
// with a ready token, an authorization_required session (Authorization Code
// + PKCE S256 or device code; a repeated request reuses the pending
// session) or an error result; handles the provider's
// callback (signed single-use state, code exchange, subject verification,
// atomic grant write, auth.granted event); refreshes with one refresher per
// grant across every process; revokes; and cleans up sessions.
//
// It talks to storage, sealing and queues only through the ports in
// shared/domain and to providers through golang.org/x/oauth2. It must never
// put a token, refresh token, PKCE verifier, state, device code or
// authorization code into a log line, an error string or an event: secrets
// travel as domain.Secret and only the ready result carries a token.
package oauth
