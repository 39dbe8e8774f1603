//go:build integration

package kmsseal

// Integration tests against the KMS API of a local emulator (MiniStack by
// default: localstack/ministack.sh up). They create their own keys and
// schedule them for deletion. Run with
//
//	AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=test \
//	AWS_SECRET_ACCESS_KEY=test AWS_REGION=us-east-1 \
//	go test -tags integration -race -count=1 ./shared/aws/kmsseal/
//
// Where the emulator departs from AWS KMS the test says so in its log
// ("MiniStack deviation: …") and checks that the sealer still refuses.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/agentauth/agentauth/shared/aws/awscount"
	"github.com/agentauth/agentauth/shared/domain"
)

type emulator struct {
	admin *kms.Client       // key management; not counted
	kms   *kms.Client       // what the sealers use; counted
	calls *awscount.Counter // calls made through kms
}

func newEmulator(t *testing.T) *emulator {
	t.Helper()
	cfg := emulatortest.Config(t)
	e := &emulator{calls: awscount.New()}
	e.admin = kms.NewFromConfig(cfg)
	counted := cfg.Copy()
	e.calls.Register(&counted)
	e.kms = kms.NewFromConfig(counted)
	return e
}

func (e *emulator) createKey(t *testing.T, purpose string) string {
	t.Helper()
	ctx := context.Background()
	out, err := e.admin.CreateKey(ctx, &kms.CreateKeyInput{
		Description: aws.String("agentauth kmsseal integration test: " + purpose),
		KeySpec:     types.KeySpecSymmetricDefault,
		KeyUsage:    types.KeyUsageTypeEncryptDecrypt,
	})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	arn := aws.ToString(out.KeyMetadata.Arn)
	t.Cleanup(func() {
		if _, err := e.admin.ScheduleKeyDeletion(context.Background(), &kms.ScheduleKeyDeletionInput{
			KeyId: aws.String(arn), PendingWindowInDays: aws.Int32(7),
		}); err != nil {
			t.Logf("ScheduleKeyDeletion %s: %v", arn, err)
		}
	})
	return arn
}

