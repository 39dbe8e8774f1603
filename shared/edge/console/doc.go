// Package console is the operator console at /console/: server-rendered
// pages (html/template, assets embedded) over the same ports the HTTP API
// reads, for the people who run agentauth — grants, consents, agent
// instances and their turns' timelines, the tool catalog and the bundle.
//
// Operators sign in with OpenID Connect through the OAuth core's relying
// party (oauth.SignIn); the session is a sealed cookie (AES-256-GCM) that
// holds who signed in and their rights until the ID token's expiry, never
// a token. Platform admins see everything; a tenant admin sees only what
// carries their tenant; anyone else is refused. Every state-changing
// request carries the session's CSRF token, every page a CSP without
// inline script, and every action is logged with the operator's subject.
//
// It must never render a token or any part of one, never read the
// environment, and never reach a store other than through the ports its
// Config is given.
package console
