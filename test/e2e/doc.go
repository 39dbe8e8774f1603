// Package e2e holds agentauth's end-to-end suites: the real agentauth binary
// serving on loopback, a real OpenID provider (oidc-provider, see provider/)
// and headless Chromium logging in and consenting on the provider's own
// pages. They need `make e2e-deps`; `make test` installs and runs them.
package e2e
