package domain

import "testing"

func TestPrincipalMayManageTenant(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      Principal
		tenant string
		want   bool
	}{
		{"admin of the tenant", Principal{Admin: true, Tenant: "a"}, "a", true},
		{"admin of another tenant", Principal{Admin: true, Tenant: "a"}, "b", false},
		{"admin naming no tenant", Principal{Admin: true}, "a", false},
		{"platform admin", Principal{Admin: true, PlatformAdmin: true}, "b", true},
		{"platform admin with a tenant of its own", Principal{Admin: true, PlatformAdmin: true, Tenant: "a"}, "b", true},
		{"tenant member without admin", Principal{Tenant: "a"}, "a", false},
		{"nobody", Principal{}, "a", false},
		{"no tenant to manage", Principal{Admin: true, PlatformAdmin: true}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.p.MayManageTenant(tc.tenant); got != tc.want {
				t.Fatalf("MayManageTenant(%q) = %v, want %v", tc.tenant, got, tc.want)
			}
		})
	}
}
