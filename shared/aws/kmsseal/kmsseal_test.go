package kmsseal

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/smithy-go"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
)

const (
	access  = "xoxb-access-token-value-0123456789"
	refresh = "xoxe-refresh-token-value-9876543210"
)

var grant1 = domain.Grant{ID: "grant-0001", OAuthAppRef: domain.ObjectRef{Kind: "OAuthApp", Name: "slack-bot"}, Subject: "user:alice"}

func bind(id, field string) domain.Binding {
	g := grant1
	g.ID = id
	return domain.GrantBinding(g, field)
}

func mustNew(t testing.TB, api KMSAPI, keyID string, opts Options) *Sealer {
	t.Helper()
	s, err := New(api, keyID, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustSeal(t testing.TB, s *Sealer, pt string, b domain.Binding) domain.EncryptedValue {
	t.Helper()
	v, err := s.Seal(context.Background(), []byte(pt), b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustOpen(t testing.TB, s *Sealer, v domain.EncryptedValue, b domain.Binding, want string) {
	t.Helper()
	got, err := s.Open(context.Background(), v, b)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("opened %d bytes, want %d", len(got), len(want))
	}
}

// noSecrets fails when err's text holds a plaintext or any data key the
// fake handed out, in raw, base64 or hex form.
func noSecrets(t *testing.T, f *fakeKMS, err error) {
	t.Helper()
	texts := []string{fmt.Sprint(err), fmt.Sprintf("%+v %#v %q", err, err, err)}
	secrets := []string{access, refresh}
	f.mu.Lock()
	for _, k := range f.issued {
		secrets = append(secrets, string(k), base64.StdEncoding.EncodeToString(k), base64.RawStdEncoding.EncodeToString(k), hex.EncodeToString(k))
	}
	f.mu.Unlock()
	for _, txt := range texts {
		for _, s := range secrets {
			if strings.Contains(txt, s) {
				t.Fatalf("error text holds a secret: %s", txt)
			}
		}
	}
}

func TestNewOptions(t *testing.T) {
	f := newFakeKMS("k1")
	s := mustNew(t, f, "k1", Options{})
	if s.ttl != MaxDataKeyTTL || s.open.max != DefaultMaxCachedKeys || s.now == nil || s.KeyID() != "k1" {
		t.Fatalf("defaults: ttl %v max %d", s.ttl, s.open.max)
	}
	for _, tc := range []struct {
		name  string
		api   KMSAPI
		key   string
		opts  Options
		valid bool
	}{
		{"ttl at max", f, "k1", Options{DataKeyTTL: MaxDataKeyTTL, MaxCachedKeys: 3}, true},
		{"nil api", nil, "k1", Options{}, false},
		{"empty key", f, "", Options{}, false},
		{"ttl above max", f, "k1", Options{DataKeyTTL: MaxDataKeyTTL + time.Second}, false},
		{"negative ttl", f, "k1", Options{DataKeyTTL: -time.Second}, false},
		{"negative size", f, "k1", Options{MaxCachedKeys: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.api, tc.key, tc.opts)
			if (err == nil) != tc.valid {
				t.Fatalf("err %v, want valid %t", err, tc.valid)
			}
		})
	}
}

func TestEncryptionContext(t *testing.T) {
	got := EncryptionContext(bind("grant-0001", domain.FieldAccessToken))
	want := map[string]string{
		"agentauth:record":   "grant",
		"agentauth:recordId": "grant-0001",
		"agentauth:app":      "OAuthApp/slack-bot",
		"agentauth:subject":  "user:alice",
	}
	if !maps.Equal(got, want) {
		t.Fatalf("context %v, want %v", got, want)
	}
	bare := EncryptionContext(domain.Binding{Record: "session", RecordID: "as-1", Field: "state"})
	if !maps.Equal(bare, map[string]string{"agentauth:record": "session", "agentauth:recordId": "as-1"}) {
		t.Fatalf("empty app and subject must be left out: %v", bare)
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	f := newFakeKMS("k1")
	f.addAlias("alias/agentauth", "k1")
	s := mustNew(t, f, "alias/agentauth", Options{})
	cold := mustNew(t, f, "alias/agentauth", Options{})
	for i, pt := range []string{access, "", strings.Repeat("x", 10000)} {
		b := bind(fmt.Sprintf("grant-rt-%d", i), domain.FieldAccessToken)
		v := mustSeal(t, s, pt, b)
		iv, _ := base64.StdEncoding.DecodeString(v.IV)
		tag, _ := base64.StdEncoding.DecodeString(v.Tag)
		ct, _ := base64.StdEncoding.DecodeString(v.Ciphertext)
		wrapped, err := base64.StdEncoding.DecodeString(v.WrappedKey)
		if v.Algorithm != "aes-256-gcm" || len(iv) != 12 || len(tag) != 16 || len(ct) != len(pt) || err != nil || len(wrapped) == 0 {
			t.Fatalf("envelope %+v", v)
		}
		if v.KeyID != fakeAccount+"k1" {
			t.Fatalf("KeyID %q, want the key ARN GenerateDataKey returned", v.KeyID)
		}
		if pt != "" && strings.Contains(v.Ciphertext+v.IV+v.Tag+v.WrappedKey, pt) {
			t.Fatal("plaintext visible in sealed value")
		}
		gen := f.lastGenerate
		if aws := *gen.KeyId; aws != "alias/agentauth" || gen.KeySpec != types.DataKeySpecAes256 || !maps.Equal(gen.EncryptionContext, EncryptionContext(b)) {
			t.Fatalf("GenerateDataKey input %+v", gen)
		}
		mustOpen(t, s, v, b, pt)
		mustOpen(t, cold, v, b, pt)
		if got := *f.lastDecrypt.KeyId; got != v.KeyID || !maps.Equal(f.lastDecrypt.EncryptionContext, EncryptionContext(b)) {
			t.Fatalf("Decrypt input key %s context %v", got, f.lastDecrypt.EncryptionContext)
		}
	}
	// The raw data keys KMS returned were zeroed once the key schedule was built.
	for i, k := range f.returned {
		if !bytes.Equal(k, make([]byte, len(k))) {
			t.Fatalf("plaintext data key #%d not zeroed", i)
		}
	}
}

// The fields of one record share one data key: a grant write is one
// GenerateDataKey; another record gets its own.
func TestOneDataKeyPerRecord(t *testing.T) {
	f := newFakeKMS("k1")
	clock := newClock()
	s := mustNew(t, f, "k1", Options{Now: clock.Now})
	a := mustSeal(t, s, access, bind("grant-A", domain.FieldAccessToken))
	r := mustSeal(t, s, refresh, bind("grant-A", domain.FieldRefreshToken))
	if n := f.count("GenerateDataKey"); n != 1 {
		t.Fatalf("grant write: %d GenerateDataKey calls, want 1", n)
	}
	if a.WrappedKey != r.WrappedKey || a.IV == r.IV {
		t.Fatal("fields of one record: want one wrapped key and distinct IVs")
	}
	b := mustSeal(t, s, access, bind("grant-B", domain.FieldAccessToken))
	if n := f.count("GenerateDataKey"); n != 2 || b.WrappedKey == a.WrappedKey {
		t.Fatalf("another record: %d calls, shared key %t", n, b.WrappedKey == a.WrappedKey)
	}
	other := bind("grant-A", domain.FieldAccessToken)
	other.Subject = "user:bob"
	mustSeal(t, s, access, other)
	if n := f.count("GenerateDataKey"); n != 3 {
		t.Fatalf("same id, other subject: %d calls, want 3", n)
	}

	// Reuse is short: after the window a write gets a fresh key.
	clock.Advance(sealReuseWindow)
	a2 := mustSeal(t, s, access, bind("grant-A", domain.FieldAccessToken))
	if n := f.count("GenerateDataKey"); n != 4 || a2.WrappedKey == a.WrappedKey {
		t.Fatalf("after the reuse window: %d calls", n)
	}
	// … and bounded: at most sealReuseMaxValues values per key.
	for range sealReuseMaxValues - 1 {
		mustSeal(t, s, access, bind("grant-A", domain.FieldAccessToken))
	}
	if n := f.count("GenerateDataKey"); n != 4 {
		t.Fatalf("within the bound: %d calls, want 4", n)
	}
	mustSeal(t, s, access, bind("grant-A", domain.FieldAccessToken))
	if n := f.count("GenerateDataKey"); n != 5 {
		t.Fatalf("past the bound: %d calls, want 5", n)
	}
	// Every value still opens.
	cold := mustNew(t, f, "k1", Options{Now: clock.Now})
	mustOpen(t, cold, a, bind("grant-A", domain.FieldAccessToken), access)
	mustOpen(t, cold, r, bind("grant-A", domain.FieldRefreshToken), refresh)
}

// A warm Open makes no KMS call; a cold one makes one Decrypt, which then
// serves both fields of the record.
func TestOpenWarmAndCold(t *testing.T) {
	f := newFakeKMS("k1")
	s := mustNew(t, f, "k1", Options{})
	a := mustSeal(t, s, access, bind("grant-A", domain.FieldAccessToken))
	r := mustSeal(t, s, refresh, bind("grant-A", domain.FieldRefreshToken))
	for range 3 {
		mustOpen(t, s, a, bind("grant-A", domain.FieldAccessToken), access)
	}
	if n := f.count("Decrypt"); n != 0 {
		t.Fatalf("read after write: %d Decrypt calls, want 0", n)
	}
	cold := mustNew(t, f, "k1", Options{})
	mustOpen(t, cold, a, bind("grant-A", domain.FieldAccessToken), access)
	if n := f.count("Decrypt"); n != 1 {
		t.Fatalf("cold open: %d Decrypt calls, want 1", n)
	}
	mustOpen(t, cold, a, bind("grant-A", domain.FieldAccessToken), access)
	mustOpen(t, cold, r, bind("grant-A", domain.FieldRefreshToken), refresh)
	if n := f.count("Decrypt"); n != 1 {
		t.Fatalf("warm opens: %d Decrypt calls, want still 1", n)
	}
	cold.Purge()
	mustOpen(t, cold, r, bind("grant-A", domain.FieldRefreshToken), refresh)
	if n := f.count("Decrypt"); n != 2 {
		t.Fatalf("after Purge: %d Decrypt calls, want 2", n)
	}
	for i, k := range f.returned {
		if !bytes.Equal(k, make([]byte, len(k))) {
			t.Fatalf("plaintext data key #%d not zeroed", i)
		}
	}
}

func TestCacheExpires(t *testing.T) {
	f := newFakeKMS("k1")
	clock := newClock()
	s := mustNew(t, f, "k1", Options{})
	v := mustSeal(t, s, access, bind("grant-A", domain.FieldAccessToken))
	const ttl = 90 * time.Second
	cold := mustNew(t, f, "k1", Options{DataKeyTTL: ttl, Now: clock.Now})
	mustOpen(t, cold, v, bind("grant-A", domain.FieldAccessToken), access)
	// Expiry counts from the Decrypt, not from the last use.
	for _, step := range []time.Duration{30 * time.Second, 30 * time.Second, 29 * time.Second} {
		clock.Advance(step)
		mustOpen(t, cold, v, bind("grant-A", domain.FieldAccessToken), access)
	}
	if n := f.count("Decrypt"); n != 1 {
		t.Fatalf("within TTL: %d Decrypt calls, want 1", n)
	}
	clock.Advance(time.Second) // now exactly TTL after the Decrypt
	mustOpen(t, cold, v, bind("grant-A", domain.FieldAccessToken), access)
	if n := f.count("Decrypt"); n != 2 {
		t.Fatalf("at TTL: %d Decrypt calls, want 2", n)
	}
}

func TestCacheIsBoundedLRU(t *testing.T) {
	f := newFakeKMS("k1")
	s := mustNew(t, f, "k1", Options{})
	vals := map[string]domain.EncryptedValue{}
	for _, id := range []string{"g1", "g2", "g3", "g4"} {
		vals[id] = mustSeal(t, s, access, bind(id, domain.FieldAccessToken))
	}
	cold := mustNew(t, f, "k1", Options{MaxCachedKeys: 2})
	decrypts := f.count("Decrypt")
	for _, step := range []struct {
		open    string
		decrypt bool
	}{
		{"g1", true}, {"g2", true}, // cache g2 g1
		{"g1", false}, // g1 g2: g1 most recent
		{"g3", true},  // g3 g1: g2 evicted
		{"g1", false}, // g1 g3
		{"g2", true},  // g2 g1: g3 evicted
		{"g3", true},  // g3 g2
		{"g4", true}, {"g4", false}, {"g2", true},
	} {
		mustOpen(t, cold, vals[step.open], bind(step.open, domain.FieldAccessToken), access)
		if step.decrypt {
			decrypts++
		}
		if n := f.count("Decrypt"); n != decrypts {
			t.Fatalf("open %s: %d Decrypt calls, want %d", step.open, n, decrypts)
		}
		if n := cold.open.len(); n > 2 {
			t.Fatalf("cache holds %d keys, bound 2", n)
		}
	}
	// Sealing is bounded by the same cache.
	for i := range 10 {
		mustSeal(t, cold, access, bind(fmt.Sprintf("g-many-%d", i), domain.FieldAccessToken))
	}
	if n := cold.open.len(); n != 2 {
		t.Fatalf("after 10 seals the cache holds %d keys, bound 2", n)
	}
}

// A value moved to another record, app, subject or field never opens,
// whether the key is cached (the cache is keyed by the context, and GCM
// authenticates the field) or not (KMS refuses the context).
func TestMovedValueDoesNotOpen(t *testing.T) {
	from := bind("grant-A", domain.FieldAccessToken)
	for _, tc := range []struct {
		name     string
		to       func(domain.Binding) domain.Binding
		kmsCheck bool // refused by KMS (context), else by GCM (field)
	}{
		{"other record id", func(b domain.Binding) domain.Binding { b.RecordID = "grant-B"; return b }, true},
		{"other record kind", func(b domain.Binding) domain.Binding { b.Record = "session"; return b }, true},
		{"other app", func(b domain.Binding) domain.Binding { b.App = "OAuthApp/github"; return b }, true},
		{"other subject", func(b domain.Binding) domain.Binding { b.Subject = "user:mallory"; return b }, true},
		{"no subject", func(b domain.Binding) domain.Binding { b.Subject = ""; return b }, true},
		{"other field", func(b domain.Binding) domain.Binding { b.Field = domain.FieldRefreshToken; return b }, false},
	} {
		for _, warm := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/warm=%t", tc.name, warm), func(t *testing.T) {
				f := newFakeKMS("k1")
				s := mustNew(t, f, "k1", Options{})
				v := mustSeal(t, s, access, from)
				// The target record's own key is cached too: it must not serve.
				mustSeal(t, s, refresh, tc.to(from))
				opener := s
				if !warm {
					opener = mustNew(t, f, "k1", Options{})
				}
				before := f.count("Decrypt")
				to := tc.to(from)
				_, err := opener.Open(context.Background(), v, to)
				if !errors.Is(err, domain.ErrCorrupt) {
					t.Fatalf("moved value: err %v, want ErrCorrupt", err)
				}
				var invalid *types.InvalidCiphertextException
				if got := errors.As(err, &invalid); got != tc.kmsCheck {
					t.Fatalf("refused by KMS %t, want %t: %v", got, tc.kmsCheck, err)
				}
				if tc.kmsCheck && f.count("Decrypt") != before+1 {
					t.Fatal("a cached key served a value under another context")
				}
				if !strings.Contains(err.Error(), "grant "+to.RecordID+" field "+to.Field) && !strings.Contains(err.Error(), to.Record+" "+to.RecordID) {
					t.Fatalf("error does not name the binding: %v", err)
				}
				noSecrets(t, f, err)
				mustOpen(t, opener, v, from, access) // still opens where it belongs
			})
		}
	}
}

