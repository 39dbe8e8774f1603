package jwtauth

import (
	"github.com/agentauth/agentauth/shared/domain"
)

// More claim names and values with a fixed meaning in agentauth (beside
// ScopeAdmin and the default tenant and skills claims); domain defines
// them, since a turn's principal is read from claims by the same rules.
const (
	ScopePlatformAdmin   = domain.ScopePlatformAdmin
	DefaultSubjectsClaim = domain.DefaultSubjectsClaim
	AgentIDClaim         = domain.AgentIDClaim
	DefaultAgentID       = domain.DefaultAgentID
)

// ClaimPaths say where the tenant, the skill allow list and the turn's
// OAuth subjects sit in the claims, as dot paths; empty means the default.
type ClaimPaths = domain.ClaimPaths

// NewPrincipal turns verified claims into the caller's principal
// (domain.NewPrincipal, the one mapping). Call it once, where the request
// is authenticated, and pass the principal on.
func NewPrincipal(c Claims, paths ClaimPaths) domain.Principal {
	return domain.NewPrincipal(map[string]any(c), paths)
}
