package domain

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
	"unicode/utf8"
)

// Kinds of tenant uploads.
const (
	TenantKindSkill = "Skill"
	TenantKindTool  = "Tool"
)

// TenantResource is a skill or a tool one tenant uploaded at run time
// (always tenant scoped). Spec is the validated spec as JSON; stores keep
// it byte for byte and never interpret it. UpdatedAt is the caller's;
// stores keep it to at least the millisecond.
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

// ValidateTenantKey checks the key of one upload (what
// TenantStore.DeleteTenantResource takes): a valid tenant id, a known
// kind, and a name of 1–128 letters, digits, _ . : - starting with a
// letter or digit. Errors wrap ErrInvalidID. None of the three can hold
// '/', '\', '#' or a control character, but a name may hold ':' and may
// differ from another only in case, so stores that build file names from
// one must still escape it.
func ValidateTenantKey(tenant, kind, name string) error {
	switch {
	case !ValidTenantID(tenant):
		return fmt.Errorf("tenant %.80q: want 1-64 of letters, digits, _ . - starting with a letter or digit: %w", tenant, ErrInvalidID)
	case kind != TenantKindSkill && kind != TenantKindTool:
		return fmt.Errorf("tenant resource kind %.40q: want %s or %s: %w", kind, TenantKindSkill, TenantKindTool, ErrInvalidID)
	case !tenantNameRe.MatchString(name):
		return fmt.Errorf("tenant %s name %.80q: want 1-128 of letters, digits, _ . : - starting with a letter or digit: %w", kind, name, ErrInvalidID)
	}
	return nil
}

// Validate checks the key and size of r and that its spec is UTF-8 JSON (not
// the spec's content, which the bundle package validates before anything
// is stored). A bad key wraps ErrInvalidID; a bad spec does not.
func (r TenantResource) Validate() error {
	if err := ValidateTenantKey(r.Tenant, r.Kind, r.Name); err != nil {
		return err
	}
	switch {
	// Size first: no point scanning megabytes to refuse them.
	case len(r.Spec) > MaxTenantSpecBytes:
		return fmt.Errorf("tenant %s %s: spec is %d bytes, at most %d", r.Kind, r.Name, len(r.Spec), MaxTenantSpecBytes)
	case len(r.Spec) == 0 || !json.Valid(r.Spec):
		return fmt.Errorf("tenant %s %s: spec is not JSON", r.Kind, r.Name)
	case !utf8.Valid(r.Spec):
		// json.Valid lets invalid UTF-8 through inside strings; refused
		// here, since stores that keep the spec as text (a DynamoDB string,
		// a JSON file) could not give those bytes back verbatim.
		return fmt.Errorf("tenant %s %s: spec is not UTF-8", r.Kind, r.Name)
	}
	return nil
}

// TenantStore persists tenant uploads. Uploads are not secrets: they are
// stored as plain JSON. Tenants are independent: two tenants may hold the
// same kind and name, and nothing done under one changes the other's.
// storetest.RunTenantStore is its conformance suite.
type TenantStore interface {
	// PutTenantResource creates or replaces r (keyed by tenant, kind and
	// name) and advances the uploads revision in the same atomic write.
	// It refuses an r that fails Validate and then stores nothing.
	PutTenantResource(ctx context.Context, r TenantResource) error
	// DeleteTenantResource removes one upload and advances the revision;
	// ErrNotFound when absent (and then the revision stays), ErrInvalidID
	// when the key fails ValidateTenantKey.
	DeleteTenantResource(ctx context.Context, tenant, kind, name string) error
	// ListTenantResources returns every readable upload of every tenant,
	// ordered by tenant, kind and name. Unreadable ones (corrupt, stray,
	// misplaced) are skipped and reported in the error list, each wrapping
	// ErrCorrupt, so one bad record never hides the rest; the last error
	// is for a failure of the listing itself.
	ListTenantResources(ctx context.Context) ([]TenantResource, []error, error)
	// TenantRevision is one cheap read that changes whenever any upload is
	// put or deleted (0 before the first); processes poll it to know when
	// to reload. Every successful put or delete adds exactly one, so it
	// only grows, and a revision read after a write returns sees it.
	TenantRevision(ctx context.Context) (int64, error)
}
