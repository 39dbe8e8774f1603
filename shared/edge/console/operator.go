package console

import (
	"slices"

	"github.com/agentauth/agentauth/shared/domain"
)

// DefaultRolesClaim is the ID-token claim that lists an operator's roles
// when Config.RolesClaim is empty.
const DefaultRolesClaim = "agentauth_roles"

// operator is who a request comes from, as the console decides it at
// sign-in from the ID token's claims.
type operator struct {
	Subject  string
	Name     string
	Tenant   string
	Platform bool
}

// refusal says why claims do not make an operator ("" when they do).
type refusal string

const (
	refusedNoRole   refusal = "no_role"
	refusedNoTenant refusal = "no_tenant"
)

// operatorOf maps verified ID-token claims to an operator: the roles are
// the values of the roles claim (a list, or a comma-separated string) and
// the scope claim; agentauth:platform-admin sees every tenant,
// agentauth:admin with a tenant claim sees that tenant; anyone else is
// refused. An admin whose claims name no tenant is refused rather than
// made platform-wide (the rule domain.Principal.MayManageTenant applies).
func operatorOf(claims map[string]any, rolesClaim, tenantClaim string) (operator, refusal) {
	if rolesClaim == "" {
		rolesClaim = DefaultRolesClaim
	}
	if tenantClaim == "" {
		tenantClaim = domain.DefaultTenantClaim
	}
	roles := domain.ClaimScopes(claims)
	if list, ok := domain.ClaimList(claims, rolesClaim); ok {
		roles = append(roles, list...)
	}
	op := operator{}
	op.Subject, _ = claims["sub"].(string)
	op.Name, _ = domain.ClaimText(claims, "name")
	if op.Name == "" {
		op.Name, _ = domain.ClaimText(claims, "email")
	}
	if op.Name == "" {
		op.Name = op.Subject
	}
	op.Tenant, _ = domain.ClaimText(claims, tenantClaim)
	switch {
	case op.Subject == "":
		return op, refusedNoRole
	case slices.Contains(roles, domain.ScopePlatformAdmin):
		op.Platform = true
		return op, ""
	case slices.Contains(roles, domain.ScopeAdmin) && op.Tenant != "":
		return op, ""
	case slices.Contains(roles, domain.ScopeAdmin):
		return op, refusedNoTenant
	}
	return op, refusedNoRole
}

// sees reports whether op may see a record of tenant: a platform admin
// every record, a tenant admin only their tenant's (a record with no
// tenant is platform-wide, so only platform admins see it).
func (op operator) sees(tenant string) bool {
	return op.Platform || tenant != "" && tenant == op.Tenant
}

// role is how the page header names op's rights.
func (op operator) role() string {
	if op.Platform {
		return "platform admin"
	}
	return "admin of tenant " + op.Tenant
}
