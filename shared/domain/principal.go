package domain

import "slices"

// Principal is the verified caller of a request: who it is, what it may do
// and for whom it acts. The edge builds it once, where the request is
// authenticated (NewPrincipal over a verified JWT's claims); a turn's is
// built from the turn's auth (TurnAuth.Principal), which the trusted
// runtime that posted the turn's event vouches for. Handlers, the tool
// plane and the turn engine take it and never read a token or its claims
// for identity again. The zero Principal is nobody and may do nothing.
type Principal struct {
	// Subject is the caller (a JWT's sub); never empty for an
	// authenticated caller. Rate limits and audit events are per subject.
	Subject string
	// AgentID is the agent the caller runs as.
	AgentID string
	// Tenant is the caller's tenant; "" when its credential names none.
	Tenant string
	// AllowedSkills is the caller's allow list of tenant skills; nil when
	// its credential has none (then it sees no tenant skill).
	AllowedSkills []string
	// Scopes are the scopes the credential grants.
	Scopes []string
	// TurnAuth is the auth context for getAccessToken on the caller's
	// behalf: the caller as actor, and the OAuth subjects its credential
	// names.
	TurnAuth TurnAuth
	// Admin: the caller holds an admin scope (tenant or platform).
	Admin bool
	// PlatformAdmin: the caller holds the explicit platform-admin scope
	// and may manage every tenant.
	PlatformAdmin bool
	// Claims are the verified claims as the issuer sent them, for access
	// policies that may match on any claim. Read only.
	Claims map[string]any
}

// MayManageTenant reports whether p may manage tenant's uploads: a
// platform admin every tenant, any other admin only the tenant its
// credential names. Platform-wide power is always an explicit grant: an
// admin whose credential names no tenant manages none.
func (p Principal) MayManageTenant(tenant string) bool {
	switch {
	case tenant == "":
		return false
	case p.PlatformAdmin:
		return true
	case p.Admin:
		return p.Tenant != "" && p.Tenant == tenant
	}
	return false
}

// Claim names and values with a fixed meaning in agentauth.
const (
	// ScopeAdmin makes a caller an admin of the tenant its credential
	// names.
	ScopeAdmin = "agentauth:admin"
	// ScopePlatformAdmin makes a caller a platform admin, who may manage
	// every tenant. It is a scope of its own on purpose: an admin token
	// that names no tenant is not a platform admin.
	ScopePlatformAdmin = "agentauth:platform-admin"
	// AgentIDClaim names the agent the caller runs as.
	AgentIDClaim = "agent_id"
	// DefaultAgentID is the agent id of a caller whose credential names
	// none (RFC 0064 ruling D11: a synthetic agent id).
	DefaultAgentID = "core.system"

	DefaultTenantClaim = "tenant_id"
	DefaultSkillsClaim = "skills"
	// DefaultSubjectsClaim carries the turn's OAuth subjects,
	// {"global": "...", "user": "..."}.
	DefaultSubjectsClaim = "agentauth_subjects"
)

// ClaimPaths say where the tenant, the skill allow list and the turn's
// OAuth subjects sit in the claims, as dot paths (LookupClaim); empty
// means the default.
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

// NewPrincipal turns verified claims into a principal: the subject is
// sub; the agent id agent_id (DefaultAgentID when absent); the scopes
// ClaimScopes; the tenant, the skill allow list and the OAuth subjects
// come from paths; admin is ScopeAdmin or ScopePlatformAdmin. It is the
// one mapping of claims to a principal, for a JWT at the edge and for a
// turn's claims (TurnAuth.Principal).
func NewPrincipal(claims map[string]any, paths ClaimPaths) Principal {
	paths = paths.WithDefaults()
	sub, _ := claims["sub"].(string)
	p := Principal{Subject: sub, AgentID: DefaultAgentID, Scopes: ClaimScopes(claims), Claims: claims}
	if id, ok := ClaimText(claims, AgentIDClaim); ok {
		p.AgentID = id
	}
	p.Tenant, _ = ClaimText(claims, paths.Tenant) // absent, null or not a scalar: no tenant
	p.AllowedSkills, _ = ClaimList(claims, paths.Skills)
	p.PlatformAdmin = slices.Contains(p.Scopes, ScopePlatformAdmin)
	p.Admin = p.PlatformAdmin || slices.Contains(p.Scopes, ScopeAdmin)
	p.TurnAuth = TurnAuth{Actor: &Actor{Type: "user", ID: p.Subject}}
	g, _ := ClaimText(claims, paths.Subjects+".global")
	u, _ := ClaimText(claims, paths.Subjects+".user")
	if g != "" || u != "" {
		p.TurnAuth.Subjects = &Subjects{Global: g, User: u}
	}
	return p
}

// Principal is who a turn acts as: NewPrincipal over the turn's claims,
// with two differences. The subject is the sub claim, else the actor's
// id, so a turn without claims is still someone (who sees no tool, since
// access policies match claims). The turn's actor and OAuth subjects are
// the turn's own: turn.auth.subjects wins over any subjects claim, and
// the claims claim subjects only when the turn names none.
func (a TurnAuth) Principal(paths ClaimPaths) Principal {
	p := NewPrincipal(a.Claims, paths)
	if p.Subject == "" && a.Actor != nil {
		p.Subject = a.Actor.ID
	}
	auth := a
	if auth.Actor == nil && p.Subject != "" {
		auth.Actor = &Actor{Type: "user", ID: p.Subject}
	}
	if auth.Subjects == nil {
		auth.Subjects = p.TurnAuth.Subjects
	}
	p.TurnAuth = auth
	return p
}