func flip(s string, i int) string {
	b, _ := base64.StdEncoding.DecodeString(s)
	if i < 0 {
		i += len(b)
	}
	b[i] ^= 0x01
	return base64.StdEncoding.EncodeToString(b)
}

func TestTamperedValueDoesNotOpen(t *testing.T) {
	b := bind("grant-A", domain.FieldAccessToken)
	for _, tc := range []struct {
		name string
		mod  func(*domain.EncryptedValue)
		want error
	}{
		{"iv", func(v *domain.EncryptedValue) { v.IV = flip(v.IV, 0) }, domain.ErrCorrupt},
		{"ciphertext", func(v *domain.EncryptedValue) { v.Ciphertext = flip(v.Ciphertext, 3) }, domain.ErrCorrupt},
		{"tag", func(v *domain.EncryptedValue) { v.Tag = flip(v.Tag, -1) }, domain.ErrCorrupt},
		{"wrapped key body", func(v *domain.EncryptedValue) { v.WrappedKey = flip(v.WrappedKey, -1) }, domain.ErrCorrupt},
		{"wrapped key nonce", func(v *domain.EncryptedValue) { v.WrappedKey = flip(v.WrappedKey, 4) }, domain.ErrCorrupt},
		{"wrapped key truncated", func(v *domain.EncryptedValue) { v.WrappedKey = v.WrappedKey[:8] }, domain.ErrCorrupt},
		{"wrapped key missing", func(v *domain.EncryptedValue) { v.WrappedKey = "" }, domain.ErrCorrupt},
		{"key id of another key", func(v *domain.EncryptedValue) { v.KeyID = fakeAccount + "k2" }, ErrUnknownKey},
		{"key id unknown", func(v *domain.EncryptedValue) { v.KeyID = fakeAccount + "k9" }, ErrUnknownKey},
		{"algorithm", func(v *domain.EncryptedValue) { v.Algorithm = "aes-128-cbc" }, domain.ErrCorrupt},
		{"bad base64", func(v *domain.EncryptedValue) { v.Ciphertext = "%%%" }, domain.ErrCorrupt},
		{"short iv", func(v *domain.EncryptedValue) { v.IV = base64.StdEncoding.EncodeToString([]byte("short")) }, domain.ErrCorrupt},
		{"ciphertext of another value", func(v *domain.EncryptedValue) {
			v.Ciphertext = base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("x"), len(access)))
		}, domain.ErrCorrupt},
	} {
		for _, warm := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/warm=%t", tc.name, warm), func(t *testing.T) {
				f := newFakeKMS("k1", "k2")
				s := mustNew(t, f, "k1", Options{})
				v := mustSeal(t, s, access, b)
				opener := s
				if !warm {
					opener = mustNew(t, f, "k1", Options{})
				}
				tc.mod(&v)
				pt, err := opener.Open(context.Background(), v, b)
				if !errors.Is(err, tc.want) || pt != nil {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				if !strings.Contains(err.Error(), "grant grant-A field accessToken") {
					t.Fatalf("error does not name the binding: %v", err)
				}
				noSecrets(t, f, err)
			})
		}
	}
}

