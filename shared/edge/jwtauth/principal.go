package jwtauth

import (
	"slices"

	"github.com/agentauth/agentauth/shared/domain"
)

// More claim names and values with a fixed meaning in agentauth (beside
// ScopeAdmin and the default tenant and skills claims).
const (
	// ScopePlatformAdmin makes a caller a platform admin, who may manage
	// every tenant. It is a scope of its own on purpose: an admin token
	// that names no tenant is not a platform admin.
	ScopePlatformAdmin = "agentauth:platform-admin"
	// DefaultSubjectsClaim carries the turn's OAuth subjects,
	// {"global": "...", "user": "..."}.
	DefaultSubjectsClaim = "agentauth_subjects"
	// AgentIDClaim names the agent the caller runs as.
	AgentIDClaim = "agent_id"
	// DefaultAgentID is the agent id of a caller whose token names none
	// (RFC 0064 ruling D11: a synthetic agent id).
	DefaultAgentID = "core.system"
)

// ClaimPaths say where the tenant, the skill allow list and the turn's
// OAuth subjects sit in the claims, as dot paths; empty means the default.
type ClaimPaths struct {
	Tenant, Skills, Subjects string
}

// WithDefaults fills the empty paths with the default claims.
func (paths ClaimPaths) WithDefaults() ClaimPaths {
	if paths.Tenant == "" {
		paths.Tenant = DefaultTenantClaim
	}
	if paths.Skills == "" {
		paths.Skills = DefaultSkillsClaim
	}
	if paths.Subjects == "" {
		paths.Subjects = DefaultSubjectsClaim
	}
	return paths
}

// NewPrincipal turns verified claims into the caller's principal. Call it
// once, where the request is authenticated, and pass the principal on.
func NewPrincipal(c Claims, paths ClaimPaths) domain.Principal {
	paths = paths.WithDefaults()
	p := domain.Principal{Subject: c.Subject(), AgentID: DefaultAgentID, Scopes: c.Scopes(), Claims: map[string]any(c)}
	if id, ok := c.StringAt(AgentIDClaim); ok {
		p.AgentID = id
	}
	p.Tenant, _ = c.StringAt(paths.Tenant) // absent, null or not a scalar: no tenant
	p.AllowedSkills, _ = c.ListAt(paths.Skills)
	p.PlatformAdmin = slices.Contains(p.Scopes, ScopePlatformAdmin)
	p.Admin = p.PlatformAdmin || c.IsAdmin()
	p.TurnAuth = domain.TurnAuth{Actor: &domain.Actor{Type: "user", ID: p.Subject}}
	g, _ := c.StringAt(paths.Subjects + ".global")
	u, _ := c.StringAt(paths.Subjects + ".user")
	if g != "" || u != "" {
		p.TurnAuth.Subjects = &domain.Subjects{Global: g, User: u}
	}
	return p
}
