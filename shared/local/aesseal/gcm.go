package aesseal

import (
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/agentauth/agentauth/shared/domain"
)

// The AES-256-GCM value format, shared by every sealer (this keyring and
// the KMS envelope sealer): a 12-byte random IV, the ciphertext and the
// 16-byte tag, each standard base64.
const (
	ivSize  = 12
	tagSize = 16
)

// SealGCM seals plaintext with aead under a fresh random IV, binding aad,
// and returns the value's algorithm, IV, ciphertext and tag; the caller
// adds its KeyID (and WrappedKey).
func SealGCM(aead cipher.AEAD, plaintext, aad []byte) (domain.EncryptedValue, error) {
	iv := make([]byte, ivSize)
	if _, err := rand.Read(iv); err != nil {
		return domain.EncryptedValue{}, fmt.Errorf("random iv: %w", err)
	}
	sealed := aead.Seal(nil, iv, plaintext, aad)
	ct, tag := sealed[:len(sealed)-tagSize], sealed[len(sealed)-tagSize:]
	enc := base64.StdEncoding
	return domain.EncryptedValue{
		Algorithm:  domain.AlgorithmAES256GCM,
		IV:         enc.EncodeToString(iv),
		Ciphertext: enc.EncodeToString(ct),
		Tag:        enc.EncodeToString(tag),
	}, nil
}

// GCMFields checks a value's algorithm and decodes its IV and
// ciphertext||tag for cipher.AEAD.Open. Every failure wraps
// domain.ErrCorrupt and names sizes, never content.
func GCMFields(v domain.EncryptedValue) (iv, sealed []byte, err error) {
	if v.Algorithm != domain.AlgorithmAES256GCM {
		return nil, nil, fmt.Errorf("algorithm %q not supported, want %q: %w", v.Algorithm, domain.AlgorithmAES256GCM, domain.ErrCorrupt)
	}
	iv, err1 := DecodeBase64(v.IV)
	ct, err2 := DecodeBase64(v.Ciphertext)
	tag, err3 := DecodeBase64(v.Tag)
	if errors.Join(err1, err2, err3) != nil {
		return nil, nil, fmt.Errorf("malformed base64 in iv, ciphertext or tag: %w", domain.ErrCorrupt)
	}
	if len(iv) != ivSize || len(tag) != tagSize {
		return nil, nil, fmt.Errorf("iv is %d bytes and tag %d, want %d and %d: %w", len(iv), len(tag), ivSize, tagSize, domain.ErrCorrupt)
	}
	return iv, append(ct, tag...), nil
}

// DecodeBase64 accepts standard base64 with or without padding.
func DecodeBase64(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawStdEncoding.DecodeString(s)
}