func TestOpenRefusesLocalKeyringValue(t *testing.T) {
	kr, err := aesseal.New(bytes.Repeat([]byte{7}, aesseal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	b := bind("grant-A", domain.FieldAccessToken)
	v, err := kr.Seal(context.Background(), []byte(access), b)
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeKMS("k1")
	_, err = mustNew(t, f, "k1", Options{}).Open(context.Background(), v, b)
	if !errors.Is(err, domain.ErrCorrupt) || !strings.Contains(err.Error(), "no wrapped data key") {
		t.Fatalf("err %v", err)
	}
	if n := len(f.counts()); n != 0 {
		t.Fatalf("KMS calls %v, want none", f.counts())
	}
}

func TestBindingMustNameRecordAndField(t *testing.T) {
	f := newFakeKMS("k1")
	s := mustNew(t, f, "k1", Options{})
	v := mustSeal(t, s, access, bind("grant-A", domain.FieldAccessToken))
	for _, b := range []domain.Binding{
		{RecordID: "grant-A", Field: "accessToken"},
		{Record: "grant", Field: "accessToken"},
		{Record: "grant", RecordID: "grant-A"},
	} {
		if _, err := s.Seal(context.Background(), []byte(access), b); err == nil {
			t.Fatalf("Seal %+v: want an error", b)
		}
		if _, err := s.Open(context.Background(), v, b); err == nil {
			t.Fatalf("Open %+v: want an error", b)
		}
	}
}

func TestKMSErrorsAreWrapped(t *testing.T) {
	f := newFakeKMS("k1")
	s := mustNew(t, f, "k-missing", Options{})
	_, err := s.Seal(context.Background(), []byte(access), bind("grant-A", domain.FieldAccessToken))
	var nf *types.NotFoundException
	if !errors.Is(err, ErrUnknownKey) || !errors.As(err, &nf) || !strings.Contains(err.Error(), "seal grant grant-A field accessToken") {
		t.Fatalf("err %v", err)
	}
	noSecrets(t, f, err)
}

func TestRewrap(t *testing.T) {
	f := newFakeKMS("k1", "k2")
	s := mustNew(t, f, "k1", Options{})
	b := bind("grant-A", domain.FieldAccessToken)
	v := mustSeal(t, s, access, b)
	ctx := context.Background()

	w, err := s.Rewrap(ctx, v, b, "k2")
	if err != nil {
		t.Fatal(err)
	}
	if w.KeyID != fakeAccount+"k2" || w.WrappedKey == v.WrappedKey {
		t.Fatalf("rewrapped %+v", w)
	}
	if w.IV != v.IV || w.Ciphertext != v.Ciphertext || w.Tag != v.Tag || w.Algorithm != v.Algorithm {
		t.Fatal("rewrap changed iv, ciphertext, tag or algorithm")
	}
	if c := f.counts(); c["ReEncrypt"] != 1 || c["Decrypt"] != 0 || c["GenerateDataKey"] != 1 {
		t.Fatalf("calls %v: the data key must not leave KMS", c)
	}
	// The other field of the record shares the wrapped key: no second
	// ReEncrypt, and the record still has one wrapped key.
	rb := bind("grant-A", domain.FieldRefreshToken)
	wr, err := s.Rewrap(ctx, mustSeal(t, s, refresh, rb), rb, "k2")
	if err != nil || wr.WrappedKey != w.WrappedKey || f.count("ReEncrypt") != 1 {
		t.Fatalf("second field: %v, shared %t, %d ReEncrypt calls", err, wr.WrappedKey == w.WrappedKey, f.count("ReEncrypt"))
	}
	// Only the second key is needed now.
	f.deleteKey("k1")
	cold := mustNew(t, f, "k2", Options{})
	mustOpen(t, cold, w, b, access)
	mustOpen(t, cold, wr, rb, refresh)
	if got := *f.lastDecrypt.KeyId; got != fakeAccount+"k2" || f.count("Decrypt") != 1 {
		t.Fatalf("Decrypt named %s, %d calls", got, f.count("Decrypt"))
	}
	if _, err := cold.Open(ctx, v, b); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("the old value needs the deleted key: %v", err)
	}
	// Moved values are refused by ReEncrypt too, and the field still binds.
	if _, err := cold.Rewrap(ctx, w, bind("grant-B", domain.FieldAccessToken), ""); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("rewrap under another record: %v", err)
	}
	back, err := cold.Rewrap(ctx, w, b, "") // "": the sealer's own key
	if err != nil || back.KeyID != fakeAccount+"k2" {
		t.Fatalf("rewrap to own key: %+v %v", back, err)
	}
	mustOpen(t, cold, back, b, access)
	if _, err := cold.Open(ctx, back, bind("grant-A", domain.FieldRefreshToken)); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("rewrapped value under another field: %v", err)
	}
	if _, err := cold.Rewrap(ctx, w, b, "k-missing"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("rewrap to a missing key: %v", err)
	}
	bad := w
	bad.WrappedKey = ""
	if _, err := cold.Rewrap(ctx, bad, b, "k2"); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("rewrap of a value without a wrapped key: %v", err)
	}
	noSecrets(t, f, err)
}

