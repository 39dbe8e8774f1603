package kmsseal

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"golang.org/x/sync/singleflight"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
)

// EncryptionContext keys. The CDK key policy conditions on
// kms:EncryptionContext:agentauth:record, so renaming one breaks every
// deployed stack and every stored value.
const (
	ContextKeyRecord   = "agentauth:record"
	ContextKeyRecordID = "agentauth:recordId"
	ContextKeyApp      = "agentauth:app"
	ContextKeySubject  = "agentauth:subject"
)

const (
	// MaxDataKeyTTL bounds how long a data key unwrapped by KMS stays in
	// memory; it is also the default.
	MaxDataKeyTTL = 5 * time.Minute
	// DefaultMaxCachedKeys bounds the open cache when Options leave it 0.
	DefaultMaxCachedKeys = 1024

	// A data key generated for one record seals at most sealReuseMaxValues
	// values of that record within sealReuseWindow: enough for the fields
	// one write seals in a row, short enough that a key is not used for
	// long, and far below the 2^32 random-IV limit of AES-GCM.
	sealReuseWindow    = 5 * time.Second
	sealReuseMaxValues = 8
	sealCacheSize      = 256

	dataKeySize = 32
)

// ErrUnknownKey is wrapped when KMS does not know the key a value names,
// or the wrapped key belongs to another KMS key.
var ErrUnknownKey = errors.New("KMS key not found or not the key that wrapped the value")

// KMSAPI is what the sealer needs from the KMS client (*kms.Client).
type KMSAPI interface {
	GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, optFns ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error)
	Decrypt(ctx context.Context, in *kms.DecryptInput, optFns ...func(*kms.Options)) (*kms.DecryptOutput, error)
	ReEncrypt(ctx context.Context, in *kms.ReEncryptInput, optFns ...func(*kms.Options)) (*kms.ReEncryptOutput, error)
}

// Options tune the data key cache. The zero value is the production
// setting.
type Options struct {
	// DataKeyTTL is how long a data key stays cached after KMS released
	// it (by GenerateDataKey or Decrypt), used or not. 0 means
	// MaxDataKeyTTL; more is an error.
	DataKeyTTL time.Duration
	// MaxCachedKeys bounds the open cache; beyond it the least recently
	// used key is evicted. 0 means DefaultMaxCachedKeys.
	MaxCachedKeys int
	// Now is the clock (tests inject one); nil means time.Now.
	Now func() time.Time
}

// Sealer seals under data keys from one KMS key and opens values sealed
// under any KMS key the caller may use. Safe for concurrent use.
type Sealer struct {
	api   KMSAPI
	keyID string
	ttl   time.Duration
	now   func() time.Time

	open      *lru[cipher.AEAD]  // by openCacheKey: key id, wrapped key, context
	seal      *lru[*sealKey]     // by sealCacheKey: context
	rewrapped *lru[rewrapResult] // by rewrapCacheKey
	flight    singleflight.Group
}

var _ domain.Sealer = (*Sealer)(nil)

// sealKey is a data key a record's next few Seal calls may reuse.
type sealKey struct {
	aead    cipher.AEAD
	keyID   string // the key ARN GenerateDataKey returned
	wrapped string // base64 CiphertextBlob
	uses    atomic.Int32
}

// rewrapResult is what ReEncrypt made of one wrapped key: no secret.
type rewrapResult struct{ keyID, wrapped string }

// New returns a sealer that generates data keys under keyID (key id, key
// ARN, alias name or alias ARN).
func New(api KMSAPI, keyID string, opts Options) (*Sealer, error) {
	switch {
	case api == nil:
		return nil, errors.New("kmsseal: nil KMS client")
	case keyID == "":
		return nil, errors.New("kmsseal: empty KMS key id")
	case opts.DataKeyTTL < 0 || opts.DataKeyTTL > MaxDataKeyTTL:
		return nil, fmt.Errorf("kmsseal: DataKeyTTL %v out of range (0, %v]", opts.DataKeyTTL, MaxDataKeyTTL)
	case opts.MaxCachedKeys < 0:
		return nil, fmt.Errorf("kmsseal: MaxCachedKeys %d is negative", opts.MaxCachedKeys)
	}
	s := &Sealer{api: api, keyID: keyID, ttl: opts.DataKeyTTL, now: opts.Now}
	if s.ttl == 0 {
		s.ttl = MaxDataKeyTTL
	}
	if s.now == nil {
		s.now = time.Now
	}
	maxKeys := opts.MaxCachedKeys
	if maxKeys == 0 {
		maxKeys = DefaultMaxCachedKeys
	}
	s.open = newLRU[cipher.AEAD](maxKeys)
	s.seal = newLRU[*sealKey](sealCacheSize)
	s.rewrapped = newLRU[rewrapResult](sealCacheSize)
	return s, nil
}