func uniqueID(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func refusedByKMS(err error) bool {
	var invalid *types.InvalidCiphertextException
	return errors.As(err, &invalid)
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// unsupported reports whether err says the emulator does not implement an
// operation.
func unsupported(err error) bool {
	switch apiCode(err) {
	case "InvalidAction", "UnknownOperationException", "UnsupportedOperation", "NotImplemented", "InvalidAction.NotImplemented":
		return true
	}
	return false
}

func TestIntegrationRoundTripAndCalls(t *testing.T) {
	e := newEmulator(t)
	ctx := context.Background()
	keyARN := e.createKey(t, "round trip")
	alias := "alias/" + uniqueID("agentauth-it-")
	if _, err := e.admin.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(keyARN)}); err != nil {
		t.Fatalf("CreateAlias: %v", err)
	}
	t.Cleanup(func() {
		_, _ = e.admin.DeleteAlias(context.Background(), &kms.DeleteAliasInput{AliasName: aws.String(alias)})
	})

	s := mustNew(t, e.kms, alias, Options{})
	g := grant1
	g.ID = uniqueID("grant-")
	ab, rb := domain.GrantBinding(g, domain.FieldAccessToken), domain.GrantBinding(g, domain.FieldRefreshToken)

	e.calls.Reset()
	a := mustSeal(t, s, access, ab)
	r := mustSeal(t, s, refresh, rb)
	if got := e.calls.Snapshot(); got["kms.GenerateDataKey"] != 1 || e.calls.Total() != 1 {
		t.Fatalf("grant write: KMS calls %v, want one GenerateDataKey", got)
	}
	if a.KeyID != keyARN || a.WrappedKey != r.WrappedKey {
		t.Fatalf("KeyID %s (want the key ARN %s), one wrapped key for both fields: %t", a.KeyID, keyARN, a.WrappedKey == r.WrappedKey)
	}
	wrapped, _ := base64.StdEncoding.DecodeString(a.WrappedKey)
	t.Logf("wrapped data key: %d bytes (AWS KMS: about 184 for an AES_256 data key)", len(wrapped))

	mustOpen(t, s, a, ab, access)
	mustOpen(t, s, r, rb, refresh)
	if n := e.calls.Total(); n != 1 {
		t.Fatalf("read after write: KMS calls %s, want none beyond the GenerateDataKey", e.calls)
	}

	e.calls.Reset()
	cold := mustNew(t, e.kms, alias, Options{})
	mustOpen(t, cold, a, ab, access)
	mustOpen(t, cold, r, rb, refresh)
	mustOpen(t, cold, a, ab, access)
	if got := e.calls.Snapshot(); got["kms.Decrypt"] != 1 || e.calls.Total() != 1 {
		t.Fatalf("cold then warm reads of one grant: KMS calls %v, want one Decrypt", got)
	}

	// Concurrent use against the real SDK client.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			b := domain.GrantBinding(domain.Grant{ID: fmt.Sprintf("%s-%d", g.ID, i), OAuthAppRef: g.OAuthAppRef, Subject: g.Subject}, domain.FieldAccessToken)
			v, err := s.Seal(ctx, []byte(access), b)
			if err == nil {
				var got []byte
				got, err = cold.Open(ctx, v, b)
				if err == nil && string(got) != access {
					err = errors.New("wrong plaintext")
				}
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// A value moved to another record does not open with a cold cache: KMS
// itself refuses the wrapped key under the other context.
func TestIntegrationContextBinding(t *testing.T) {
	e := newEmulator(t)
	ctx := context.Background()
	keyARN := e.createKey(t, "context binding")
	s := mustNew(t, e.kms, keyARN, Options{})
	g := grant1
	g.ID = uniqueID("grant-")
	from := domain.GrantBinding(g, domain.FieldAccessToken)
	v := mustSeal(t, s, access, from)

	// KMS directly: the wrapped key opens under its own context only.
	blob, _ := base64.StdEncoding.DecodeString(v.WrappedKey)
	own, err := e.admin.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: blob, EncryptionContext: EncryptionContext(from), KeyId: aws.String(keyARN)})
	if err != nil || len(own.Plaintext) != 32 {
		t.Fatalf("Decrypt under the right context: %v", err)
	}
	clear(own.Plaintext)
	moved := from
	moved.RecordID = uniqueID("grant-")
	if _, err := e.admin.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: blob, EncryptionContext: EncryptionContext(moved), KeyId: aws.String(keyARN)}); !refusedByKMS(err) {
		t.Fatalf("emulator Decrypt under another record's context: %v, want InvalidCiphertextException (does it ignore EncryptionContext?)", err)
	}
	if _, err := e.admin.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: blob, KeyId: aws.String(keyARN)}); !refusedByKMS(err) {
		t.Fatalf("emulator Decrypt without a context: %v, want InvalidCiphertextException", err)
	}

	for _, tc := range []struct {
		name  string
		to    func(domain.Binding) domain.Binding
		byKMS bool
	}{
		{"other record id", func(b domain.Binding) domain.Binding { b.RecordID = uniqueID("grant-"); return b }, true},
		{"other record kind", func(b domain.Binding) domain.Binding { b.Record = "session"; return b }, true},
		{"other app", func(b domain.Binding) domain.Binding { b.App = "OAuthApp/github"; return b }, true},
		{"other subject", func(b domain.Binding) domain.Binding { b.Subject = "user:mallory"; return b }, true},
		{"other field", func(b domain.Binding) domain.Binding { b.Field = domain.FieldRefreshToken; return b }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cold := mustNew(t, e.kms, keyARN, Options{})
			e.calls.Reset()
			_, err := cold.Open(ctx, v, tc.to(from))
			if !errors.Is(err, domain.ErrCorrupt) {
				t.Fatalf("moved value: %v, want ErrCorrupt", err)
			}
			if refusedByKMS(err) != tc.byKMS {
				t.Fatalf("refused by KMS %t, want %t: %v", refusedByKMS(err), tc.byKMS, err)
			}
			if n := e.calls.Get("kms.Decrypt"); n != 1 {
				t.Fatalf("%d Decrypt calls, want 1 (cold cache)", n)
			}
			t.Logf("refused (by KMS: %t): %v", tc.byKMS, err)
		})
	}
}