// Concurrent cold opens of one value share one Decrypt.
func TestConcurrentColdOpensShareOneDecrypt(t *testing.T) {
	f := newFakeKMS("k1")
	b := bind("grant-A", domain.FieldAccessToken)
	v := mustSeal(t, mustNew(t, f, "k1", Options{}), access, b)
	f.decryptDelay = 20 * time.Millisecond
	s := mustNew(t, f, "k1", Options{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			got, err := s.Open(context.Background(), v, b)
			if err != nil || string(got) != access {
				t.Errorf("open: %v", err)
			}
		})
	}
	wg.Wait()
	if n := f.count("Decrypt"); n != 1 {
		t.Fatalf("%d Decrypt calls, want 1", n)
	}
}

// A caller whose context ends does not fail the others waiting on the
// same Decrypt.
func TestCancelledCallerDoesNotFailOthers(t *testing.T) {
	f := newFakeKMS("k1")
	b := bind("grant-A", domain.FieldAccessToken)
	v := mustSeal(t, mustNew(t, f, "k1", Options{}), access, b)
	s := mustNew(t, f, "k1", Options{})
	f.decryptDelay = 50 * time.Millisecond
	f.decryptEnter = make(chan struct{}, 4)

	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error, 1)
	go func() { _, err := s.Open(ctxA, v, b); errA <- err }()
	<-f.decryptEnter // A's Decrypt is in flight
	resB := make(chan error, 1)
	go func() {
		got, err := s.Open(context.Background(), v, b)
		if err == nil && string(got) != access {
			err = errors.New("wrong plaintext")
		}
		resB <- err
	}()
	time.Sleep(10 * time.Millisecond) // let B join A's call
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Fatalf("A: %v", err)
	}
	if err := <-resB; err != nil {
		t.Fatalf("B failed with A's cancellation: %v", err)
	}
}