// KeyID is the KMS key new values are sealed under, as given to New.
func (s *Sealer) KeyID() string { return s.keyID }

// Purge drops every cached data key, so the next Open of any value calls
// KMS (after a key policy change, or to prove a cold read in a test).
func (s *Sealer) Purge() {
	s.open.purge()
	s.seal.purge()
	s.rewrapped.purge()
}

// EncryptionContext is the KMS encryption context of every value of b's
// record: record kind and id always, app and subject when not empty. The
// field is left out on purpose (see the package doc).
func EncryptionContext(b domain.Binding) map[string]string {
	ec := map[string]string{ContextKeyRecord: b.Record, ContextKeyRecordID: b.RecordID}
	if b.App != "" {
		ec[ContextKeyApp] = b.App
	}
	if b.Subject != "" {
		ec[ContextKeySubject] = b.Subject
	}
	return ec
}

// Seal encrypts plaintext with AES-256-GCM under a data key of b's record,
// binding b as additional data. Values of one record sealed within a few
// seconds share one data key, so a grant write costs one GenerateDataKey.
func (s *Sealer) Seal(ctx context.Context, plaintext []byte, b domain.Binding) (domain.EncryptedValue, error) {
	where := bindingName(b)
	if err := checkBinding(b); err != nil {
		return domain.EncryptedValue{}, fmt.Errorf("kmsseal: seal %s: %w", where, err)
	}
	sk, err := s.sealKeyFor(ctx, b, where)
	if err != nil {
		return domain.EncryptedValue{}, err
	}
	v, err := aesseal.SealGCM(sk.aead, plaintext, b.AAD())
	if err != nil {
		return domain.EncryptedValue{}, fmt.Errorf("kmsseal: seal %s: %w", where, err)
	}
	v.KeyID, v.WrappedKey = sk.keyID, sk.wrapped
	return v, nil
}

func (s *Sealer) sealKeyFor(ctx context.Context, b domain.Binding, where string) (*sealKey, error) {
	ck := sealCacheKey(b)
	now := s.now()
	if sk, ok := s.seal.get(ck, now); ok {
		if sk.uses.Add(1) <= sealReuseMaxValues {
			return sk, nil
		}
		s.seal.removeIf(ck, func(v *sealKey) bool { return v == sk })
	}
	out, err := s.api.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId:             &s.keyID,
		KeySpec:           types.DataKeySpecAes256,
		EncryptionContext: EncryptionContext(b),
	})
	if err != nil {
		return nil, kmsError("seal", where, s.keyID, awserr.Safe(err))
	}
	defer clear(out.Plaintext)
	if len(out.Plaintext) != dataKeySize || len(out.CiphertextBlob) == 0 || out.KeyId == nil || *out.KeyId == "" {
		return nil, fmt.Errorf("kmsseal: seal %s: KMS key %s: GenerateDataKey returned a %d-byte data key, a %d-byte wrapped key and key id set %t; want %d, >0, true",
			where, s.keyID, len(out.Plaintext), len(out.CiphertextBlob), out.KeyId != nil && *out.KeyId != "", dataKeySize)
	}
	aead, err := newAEAD(out.Plaintext)
	if err != nil {
		return nil, fmt.Errorf("kmsseal: seal %s: %w", where, err)
	}
	sk := &sealKey{aead: aead, keyID: *out.KeyId, wrapped: base64.StdEncoding.EncodeToString(out.CiphertextBlob)}
	sk.uses.Store(1)
	now = s.now()
	s.seal.put(ck, sk, now, now.Add(min(sealReuseWindow, s.ttl)))
	// A read soon after the write (the grant just stored) needs no Decrypt.
	s.open.put(openCacheKey(sk.keyID, out.CiphertextBlob, b), aead, now, now.Add(s.ttl))
	return sk, nil
}

// Open decrypts v, checking that it was sealed for b: KMS unwraps its data
// key only under b's record context, and GCM authenticates b's field. A
// cached data key serves only values with the same KMS key id, wrapped key
// and context, so a warm Open makes no KMS call and a cold one one Decrypt.
func (s *Sealer) Open(ctx context.Context, v domain.EncryptedValue, b domain.Binding) ([]byte, error) {
	where := bindingName(b)
	if err := checkBinding(b); err != nil {
		return nil, fmt.Errorf("kmsseal: open %s: %w", where, err)
	}
	p, err := parseValue(v)
	if err != nil {
		return nil, fmt.Errorf("kmsseal: open %s: %w", where, err)
	}
	aead, err := s.dataKey(ctx, v.KeyID, p.wrapped, b, where)
	if err != nil {
		return nil, err
	}
	pt, err := aead.Open(nil, p.iv, p.sealed, b.AAD())
	if err != nil {
		return nil, fmt.Errorf("kmsseal: open %s: message authentication failed (value moved from another field, or iv, ciphertext, tag or wrapped key altered): %w",
			where, domain.ErrCorrupt)
	}
	return pt, nil
}