// Tampering never opens. AWS KMS authenticates its ciphertext blobs;
// where the emulator does not, AES-GCM is what refuses, and the test logs
// which layer did.
func TestIntegrationTamper(t *testing.T) {
	e := newEmulator(t)
	ctx := context.Background()
	key1, key2 := e.createKey(t, "tamper 1"), e.createKey(t, "tamper 2")
	s := mustNew(t, e.kms, key1, Options{})
	g := grant1
	g.ID = uniqueID("grant-")
	b := domain.GrantBinding(g, domain.FieldAccessToken)
	v := mustSeal(t, s, access, b)
	blob, _ := base64.StdEncoding.DecodeString(v.WrappedKey)

	for _, tc := range []struct {
		name string
		mod  func(*domain.EncryptedValue)
		// The bytes changed are part of the emulator's wrapped key but
		// ignored by it; AWS KMS authenticates its whole blob.
		emulatorIgnores bool
	}{
		{"iv", func(v *domain.EncryptedValue) { v.IV = flip(v.IV, 0) }, false},
		{"ciphertext", func(v *domain.EncryptedValue) { v.Ciphertext = flip(v.Ciphertext, 0) }, false},
		{"tag", func(v *domain.EncryptedValue) { v.Tag = flip(v.Tag, -1) }, false},
		{"wrapped key, first byte", func(v *domain.EncryptedValue) { v.WrappedKey = flip(v.WrappedKey, 0) }, true},
		{"wrapped key, middle byte", func(v *domain.EncryptedValue) { v.WrappedKey = flip(v.WrappedKey, len(blob)/2) }, false},
		{"wrapped key, last byte", func(v *domain.EncryptedValue) { v.WrappedKey = flip(v.WrappedKey, -1) }, false},
		{"key id of another key", func(v *domain.EncryptedValue) { v.KeyID = key2 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := v
			tc.mod(&w)
			pt, err := mustNew(t, e.kms, key1, Options{}).Open(ctx, w, b)
			if err == nil && tc.emulatorIgnores && string(pt) == access {
				t.Logf("MiniStack deviation: it ignores this byte of its CiphertextBlob (the 36-byte key id prefix, when Decrypt names the KeyId) and returns the right data key, so the value opens with its true plaintext; AWS KMS: InvalidCiphertextException")
				return
			}
			if !errors.Is(err, domain.ErrCorrupt) && !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("tampered value: %v, want ErrCorrupt or ErrUnknownKey", err)
			}
			layer := "AES-GCM (KMS returned a data key)"
			if code := apiCode(err); code != "" {
				layer = "KMS " + code
			}
			t.Logf("refused by %s: %v", layer, err)
		})
	}

	// Direct probes of the emulator, logged for the deviation report.
	last := bytes.Clone(blob)
	last[len(last)-1] ^= 1
	if out, err := e.admin.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: last, EncryptionContext: EncryptionContext(b), KeyId: aws.String(key1)}); err == nil {
		clear(out.Plaintext)
		t.Logf("MiniStack deviation: Decrypt of a wrapped key with its last byte flipped succeeds and returns a different %d-byte key (AWS KMS: InvalidCiphertextException); AES-GCM refuses the value", len(out.Plaintext))
	} else {
		t.Logf("Decrypt of a wrapped key with its last byte flipped: %s", apiCode(err))
	}
	if out, err := e.admin.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: blob, EncryptionContext: EncryptionContext(b), KeyId: aws.String(key2)}); err == nil {
		clear(out.Plaintext)
		t.Logf("MiniStack deviation: Decrypt with KeyId naming another key than the one that wrapped the blob succeeds with a wrong %d-byte key (AWS KMS: IncorrectKeyException); AES-GCM refuses the value", len(out.Plaintext))
	} else {
		t.Logf("Decrypt with another key's KeyId: %s", apiCode(err))
	}
}

