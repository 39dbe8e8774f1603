package filestore

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

// FuzzValidIDs: an accepted id is a single, plain path element.
func FuzzValidIDs(f *testing.F) {
	for _, s := range []string{"grant-0123456789abcdef", "as-0123456789abcdef0123456789abcdef", "../x", "grant-../../etc", "/abs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		for _, valid := range []func(string) error{domain.ValidateGrantID, domain.ValidateSessionID} {
			if valid(id) != nil {
				continue
			}
			if strings.ContainsAny(id, `/\.:`+"\x00") || filepath.Base(id) != id || filepath.IsAbs(id) {
				t.Fatalf("accepted %q", id)
			}
		}
	})
}

// FuzzDecodeRecord: arbitrary file content decodes or is reported, never
// panics.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"agents.example.io/v1alpha1","kind":"OAuthGrantRecord","metadata":{"name":"grant-0123456789abcdef"},"spec":{}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeRecord[struct{ Version int64 }](data, KindGrant, "grant-0123456789abcdef")
	})
}
