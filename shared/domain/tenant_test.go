package domain

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestTenantResourceValidate(t *testing.T) {
	good := TenantResource{Tenant: "acme", Kind: TenantKindTool, Name: "menu:list", Spec: json.RawMessage(`{"a":1}`)}
	with := func(f func(*TenantResource)) TenantResource {
		r := good
		f(&r)
		return r
	}
	tests := []struct {
		name      string
		r         TenantResource
		ok        bool
		invalidID bool
	}{
		{"good", good, true, false},
		{"skill", with(func(r *TenantResource) { r.Kind = TenantKindSkill }), true, false},
		{"longest keys", with(func(r *TenantResource) {
			r.Tenant, r.Name = strings.Repeat("T", 64), "n"+strings.Repeat(":", 127)
		}), true, false},
		{"largest spec", with(func(r *TenantResource) {
			r.Spec = json.RawMessage(`"` + strings.Repeat("x", MaxTenantSpecBytes-2) + `"`)
		}), true, false},
		{"empty tenant", with(func(r *TenantResource) { r.Tenant = "" }), false, true},
		{"traversal tenant", with(func(r *TenantResource) { r.Tenant = "../x" }), false, true},
		{"long tenant", with(func(r *TenantResource) { r.Tenant = strings.Repeat("T", 65) }), false, true},
		{"colon in tenant", with(func(r *TenantResource) { r.Tenant = "a:b" }), false, true},
		{"lowercase kind", with(func(r *TenantResource) { r.Kind = "tool" }), false, true},
		{"slash in name", with(func(r *TenantResource) { r.Name = "a/b" }), false, true},
		{"hash in name", with(func(r *TenantResource) { r.Name = "a#b" }), false, true},
		{"newline after name", with(func(r *TenantResource) { r.Name = "ab\n" }), false, true},
		{"long name", with(func(r *TenantResource) { r.Name = strings.Repeat("n", 129) }), false, true},
		{"no spec", with(func(r *TenantResource) { r.Spec = nil }), false, false},
		{"spec not JSON", with(func(r *TenantResource) { r.Spec = json.RawMessage(`{`) }), false, false},
		{"spec not UTF-8", with(func(r *TenantResource) { r.Spec = json.RawMessage("\"\xff\"") }), false, false},
		{"spec too large", with(func(r *TenantResource) {
			r.Spec = json.RawMessage(`"` + strings.Repeat("x", MaxTenantSpecBytes-1) + `"`)
		}), false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.r.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate: %v, want ok=%v", err, tc.ok)
			}
			if got := errors.Is(err, ErrInvalidID); got != tc.invalidID {
				t.Fatalf("Validate: %v: wraps ErrInvalidID %v, want %v", err, got, tc.invalidID)
			}
			if keyErr := ValidateTenantKey(tc.r.Tenant, tc.r.Kind, tc.r.Name); (keyErr != nil) != tc.invalidID {
				t.Fatalf("ValidateTenantKey: %v, want an error %v", keyErr, tc.invalidID)
			}
		})
	}
}