// Values sealed before a key rotation still open after it.
func TestIntegrationRotation(t *testing.T) {
	e := newEmulator(t)
	ctx := context.Background()
	keyARN := e.createKey(t, "rotation")
	if _, err := e.admin.EnableKeyRotation(ctx, &kms.EnableKeyRotationInput{KeyId: aws.String(keyARN)}); err != nil {
		t.Fatalf("EnableKeyRotation: %v", err)
	}
	st, err := e.admin.GetKeyRotationStatus(ctx, &kms.GetKeyRotationStatusInput{KeyId: aws.String(keyARN)})
	if err != nil || !st.KeyRotationEnabled {
		t.Fatalf("GetKeyRotationStatus: %+v %v", st, err)
	}
	s := mustNew(t, e.kms, keyARN, Options{})
	g := grant1
	g.ID = uniqueID("grant-")
	b := domain.GrantBinding(g, domain.FieldAccessToken)
	before := mustSeal(t, s, access, b)

	rotated := false
	if _, err := e.admin.RotateKeyOnDemand(ctx, &kms.RotateKeyOnDemandInput{KeyId: aws.String(keyARN)}); err != nil {
		if !unsupported(err) {
			t.Fatalf("RotateKeyOnDemand: %v", err)
		}
		t.Logf("MiniStack deviation: RotateKeyOnDemand is not implemented (%s: %v); rotation is only a flag (EnableKeyRotation/GetKeyRotationStatus), key material never changes", apiCode(err), err)
	} else {
		rotated = true
		t.Log("RotateKeyOnDemand: key material rotated")
	}
	cold := mustNew(t, e.kms, keyARN, Options{})
	mustOpen(t, cold, before, b, access)
	g2 := g
	g2.ID = uniqueID("grant-")
	after := mustSeal(t, mustNew(t, e.kms, keyARN, Options{}), refresh, domain.GrantBinding(g2, domain.FieldRefreshToken))
	mustOpen(t, mustNew(t, e.kms, keyARN, Options{}), after, domain.GrantBinding(g2, domain.FieldRefreshToken), refresh)
	mustOpen(t, mustNew(t, e.kms, keyARN, Options{}), before, b, access)
	t.Logf("values sealed before rotation open after it (material rotated: %t)", rotated)
}

// reEncryptShim stands in for KMS ReEncrypt where the emulator lacks it:
// Decrypt under the source context, Encrypt under the destination key and
// context. Test only: unlike ReEncrypt it brings the data key into the
// process, which is exactly what Rewrap exists to avoid.
type reEncryptShim struct{ *kms.Client }

func (c reEncryptShim) ReEncrypt(ctx context.Context, in *kms.ReEncryptInput, optFns ...func(*kms.Options)) (*kms.ReEncryptOutput, error) {
	dec, err := c.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: in.CiphertextBlob, EncryptionContext: in.SourceEncryptionContext, KeyId: in.SourceKeyId}, optFns...)
	if err != nil {
		return nil, err
	}
	defer clear(dec.Plaintext)
	enc, err := c.Encrypt(ctx, &kms.EncryptInput{KeyId: in.DestinationKeyId, Plaintext: dec.Plaintext, EncryptionContext: in.DestinationEncryptionContext}, optFns...)
	if err != nil {
		return nil, err
	}
	return &kms.ReEncryptOutput{CiphertextBlob: enc.CiphertextBlob, KeyId: enc.KeyId, SourceKeyId: dec.KeyId}, nil
}

