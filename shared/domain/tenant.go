package domain

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// Kinds of tenant uploads.
const (
	TenantKindSkill = "Skill"
	TenantKindTool  = "Tool"
)

// TenantResource is a skill or a tool one tenant uploaded at run time
// (always tenant scoped). Spec is the validated spec as JSON; stores keep
// it verbatim and never interpret it.
type TenantResource struct {
	Tenant    string
	Kind      string // TenantKindSkill | TenantKindTool
	Name      string // the skill name or the tool id
	Spec      json.RawMessage
	UpdatedAt time.Time
}

// MaxTenantSpecBytes bounds one upload's spec (a DynamoDB item holds
// 400 KB; the rest is room for keys and attributes).
const MaxTenantSpecBytes = 256 << 10

var (
	tenantIDRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	tenantNameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)
)

// ValidTenantID reports whether id may name a tenant: 1–64 of letters,
// digits, _ . - starting with a letter or digit.
func ValidTenantID(id string) bool { return tenantIDRe.MatchString(id) }

// Validate checks the keys and size of r (not the spec's content, which
// the bundle package validates before anything is stored).
func (r TenantResource) Validate() error {
	switch {
	case !ValidTenantID(r.Tenant):
		return fmt.Errorf("tenant %.80q: want 1-64 of letters, digits, _ . - starting with a letter or digit: %w", r.Tenant, ErrInvalidID)
	case r.Kind != TenantKindSkill && r.Kind != TenantKindTool:
		return fmt.Errorf("tenant resource kind %.40q: want %s or %s: %w", r.Kind, TenantKindSkill, TenantKindTool, ErrInvalidID)
	case !tenantNameRe.MatchString(r.Name):
		return fmt.Errorf("tenant %s name %.80q: want 1-128 of letters, digits, _ . : - starting with a letter or digit: %w", r.Kind, r.Name, ErrInvalidID)
	case len(r.Spec) == 0 || !json.Valid(r.Spec):
		return fmt.Errorf("tenant %s %s: spec is not JSON", r.Kind, r.Name)
	case len(r.Spec) > MaxTenantSpecBytes:
		return fmt.Errorf("tenant %s %s: spec is %d bytes, at most %d", r.Kind, r.Name, len(r.Spec), MaxTenantSpecBytes)
	}
	return nil
}

// TenantStore persists tenant uploads. Uploads are not secrets: they are
// stored as plain JSON.
type TenantStore interface {
	// PutTenantResource creates or replaces r (keyed by tenant, kind and
	// name) and advances the uploads revision in the same atomic write.
	PutTenantResource(ctx context.Context, r TenantResource) error
	// DeleteTenantResource removes one upload and advances the revision;
	// ErrNotFound when absent.
	DeleteTenantResource(ctx context.Context, tenant, kind, name string) error
	// ListTenantResources returns every tenant's uploads, ordered by
	// tenant, kind and name.
	ListTenantResources(ctx context.Context) ([]TenantResource, error)
	// TenantRevision is one cheap read that changes whenever any upload is
	// put or deleted (0 before the first); processes poll it to know when
	// to reload.
	TenantRevision(ctx context.Context) (int64, error)
}
