// Package domain holds the types, ports and sentinel errors that every other
// agentauth package shares: object references, turn auth, the sealed grant and
// auth-session records, the redacting Secret type, the store, sealer and
// queue interfaces, and the rules more than one layer must apply the same
// way: how a claim path is read (LookupClaim, ClaimString), the shape of
// grant and session ids (GrantID, NewSessionID, ValidateGrantID,
// ValidateSessionID), which request may reuse a pending session
// (SessionReuseKey, Session.ReusableAt), which part of the sweep a
// session is in (SweepSetOf) and which known name a misspelt one means
// (Suggest, the bundle's and the HTTP edge's "did you mean").
//
// It imports the standard library only and must never perform I/O (beyond
// crypto/rand for new session ids); adapters implement its ports and pure
// logic packages consume them.
package domain