// Rewrap moves a value to a second key; afterwards it opens with the first
// key disabled.
func TestIntegrationRewrap(t *testing.T) {
	e := newEmulator(t)
	ctx := context.Background()
	key1, key2 := e.createKey(t, "rewrap source"), e.createKey(t, "rewrap destination")
	s := mustNew(t, e.kms, key1, Options{})
	g := grant1
	g.ID = uniqueID("grant-")
	ab, rb := domain.GrantBinding(g, domain.FieldAccessToken), domain.GrantBinding(g, domain.FieldRefreshToken)
	a, r := mustSeal(t, s, access, ab), mustSeal(t, s, refresh, rb)

	e.calls.Reset()
	rewrapper := s
	wa, err := rewrapper.Rewrap(ctx, a, ab, key2)
	if err != nil {
		if !unsupported(err) {
			t.Fatalf("Rewrap: %v", err)
		}
		t.Logf("MiniStack deviation: ReEncrypt is not implemented (%s: %v); Rewrap is tested through a test-only ReEncrypt made of Decrypt + Encrypt", apiCode(err), err)
		rewrapper = mustNew(t, reEncryptShim{e.kms}, key1, Options{})
		if wa, err = rewrapper.Rewrap(ctx, a, ab, key2); err != nil {
			t.Fatalf("Rewrap through the shim: %v", err)
		}
	} else if got := e.calls.Snapshot(); got["kms.ReEncrypt"] != 1 || got["kms.Decrypt"] != 0 {
		t.Fatalf("Rewrap KMS calls %v, want one ReEncrypt and no Decrypt", got)
	}
	calls := e.calls.Total()
	wr, err := rewrapper.Rewrap(ctx, r, rb, key2)
	if err != nil {
		t.Fatal(err)
	}
	if wr.WrappedKey != wa.WrappedKey || e.calls.Total() != calls {
		t.Fatalf("the record's second field: KMS calls %s, one wrapped key %t; want no call and one key", e.calls, wr.WrappedKey == wa.WrappedKey)
	}
	if wa.KeyID != key2 || wa.WrappedKey == a.WrappedKey || wa.IV != a.IV || wa.Ciphertext != a.Ciphertext || wa.Tag != a.Tag {
		t.Fatalf("rewrapped value: key %s (want %s), iv/ciphertext/tag unchanged %t", wa.KeyID, key2, wa.IV == a.IV && wa.Ciphertext == a.Ciphertext && wa.Tag == a.Tag)
	}
	if _, err := rewrapper.Rewrap(ctx, a, domain.GrantBinding(domain.Grant{ID: uniqueID("grant-"), OAuthAppRef: g.OAuthAppRef, Subject: g.Subject}, domain.FieldAccessToken), key2); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("Rewrap under another record: %v, want ErrCorrupt", err)
	}

	// Only the second key's data from here on.
	if _, err := e.admin.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(key1)}); err != nil {
		t.Fatalf("DisableKey: %v", err)
	}
	e.calls.Reset()
	cold := mustNew(t, e.kms, key2, Options{})
	mustOpen(t, cold, wa, ab, access)
	mustOpen(t, cold, wr, rb, refresh)
	if got := e.calls.Snapshot(); got["kms.Decrypt"] != 1 || e.calls.Total() != 1 {
		t.Fatalf("KMS calls %v, want one Decrypt", got)
	}
	var disabled *types.DisabledException
	if _, err := cold.Open(ctx, a, ab); !errors.As(err, &disabled) {
		t.Fatalf("the value not rewrapped needs the disabled key: %v, want DisabledException", err)
	}
}

// The open cache stays within MaxCachedKeys and DataKeyTTL against real
// KMS calls, counted at the SDK.
func TestIntegrationCacheBounds(t *testing.T) {
	e := newEmulator(t)
	keyARN := e.createKey(t, "cache bounds")
	s := mustNew(t, e.kms, keyARN, Options{})
	type item struct {
		b domain.Binding
		v domain.EncryptedValue
	}
	var items []item
	for range 5 {
		g := grant1
		g.ID = uniqueID("grant-")
		b := domain.GrantBinding(g, domain.FieldAccessToken)
		items = append(items, item{b, mustSeal(t, s, access, b)})
	}
	clock := newClock()
	cold := mustNew(t, e.kms, keyARN, Options{MaxCachedKeys: 3, DataKeyTTL: time.Minute, Now: clock.Now})
	e.calls.Reset()
	open := func(i, wantDecrypts int) {
		t.Helper()
		mustOpen(t, cold, items[i].v, items[i].b, access)
		if n := e.calls.Get("kms.Decrypt"); n != wantDecrypts {
			t.Fatalf("after opening #%d: %d Decrypt calls, want %d", i, n, wantDecrypts)
		}
		if n := cold.open.len(); n > 3 {
			t.Fatalf("cache holds %d keys, bound 3", n)
		}
	}
	for i := range 5 {
		open(i, i+1) // 5 cold reads; #0 and #1 evicted
	}
	open(2, 5)
	open(3, 5)
	open(4, 5)
	open(0, 6) // evicts #2
	clock.Advance(59 * time.Second)
	open(4, 6)
	clock.Advance(time.Second) // a minute after #4's Decrypt
	open(4, 7)
}
