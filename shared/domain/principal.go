package domain

// Principal is the verified caller of a request: who it is, what it may do
// and for whom it acts. The edge builds it once, where the request is
// authenticated (from a verified JWT); handlers, the tool plane and the
// turn engine take it and never read a token or its claims for identity
// again. The zero Principal is nobody and may do nothing.
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