func TestSealerIsConcurrencySafe(t *testing.T) {
	f := newFakeKMS("k1")
	s := mustNew(t, f, "k1", Options{MaxCachedKeys: 4})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				b := bind(fmt.Sprintf("grant-%d-%d", g, i%6), domain.FieldAccessToken)
				v, err := s.Seal(context.Background(), []byte(access), b)
				if err != nil {
					t.Error(err)
					return
				}
				if got, err := s.Open(context.Background(), v, b); err != nil || string(got) != access {
					t.Errorf("open: %v", err)
					return
				}
				if i%17 == 0 {
					s.Purge()
				}
			}
		})
	}
	wg.Wait()
	if n := s.open.len(); n > 4 {
		t.Fatalf("cache holds %d keys, bound 4", n)
	}
}

// The cache keys stand for the encryption context: equal exactly when the
// contexts are equal, whatever the field values hold.
func TestCacheKeyFollowsContext(t *testing.T) {
	bs := []domain.Binding{
		{Record: "grant", RecordID: "g1", Field: "accessToken"},
		{Record: "grant", RecordID: "g1", Field: "refreshToken"},
		{Record: "grant", RecordID: "g1", Field: "accessToken", App: "OAuthApp/a"},
		{Record: "grant", RecordID: "g1", Field: "accessToken", Subject: "OAuthApp/a"},
		{Record: "grant", RecordID: "g1|OAuthApp/a", Field: "accessToken"},
		{Record: "grant|g1", RecordID: "OAuthApp/a", Field: "accessToken"},
		{Record: "session", RecordID: "g1", Field: "accessToken"},
		{Record: "grant", RecordID: "g1", Field: "accessToken", App: "a", Subject: "b"},
		{Record: "grant", RecordID: "g1", Field: "accessToken", App: "ab"},
	}
	for _, a := range bs {
		for _, b := range bs {
			same := maps.Equal(EncryptionContext(a), EncryptionContext(b))
			if (sealCacheKey(a) == sealCacheKey(b)) != same || (openCacheKey("k", []byte("w"), a) == openCacheKey("k", []byte("w"), b)) != same {
				t.Fatalf("%+v vs %+v: contexts equal %t, cache keys disagree", a, b, same)
			}
		}
	}
	b := bs[0]
	if openCacheKey("k1", []byte("w"), b) == openCacheKey("k2", []byte("w"), b) || openCacheKey("k", []byte("w1"), b) == openCacheKey("k", []byte("w2"), b) {
		t.Fatal("key id and wrapped key must be in the open cache key")
	}
}