// dataKey returns the cipher for a wrapped key, from the cache or from one
// KMS Decrypt shared by every concurrent caller asking for it.
func (s *Sealer) dataKey(ctx context.Context, keyID string, wrapped []byte, b domain.Binding, where string) (cipher.AEAD, error) {
	ck := openCacheKey(keyID, wrapped, b)
	if a, ok := s.open.get(ck, s.now()); ok {
		return a, nil
	}
	v, err, _ := s.flight.Do(string(ck[:]), func() (any, error) {
		if a, ok := s.open.get(ck, s.now()); ok {
			return a, nil
		}
		return s.decrypt(ctx, keyID, wrapped, b, ck)
	})
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The shared call ran on another caller's context, which ended;
		// ours is still live.
		v, err = s.decrypt(ctx, keyID, wrapped, b, ck)
	}
	if err != nil {
		return nil, kmsError("open", where, keyID, err)
	}
	return v.(cipher.AEAD), nil
}

func (s *Sealer) decrypt(ctx context.Context, keyID string, wrapped []byte, b domain.Binding, ck cacheKey) (cipher.AEAD, error) {
	in := &kms.DecryptInput{CiphertextBlob: wrapped, EncryptionContext: EncryptionContext(b)}
	if keyID != "" {
		in.KeyId = &keyID
	}
	out, err := s.api.Decrypt(ctx, in)
	if err != nil {
		return nil, awserr.Safe(err)
	}
	defer clear(out.Plaintext)
	if len(out.Plaintext) != dataKeySize {
		return nil, fmt.Errorf("decrypt returned a %d-byte data key, want %d: %w", len(out.Plaintext), dataKeySize, domain.ErrCorrupt)
	}
	aead, err := newAEAD(out.Plaintext)
	if err != nil {
		return nil, err
	}
	now := s.now()
	s.open.put(ck, aead, now, now.Add(s.ttl))
	return aead, nil
}

// Rewrap re-encrypts v's data key under newKeyID (the sealer's own key
// when empty) with KMS ReEncrypt, inside KMS: the data key never leaves it
// in plaintext, and IV, ciphertext and tag stay as they are. KMS checks
// b's record context on the way; the field is not checked (it cannot be
// without the data key) and still binds the result.
//
// The fields of one record share a wrapped key, so rewrapping them one
// after another makes one ReEncrypt and gives them one new wrapped key
// again (a cold read of the record stays one Decrypt): the result is
// remembered for a few seconds by source key, wrapped key, context and
// destination. It holds no secret.
func (s *Sealer) Rewrap(ctx context.Context, v domain.EncryptedValue, b domain.Binding, newKeyID string) (domain.EncryptedValue, error) {
	where := bindingName(b)
	if newKeyID == "" {
		newKeyID = s.keyID
	}
	if err := checkBinding(b); err != nil {
		return domain.EncryptedValue{}, fmt.Errorf("kmsseal: rewrap %s: %w", where, err)
	}
	p, err := parseValue(v)
	if err != nil {
		return domain.EncryptedValue{}, fmt.Errorf("kmsseal: rewrap %s: %w", where, err)
	}
	ck := rewrapCacheKey(v.KeyID, p.wrapped, b, newKeyID)
	now := s.now()
	if r, ok := s.rewrapped.get(ck, now); ok {
		v.KeyID, v.WrappedKey = r.keyID, r.wrapped
		return v, nil
	}
	ec := EncryptionContext(b)
	in := &kms.ReEncryptInput{
		CiphertextBlob:               p.wrapped,
		SourceEncryptionContext:      ec,
		DestinationKeyId:             &newKeyID,
		DestinationEncryptionContext: ec,
	}
	if v.KeyID != "" {
		in.SourceKeyId = &v.KeyID
	}
	out, err := s.api.ReEncrypt(ctx, in)
	if err != nil {
		return domain.EncryptedValue{}, kmsError("rewrap", where, v.KeyID+" to "+newKeyID, awserr.Safe(err))
	}
	if len(out.CiphertextBlob) == 0 || out.KeyId == nil || *out.KeyId == "" {
		return domain.EncryptedValue{}, fmt.Errorf("kmsseal: rewrap %s: KMS ReEncrypt to %s returned no wrapped key or key id", where, newKeyID)
	}
	r := rewrapResult{keyID: *out.KeyId, wrapped: base64.StdEncoding.EncodeToString(out.CiphertextBlob)}
	now = s.now()
	s.rewrapped.put(ck, r, now, now.Add(min(sealReuseWindow, s.ttl)))
	v.KeyID, v.WrappedKey = r.keyID, r.wrapped
	return v, nil
}

