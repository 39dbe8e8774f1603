package filestore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/agentauth/agentauth/shared/domain"
)

// ValidGrantID checks ^grant-[0-9a-f]{16}$. Every path is built from an id
// that passed this check, so no id can reach outside the store.
func ValidGrantID(id string) error { return validID(id, "grant-", 16, "grant") }

// ValidSessionID checks ^as-[0-9a-f]{32}$.
func ValidSessionID(id string) error { return validID(id, "as-", 32, "session") }

func validID(id, prefix string, hexLen int, what string) error {
	ok := len(id) == len(prefix)+hexLen && id[:len(prefix)] == prefix
	if ok {
		for i := len(prefix); i < len(id); i++ {
			c := id[i]
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				ok = false
				break
			}
		}
	}
	if !ok {
		// %q keeps control characters in a hostile id from reaching logs raw.
		return fmt.Errorf("%s id %.80q: want %s followed by %d lowercase hex digits: %w", what, id, prefix, hexLen, domain.ErrInvalidID)
	}
	return nil
}

// leaseName maps an arbitrary lease key to a file-name-safe name.
func leaseName(key string) string {
	sum := sha256.Sum256([]byte("agentauth/lease/v1|" + key))
	return hex.EncodeToString(sum[:16])
}