// echoingKMS fails every call with an error whose message echoes what a
// request held, as a misbehaving endpoint may.
type echoingKMS struct{}

const echoed = "echoed-request-content-canary"

func (echoingKMS) err() error {
	return &smithy.GenericAPIError{Code: "KMSInternalException", Message: "failed on " + echoed}
}

func (e echoingKMS) GenerateDataKey(context.Context, *kms.GenerateDataKeyInput, ...func(*kms.Options)) (*kms.GenerateDataKeyOutput, error) {
	return nil, e.err()
}

func (e echoingKMS) Decrypt(context.Context, *kms.DecryptInput, ...func(*kms.Options)) (*kms.DecryptOutput, error) {
	return nil, e.err()
}

func (e echoingKMS) ReEncrypt(context.Context, *kms.ReEncryptInput, ...func(*kms.Options)) (*kms.ReEncryptOutput, error) {
	return nil, e.err()
}

// TestKMSErrorsHoldNoMessage: an AWS error's message never reaches the
// error text (awserr), while its code does and the error stays reachable.
func TestKMSErrorsHoldNoMessage(t *testing.T) {
	b := bind("grant-A", domain.FieldAccessToken)
	v := mustSeal(t, mustNew(t, newFakeKMS("k1"), "k1", Options{}), access, b)
	s := mustNew(t, echoingKMS{}, "k1", Options{})
	ctx := context.Background()
	_, sealErr := s.Seal(ctx, []byte(access), b)
	_, openErr := s.Open(ctx, v, b)
	_, rewrapErr := s.Rewrap(ctx, v, b, "k2")
	for name, err := range map[string]error{"seal": sealErr, "open": openErr, "rewrap": rewrapErr} {
		var api smithy.APIError
		if err == nil || strings.Contains(err.Error(), echoed) || !strings.Contains(err.Error(), "api error KMSInternalException") || !errors.As(err, &api) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
