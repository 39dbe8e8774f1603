package oauth

import "github.com/agentauth/agentauth/shared/domain"

// GrantID is the spec's grant id of app ref and subject: domain.GrantID,
// which the stores' id checks share.
func GrantID(ref domain.ObjectRef, subject string) string { return domain.GrantID(ref, subject) }

// IsSubset reports whether every scope in sub is in super.
func IsSubset(sub, super []string) bool {
	set := make(map[string]struct{}, len(super))
	for _, s := range super {
		set[s] = struct{}{}
	}
	for _, s := range sub {
		if _, ok := set[s]; !ok {
			return false
		}
	}
	return true
}
