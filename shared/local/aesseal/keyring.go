package aesseal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/agentauth/agentauth/shared/domain"
)

// KeySize is the length of every key in bytes (AES-256).
const KeySize = 32

// ErrUnknownKey is wrapped by Open when a value names a key id the keyring
// does not hold (wrong or missing key, or a key retired and then lost).
var ErrUnknownKey = errors.New("key id not in keyring")

// Keyring holds one current key, which seals, and any number of older keys,
// which only open. It is immutable and safe for concurrent use.
type Keyring struct {
	keys []ringKey // current first
	byID map[string]int
}

type ringKey struct {
	id   string
	raw  []byte
	aead cipher.AEAD
}

var _ domain.Sealer = (*Keyring)(nil)

// KeyID derives the id of key: "k-" and the first 12 hex digits of
// SHA-256("agentauth/key-id/v1" || key). The id is derived rather than
// chosen so that a wrong key can never pose under a right id.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("agentauth/key-id/v1"))
	h.Write(key)
	return "k-" + hex.EncodeToString(h.Sum(nil))[:12]
}

// New builds a keyring from a current key and older readable keys, each
// KeySize bytes. Duplicates are dropped. The keys are copied.
func New(current []byte, older ...[]byte) (*Keyring, error) {
	all := append([][]byte{current}, older...)
	k := &Keyring{byID: make(map[string]int, len(all))}
	for i, raw := range all {
		if len(raw) != KeySize {
			return nil, fmt.Errorf("aesseal: key #%d is %d bytes, want %d", i+1, len(raw), KeySize)
		}
		id := KeyID(raw)
		if _, dup := k.byID[id]; dup {
			continue
		}
		raw = append([]byte(nil), raw...)
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("aesseal: key %s: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("aesseal: key %s: %w", id, err)
		}
		k.byID[id] = len(k.keys)
		k.keys = append(k.keys, ringKey{id: id, raw: raw, aead: aead})
	}
	return k, nil
}

// CurrentID is the id of the key that seals.
func (k *Keyring) CurrentID() string { return k.keys[0].id }

// IDs lists every key id, current first.
func (k *Keyring) IDs() []string {
	ids := make([]string, len(k.keys))
	for i, rk := range k.keys {
		ids[i] = rk.id
	}
	return ids
}

// Has reports whether the keyring holds the key with this id.
func (k *Keyring) Has(id string) bool {
	_, ok := k.byID[id]
	return ok
}

// DerivedKeys returns HMAC-SHA256(key, "agentauth/derive/v1|"+purpose) for
// every key, current first: sign with the first, accept any, so what was
// signed before a rotation still verifies after it.
func (k *Keyring) DerivedKeys(purpose string) [][]byte {
	out := make([][]byte, len(k.keys))
	for i, rk := range k.keys {
		m := hmac.New(sha256.New, rk.raw)
		m.Write([]byte("agentauth/derive/v1|" + purpose))
		out[i] = m.Sum(nil)
	}
	return out
}

// Seal encrypts plaintext under the current key with a random IV, binding b
// as additional data.
func (k *Keyring) Seal(_ context.Context, plaintext []byte, b domain.Binding) (domain.EncryptedValue, error) {
	rk := &k.keys[0]
	v, err := SealGCM(rk.aead, plaintext, b.AAD())
	if err != nil {
		return domain.EncryptedValue{}, fmt.Errorf("aesseal: seal %s: %w", bindingName(b), err)
	}
	v.KeyID = rk.id
	return v, nil
}

// Open decrypts v with the key it names, checking that it was sealed for b.
// A value without a key id (written by an older seed store) is tried
// against every key; authentication makes that safe.
func (k *Keyring) Open(_ context.Context, v domain.EncryptedValue, b domain.Binding) ([]byte, error) {
	where := bindingName(b)
	if v.WrappedKey != "" {
		return nil, fmt.Errorf("aesseal: open %s: value has a wrapped data key (sealed by an envelope sealer such as KMS), not a local key: %w",
			where, domain.ErrCorrupt)
	}
	iv, sealed, err := GCMFields(v)
	if err != nil {
		return nil, fmt.Errorf("aesseal: open %s: %w", where, err)
	}

	candidates := k.keys
	if v.KeyID != "" {
		i, ok := k.byID[v.KeyID]
		if !ok {
			return nil, fmt.Errorf("aesseal: open %s: key id %s is not in the keyring (have %s): %w",
				where, v.KeyID, strings.Join(k.IDs(), ", "), ErrUnknownKey)
		}
		candidates = k.keys[i : i+1]
	}
	for i := range candidates {
		if pt, err := candidates[i].aead.Open(nil, iv, sealed, b.AAD()); err == nil {
			return pt, nil
		}
	}
	return nil, fmt.Errorf("aesseal: open %s: message authentication failed (wrong key, value moved from another record or field, or tampered): %w",
		where, domain.ErrCorrupt)
}

func bindingName(b domain.Binding) string {
	return b.Record + " " + b.RecordID + " field " + b.Field
}