// parsed is an EncryptedValue decoded for use.
type parsed struct {
	iv, sealed, wrapped []byte // sealed: ciphertext || tag
}

func parseValue(v domain.EncryptedValue) (parsed, error) {
	if v.WrappedKey == "" {
		return parsed{}, fmt.Errorf("value has no wrapped data key (sealed by a local keyring, not KMS): %w", domain.ErrCorrupt)
	}
	iv, sealed, err := aesseal.GCMFields(v)
	if err != nil {
		return parsed{}, err
	}
	wrapped, err := aesseal.DecodeBase64(v.WrappedKey)
	if err != nil || len(wrapped) == 0 {
		return parsed{}, fmt.Errorf("malformed base64 in the wrapped key: %w", domain.ErrCorrupt)
	}
	return parsed{iv: iv, sealed: sealed, wrapped: wrapped}, nil
}

func checkBinding(b domain.Binding) error {
	if b.Record == "" || b.RecordID == "" || b.Field == "" {
		return errors.New("binding needs a record, a record id and a field")
	}
	return nil
}

func bindingName(b domain.Binding) string {
	return b.Record + " " + b.RecordID + " field " + b.Field
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// openCacheKey hashes everything a cached data key may serve: a value
// that names the same KMS key, carries the same wrapped key and is opened
// under the same encryption context; anything else misses and goes to KMS,
// which checks. Two bindings have the same context exactly when record,
// record id, app and subject are equal (an empty app or subject is left
// out of the context), so those four fields stand for it.
func openCacheKey(keyID string, wrapped []byte, b domain.Binding) cacheKey {
	buf := make([]byte, 0, 128+len(keyID)+len(wrapped))
	buf = appendField(buf, "agentauth/kmsseal/open/v1")
	buf = appendField(buf, keyID)
	buf = appendField(buf, string(wrapped))
	return sha256.Sum256(appendContext(buf, b))
}

func sealCacheKey(b domain.Binding) cacheKey {
	buf := make([]byte, 0, 128)
	buf = appendField(buf, "agentauth/kmsseal/seal/v1")
	return sha256.Sum256(appendContext(buf, b))
}

func rewrapCacheKey(keyID string, wrapped []byte, b domain.Binding, newKeyID string) cacheKey {
	buf := make([]byte, 0, 160+len(keyID)+len(wrapped)+len(newKeyID))
	buf = appendField(buf, "agentauth/kmsseal/rewrap/v1")
	buf = appendField(buf, keyID)
	buf = appendField(buf, string(wrapped))
	buf = appendField(buf, newKeyID)
	return sha256.Sum256(appendContext(buf, b))
}

func appendContext(buf []byte, b domain.Binding) []byte {
	for _, v := range []string{b.Record, b.RecordID, b.App, b.Subject} {
		buf = appendField(buf, v)
	}
	return buf
}

// appendField appends a length-prefixed string, so field boundaries
// cannot shift ("a|b" + "c" never equals "a" + "b|c").
func appendField(buf []byte, s string) []byte {
	buf = binary.BigEndian.AppendUint64(buf, uint64(len(s)))
	return append(buf, s...)
}

// kmsError wraps a KMS failure with what was being done; it keeps the SDK
// error for errors.As, and its text (awserr.Safe: code, status, request id)
// never holds key material or an AWS error's message.
func kmsError(op, where, keyID string, err error) error {
	var (
		invalid   *types.InvalidCiphertextException
		notFound  *types.NotFoundException
		incorrect *types.IncorrectKeyException
	)
	switch {
	case errors.As(err, &invalid):
		return fmt.Errorf("kmsseal: %s %s: KMS refused the wrapped data key under this record's encryption context (value moved from another record, app or subject, or wrapped key altered): %w: %w",
			op, where, domain.ErrCorrupt, err)
	case errors.As(err, &notFound), errors.As(err, &incorrect):
		return fmt.Errorf("kmsseal: %s %s: KMS key %s: %w: %w", op, where, keyID, ErrUnknownKey, err)
	default:
		return fmt.Errorf("kmsseal: %s %s: KMS key %s: %w", op, where, keyID, err)
	}
}
