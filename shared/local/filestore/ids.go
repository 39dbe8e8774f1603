package filestore

import (
	"crypto/sha256"
	"encoding/hex"
)

// leaseName maps an arbitrary lease key to a file-name-safe name.
func leaseName(key string) string {
	sum := sha256.Sum256([]byte("agentauth/lease/v1|" + key))
	return hex.EncodeToString(sum[:16])
}
