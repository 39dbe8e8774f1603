package kmsseal

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// fakeKMS is a hand-written KMS for unit tests. It wraps data keys with
// real AES-GCM under a per-key secret, with the canonical encryption
// context as additional data, so like KMS it refuses a wrapped key under
// any other context (InvalidCiphertextException), refuses a KeyId that is
// not the wrapping key (IncorrectKeyException) and detects tampering.
// It counts calls and keeps every plaintext data key it handed out.
type fakeKMS struct {
	mu      sync.Mutex
	keys    map[string]*fakeKey // by key id
	aliases map[string]string   // alias name → key id
	calls   map[string]int

	lastGenerate *kms.GenerateDataKeyInput
	lastDecrypt  *kms.DecryptInput
	// returned are the Plaintext slices handed to the caller (the sealer
	// must zero them); issued are copies, to look for leaks.
	returned, issued [][]byte

	decryptDelay time.Duration
	decryptEnter chan struct{} // if set, signalled as each Decrypt starts
}

type fakeKey struct {
	id, arn string
	aead    cipher.AEAD
}

const fakeAccount = "arn:aws:kms:us-east-1:111122223333:key/"

func newFakeKMS(keyIDs ...string) *fakeKMS {
	f := &fakeKMS{keys: map[string]*fakeKey{}, aliases: map[string]string{}, calls: map[string]int{}}
	for _, id := range keyIDs {
		f.addKey(id)
	}
	return f
}

func (f *fakeKMS) addKey(id string) *fakeKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	block, _ := aes.NewCipher(secret)
	aead, _ := cipher.NewGCM(block)
	k := &fakeKey{id: id, arn: fakeAccount + id, aead: aead}
	f.keys[id] = k
	return k
}

func (f *fakeKMS) addAlias(name, keyID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.aliases[name] = keyID
}

// deleteKey forgets a key, as if its material were gone.
func (f *fakeKMS) deleteKey(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.keys, id)
}

func (f *fakeKMS) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeKMS) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.calls)
}

func (f *fakeKMS) resolveLocked(ref string) *fakeKey {
	if id, ok := f.aliases[ref]; ok {
		ref = id
	}
	ref = strings.TrimPrefix(ref, fakeAccount)
	return f.keys[ref]
}

func canonicalContext(ec map[string]string) []byte {
	var buf bytes.Buffer
	for _, k := range slices.Sorted(maps.Keys(ec)) {
		for _, s := range []string{k, ec[k]} {
			_ = binary.Write(&buf, binary.BigEndian, uint32(len(s)))
			buf.WriteString(s)
		}
	}
	return buf.Bytes()
}

// blob: len(id) || id || nonce(12) || GCM(secret, nonce, dataKey, context)
func (k *fakeKey) wrap(dataKey []byte, ec map[string]string) []byte {
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	out := append([]byte{byte(len(k.id))}, k.id...)
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, dataKey, canonicalContext(ec))
}

func invalidCiphertext(msg string) error {
	return &types.InvalidCiphertextException{Message: aws.String(msg)}
}

// unwrapLocked opens blob as KMS Decrypt would.
func (f *fakeKMS) unwrapLocked(blob []byte, keyID *string, ec map[string]string) (*fakeKey, []byte, error) {
	if len(blob) < 1 || len(blob) < 1+int(blob[0])+12+16 {
		return nil, nil, invalidCiphertext("malformed ciphertext blob")
	}
	embedded := string(blob[1 : 1+blob[0]])
	k := f.keys[embedded]
	if keyID != nil {
		named := f.resolveLocked(*keyID)
		if named == nil {
			return nil, nil, &types.NotFoundException{Message: aws.String("key " + *keyID + " not found")}
		}
		if k == nil || named.id != k.id {
			return nil, nil, &types.IncorrectKeyException{Message: aws.String("the key ID in the request does not identify the KMS key used to encrypt the ciphertext")}
		}
	}
	if k == nil {
		return nil, nil, invalidCiphertext("")
	}
	rest := blob[1+blob[0]:]
	dk, err := k.aead.Open(nil, rest[:12], rest[12:], canonicalContext(ec))
	if err != nil {
		return nil, nil, invalidCiphertext("")
	}
	return k, dk, nil
}

func (f *fakeKMS) GenerateDataKey(ctx context.Context, in *kms.GenerateDataKeyInput, _ ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["GenerateDataKey"]++
	cp := *in
	cp.EncryptionContext = maps.Clone(in.EncryptionContext)
	f.lastGenerate = &cp
	k := f.resolveLocked(aws.ToString(in.KeyId))
	if k == nil {
		return nil, &types.NotFoundException{Message: aws.String("key " + aws.ToString(in.KeyId) + " not found")}
	}
	if in.KeySpec != types.DataKeySpecAes256 {
		return nil, errors.New("fake: want KeySpec AES_256")
	}
	dk := make([]byte, 32)
	_, _ = rand.Read(dk)
	f.returned = append(f.returned, dk)
	f.issued = append(f.issued, bytes.Clone(dk))
	return &kms.GenerateDataKeyOutput{KeyId: aws.String(k.arn), Plaintext: dk, CiphertextBlob: k.wrap(dk, in.EncryptionContext)}, nil
}

func (f *fakeKMS) Decrypt(ctx context.Context, in *kms.DecryptInput, _ ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	f.mu.Lock()
	f.calls["Decrypt"]++
	cp := *in
	f.lastDecrypt = &cp
	delay, enter := f.decryptDelay, f.decryptEnter
	f.mu.Unlock()
	if enter != nil {
		enter <- struct{}{}
	}
	if delay > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	k, dk, err := f.unwrapLocked(in.CiphertextBlob, in.KeyId, in.EncryptionContext)
	if err != nil {
		return nil, err
	}
	f.returned = append(f.returned, dk)
	f.issued = append(f.issued, bytes.Clone(dk))
	return &kms.DecryptOutput{KeyId: aws.String(k.arn), Plaintext: dk}, nil
}

func (f *fakeKMS) ReEncrypt(ctx context.Context, in *kms.ReEncryptInput, _ ...func(*kms.Options)) (*kms.ReEncryptOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls["ReEncrypt"]++
	src, dk, err := f.unwrapLocked(in.CiphertextBlob, in.SourceKeyId, in.SourceEncryptionContext)
	if err != nil {
		return nil, err
	}
	dst := f.resolveLocked(aws.ToString(in.DestinationKeyId))
	if dst == nil {
		return nil, &types.NotFoundException{Message: aws.String("key " + aws.ToString(in.DestinationKeyId) + " not found")}
	}
	return &kms.ReEncryptOutput{
		KeyId:          aws.String(dst.arn),
		SourceKeyId:    aws.String(src.arn),
		CiphertextBlob: dst.wrap(dk, in.DestinationEncryptionContext),
	}, nil
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
