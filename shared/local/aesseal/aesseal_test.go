package aesseal

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentauth/agentauth/shared/domain"
)

const plaintext = "xoxb-super-secret-token-value"

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func mustRing(t *testing.T, current []byte, older ...[]byte) *Keyring {
	t.Helper()
	k, err := New(current, older...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var grantAccess = domain.Binding{Record: "grant", RecordID: "grant-0123456789abcdef", Field: "accessToken"}

// noPlaintext fails when an error's text (as fmt prints it every way)
// contains the plaintext.
func noPlaintext(t *testing.T, err error, secrets ...string) {
	t.Helper()
	for _, s := range []string{fmt.Sprint(err), fmt.Sprintf("%v %+v %#v %q", err, err, err, err)} {
		for _, secret := range append(secrets, plaintext) {
			if strings.Contains(s, secret) {
				t.Fatalf("error text contains a secret: %s", s)
			}
		}
	}
}

func TestSealOpenRoundTrip(t *testing.T) {
	ctx := context.Background()
	k := mustRing(t, testKey(1))
	for _, pt := range []string{plaintext, "", strings.Repeat("x", 10000)} {
		v, err := k.Seal(ctx, []byte(pt), grantAccess)
		if err != nil {
			t.Fatal(err)
		}
		if v.Algorithm != "aes-256-gcm" || v.KeyID != k.CurrentID() || v.WrappedKey != "" {
			t.Fatalf("unexpected envelope %+v", v)
		}
		iv, _ := base64.StdEncoding.DecodeString(v.IV)
		tag, _ := base64.StdEncoding.DecodeString(v.Tag)
		ct, _ := base64.StdEncoding.DecodeString(v.Ciphertext)
		if len(iv) != 12 || len(tag) != 16 || len(ct) != len(pt) {
			t.Fatalf("iv %d tag %d ct %d bytes", len(iv), len(tag), len(ct))
		}
		if pt != "" && strings.Contains(v.Ciphertext+v.IV+v.Tag, pt) {
			t.Fatal("plaintext visible in sealed value")
		}
		got, err := k.Open(ctx, v, grantAccess)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != pt {
			t.Fatalf("round trip: got %d bytes, want %d", len(got), len(pt))
		}
	}
}

func TestSealUsesFreshIV(t *testing.T) {
	k := mustRing(t, testKey(1))
	a, _ := k.Seal(context.Background(), []byte(plaintext), grantAccess)
	b, _ := k.Seal(context.Background(), []byte(plaintext), grantAccess)
	if a.IV == b.IV || a.Ciphertext == b.Ciphertext {
		t.Fatal("two seals of the same value share an IV or ciphertext")
	}
}

func TestOpenRefusesOtherBinding(t *testing.T) {
	ctx := context.Background()
	k := mustRing(t, testKey(1))
	v, err := k.Seal(ctx, []byte(plaintext), grantAccess)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]domain.Binding{
		"other record id": {Record: "grant", RecordID: "grant-fedcba9876543210", Field: "accessToken"},
		"other field":     {Record: "grant", RecordID: grantAccess.RecordID, Field: "refreshToken"},
		"other kind":      {Record: "session", RecordID: grantAccess.RecordID, Field: "accessToken"},
		"empty":           {},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := k.Open(ctx, v, b)
			if err == nil {
				t.Fatal("opened under another binding")
			}
			if !errors.Is(err, domain.ErrCorrupt) {
				t.Fatalf("want ErrCorrupt, got %v", err)
			}
			noPlaintext(t, err)
		})
	}
}

func TestOpenRefusesTamper(t *testing.T) {
	ctx := context.Background()
	k := mustRing(t, testKey(1))
	v, err := k.Seal(ctx, []byte(plaintext), grantAccess)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string) string {
		b, _ := base64.StdEncoding.DecodeString(s)
		b[0] ^= 1
		return base64.StdEncoding.EncodeToString(b)
	}
	cases := map[string]func(domain.EncryptedValue) domain.EncryptedValue{
		"iv":             func(v domain.EncryptedValue) domain.EncryptedValue { v.IV = flip(v.IV); return v },
		"ciphertext":     func(v domain.EncryptedValue) domain.EncryptedValue { v.Ciphertext = flip(v.Ciphertext); return v },
		"tag":            func(v domain.EncryptedValue) domain.EncryptedValue { v.Tag = flip(v.Tag); return v },
		"truncated tag":  func(v domain.EncryptedValue) domain.EncryptedValue { v.Tag = v.Tag[:8]; return v },
		"bad base64":     func(v domain.EncryptedValue) domain.EncryptedValue { v.Ciphertext = "!!!" + v.Ciphertext; return v },
		"algorithm":      func(v domain.EncryptedValue) domain.EncryptedValue { v.Algorithm = "aes-128-cbc"; return v },
		"no algorithm":   func(v domain.EncryptedValue) domain.EncryptedValue { v.Algorithm = ""; return v },
		"wrapped key":    func(v domain.EncryptedValue) domain.EncryptedValue { v.WrappedKey = "AAAA"; return v },
		"swapped iv/tag": func(v domain.EncryptedValue) domain.EncryptedValue { v.IV, v.Tag = v.Tag, v.IV; return v },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := k.Open(ctx, mutate(v), grantAccess)
			if err == nil {
				t.Fatal("tampered value opened")
			}
			noPlaintext(t, err)
		})
	}
}

func TestOpenUnknownKeyID(t *testing.T) {
	ctx := context.Background()
	other := mustRing(t, testKey(2))
	v, err := other.Seal(ctx, []byte(plaintext), grantAccess)
	if err != nil {
		t.Fatal(err)
	}
	k := mustRing(t, testKey(1))
	_, err = k.Open(ctx, v, grantAccess)
	if !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("want ErrUnknownKey, got %v", err)
	}
	if !strings.Contains(err.Error(), v.KeyID) || !strings.Contains(err.Error(), k.CurrentID()) {
		t.Fatalf("error should name the missing key id and the ones held: %v", err)
	}
	noPlaintext(t, err, v.Ciphertext)

	// Without a key id every key is tried, and authentication still fails.
	v.KeyID = ""
	if _, err := k.Open(ctx, v, grantAccess); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("want ErrCorrupt, got %v", err)
	}
	if got, err := other.Open(ctx, v, grantAccess); err != nil || string(got) != plaintext {
		t.Fatalf("value without key id: %v", err)
	}
}

func TestKeyIDDerivation(t *testing.T) {
	key := testKey(7)
	sum := sha256.Sum256(append([]byte("agentauth/key-id/v1"), key...))
	want := "k-" + hex.EncodeToString(sum[:])[:12]
	if got := KeyID(key); got != want {
		t.Fatalf("KeyID = %s, want %s", got, want)
	}
	if KeyID(testKey(8)) == want {
		t.Fatal("two keys share an id")
	}
	k := mustRing(t, testKey(7), testKey(8), testKey(7))
	if ids := k.IDs(); len(ids) != 2 || ids[0] != want || ids[1] != KeyID(testKey(8)) {
		t.Fatalf("IDs = %v", ids)
	}
	if !k.Has(want) || k.Has("k-000000000000") {
		t.Fatal("Has")
	}
}

func TestNewRejectsWrongLength(t *testing.T) {
	if _, err := New(make([]byte, 16)); err == nil {
		t.Fatal("accepted a 16-byte key")
	}
	if _, err := New(testKey(1), make([]byte, 31)); err == nil {
		t.Fatal("accepted a 31-byte older key")
	}
}

func TestDerivedKeys(t *testing.T) {
	k := mustRing(t, testKey(1), testKey(2))
	d := k.DerivedKeys("state")
	if len(d) != 2 || len(d[0]) != 32 || bytes.Equal(d[0], d[1]) {
		t.Fatalf("derived keys %d", len(d))
	}
	if bytes.Equal(d[0], k.DerivedKeys("other")[0]) {
		t.Fatal("purpose does not separate derived keys")
	}
	// After a rotation the old derived key is still offered, second.
	rotated := mustRing(t, testKey(3), testKey(1), testKey(2))
	if !bytes.Equal(rotated.DerivedKeys("state")[1], d[0]) {
		t.Fatal("old derived key lost after rotation")
	}
}

func TestParseEnvKeys(t *testing.T) {
	key := testKey(0xfb) // 0xfb… encodes differently in std and URL base64
	cases := map[string]string{
		"std":        base64.StdEncoding.EncodeToString(key),
		"std raw":    base64.RawStdEncoding.EncodeToString(key),
		"url":        base64.URLEncoding.EncodeToString(key),
		"url raw":    base64.RawURLEncoding.EncodeToString(key),
		"hex":        hex.EncodeToString(key),
		"hex upper":  strings.ToUpper(hex.EncodeToString(key)),
		"whitespace": "  " + base64.StdEncoding.EncodeToString(key) + "\n",
	}
	for name, s := range cases {
		t.Run(name, func(t *testing.T) {
			keys, err := ParseEnvKeys(s)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 || !bytes.Equal(keys[0], key) {
				t.Fatal("wrong key")
			}
		})
	}

	two := hex.EncodeToString(testKey(1)) + "," + base64.StdEncoding.EncodeToString(testKey(2))
	k, err := Load(t.TempDir(), two)
	if err != nil {
		t.Fatal(err)
	}
	if k.CurrentID() != KeyID(testKey(1)) || len(k.IDs()) != 2 {
		t.Fatalf("env keyring %v", k.IDs())
	}

	bad := map[string]string{
		"short base64": base64.StdEncoding.EncodeToString(make([]byte, 16)),
		"long base64":  base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 48)),
		"short hex":    hex.EncodeToString(make([]byte, 31)),
		"not encoded":  "correct horse battery staple secret",
		"empty entry":  base64.StdEncoding.EncodeToString(key) + ",",
		"passphrase":   "hunter2-hunter2-hunter2-hunter2-hunter2-hunte",
	}
	for name, s := range bad {
		t.Run("bad "+name, func(t *testing.T) {
			_, err := Load(t.TempDir(), s)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), EnvVar) || !strings.Contains(err.Error(), "want") {
				t.Fatalf("error should say what is expected: %v", err)
			}
			for _, part := range strings.Split(s, ",") {
				if part != "" {
					noPlaintext(t, err, part)
				}
			}
		})
	}
}

func TestEnsureCreatesThenLoads(t *testing.T) {
	home := t.TempDir()
	k, created, err := Ensure(home, "", false)
	if err != nil || !created {
		t.Fatalf("Ensure: created=%v err=%v", created, err)
	}
	fi, err := os.Stat(MasterKeyPath(home))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("master.key mode %o", fi.Mode().Perm())
	}
	di, _ := os.Stat(KeysDir(home))
	if di.Mode().Perm() != 0o700 {
		t.Fatalf("keys dir mode %o", di.Mode().Perm())
	}
	data, _ := os.ReadFile(MasterKeyPath(home))
	if !bytes.HasSuffix(data, []byte("\n")) {
		t.Fatal("key file should end in a newline")
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(raw) != 32 || KeyID(raw) != k.CurrentID() {
		t.Fatal("key file content is not base64 of the current key")
	}

	k2, created, err := Ensure(home, "", true)
	if err != nil || created || k2.CurrentID() != k.CurrentID() {
		t.Fatalf("second Ensure: created=%v err=%v", created, err)
	}
	k3, err := Load(home, "")
	if err != nil || k3.CurrentID() != k.CurrentID() {
		t.Fatalf("Load: %v", err)
	}
}

func TestEnsureConcurrentStartersAgree(t *testing.T) {
	home := t.TempDir()
	const n = 10
	ids := make([]string, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var k *Keyring
			k, created[i], errs[i] = Ensure(home, "", false)
			if k != nil {
				ids[i] = k.CurrentID()
			}
		})
	}
	wg.Wait()
	nCreated := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("starters disagree on the key: %s vs %s", ids[i], ids[0])
		}
		if created[i] {
			nCreated++
		}
	}
	if nCreated != 1 {
		t.Fatalf("%d starters created the key, want 1", nCreated)
	}
}

func TestEnsureRefusesOverExistingRecords(t *testing.T) {
	home := t.TempDir()
	grants := filepath.Join(home, "oauth", "grants")
	if err := os.MkdirAll(grants, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"grant-0000000000000001", "grant-0000000000000002"} {
		os.WriteFile(filepath.Join(grants, id+".enc.json"), []byte("{}"), 0o600)
	}
	_, created, err := Ensure(home, "", true)
	if err == nil || created {
		t.Fatal("created a key over existing records")
	}
	for _, want := range []string{"master.key is missing", "2 records exist", "refusing", EnvVar} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q lacks %q", err, want)
		}
	}
	if _, err := os.Stat(MasterKeyPath(home)); !os.IsNotExist(err) {
		t.Fatal("master.key was written")
	}
	// An env key is fine whatever the store holds.
	if _, _, err := Ensure(home, hex.EncodeToString(testKey(1)), true); err != nil {
		t.Fatal(err)
	}
}

func TestLoadMissingKey(t *testing.T) {
	_, err := Load(t.TempDir(), "")
	if err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), EnvVar) {
		t.Fatalf("want a not-exist error mentioning %s, got %v", EnvVar, err)
	}
}

func TestKeyFileModeRefused(t *testing.T) {
	home := t.TempDir()
	if _, _, err := Ensure(home, "", false); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []os.FileMode{0o640, 0o604, 0o644, 0o666} {
		if err := os.Chmod(MasterKeyPath(home), mode); err != nil {
			t.Fatal(err)
		}
		_, err := Load(home, "")
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Fatalf("mode %o: want a chmod 600 error, got %v", mode, err)
		}
		key, _ := os.ReadFile(MasterKeyPath(home))
		noPlaintext(t, err, strings.TrimSpace(string(key)))
	}
	os.Chmod(MasterKeyPath(home), 0o400)
	if _, err := Load(home, ""); err != nil {
		t.Fatalf("mode 0400 should do: %v", err)
	}
}

func TestKeyFileBadContent(t *testing.T) {
	home := t.TempDir()
	os.MkdirAll(KeysDir(home), 0o700)
	os.WriteFile(MasterKeyPath(home), []byte("my-password\n"), 0o600)
	_, err := Load(home, "")
	if err == nil || !strings.Contains(err.Error(), "want 32 bytes") {
		t.Fatalf("got %v", err)
	}
	noPlaintext(t, err, "my-password")
}

func TestRotateKeepsOldKeysReadable(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	k1, _, err := Ensure(home, "", false)
	if err != nil {
		t.Fatal(err)
	}
	v1, _ := k1.Seal(ctx, []byte(plaintext), grantAccess)

	newID, oldID, err := Rotate(home)
	if err != nil {
		t.Fatal(err)
	}
	if oldID != k1.CurrentID() || newID == oldID {
		t.Fatalf("Rotate: new %s old %s", newID, oldID)
	}
	fi, err := os.Stat(filepath.Join(RetiredDir(home), oldID+".key"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("retired key: %v", err)
	}
	k2, err := Load(home, "")
	if err != nil {
		t.Fatal(err)
	}
	if k2.CurrentID() != newID || !k2.Has(oldID) {
		t.Fatalf("after rotate: %v", k2.IDs())
	}
	if got, err := k2.Open(ctx, v1, grantAccess); err != nil || string(got) != plaintext {
		t.Fatalf("old value after rotation: %v", err)
	}
	v2, _ := k2.Seal(ctx, []byte(plaintext), grantAccess)
	if v2.KeyID != newID {
		t.Fatal("seal after rotation does not use the new key")
	}

	// A second rotation keeps both older keys.
	newer, _, err := Rotate(home)
	if err != nil {
		t.Fatal(err)
	}
	k3, err := Load(home, "")
	if err != nil {
		t.Fatal(err)
	}
	if k3.CurrentID() != newer || len(k3.IDs()) != 3 {
		t.Fatalf("after two rotations: %v", k3.IDs())
	}
	for _, v := range []domain.EncryptedValue{v1, v2} {
		if _, err := k3.Open(ctx, v, grantAccess); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRetiredKeyMustMatchItsName(t *testing.T) {
	home := t.TempDir()
	if _, _, err := Ensure(home, "", false); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(RetiredDir(home), 0o700)
	wrongName := filepath.Join(RetiredDir(home), KeyID(testKey(1))+".key")
	os.WriteFile(wrongName, encodeKeyFile(testKey(2)), 0o600)
	if _, err := Load(home, ""); err == nil || !strings.Contains(err.Error(), KeyID(testKey(2))) {
		t.Fatalf("want a name mismatch error, got %v", err)
	}
}

func TestNewKeyString(t *testing.T) {
	a, err := NewKeyString()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewKeyString()
	if a == b {
		t.Fatal("two new keys are equal")
	}
	k, err := Load(t.TempDir(), a+","+b)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.IDs()) != 2 {
		t.Fatal("new key strings do not parse as env keys")
	}
}

// BenchmarkOpen is the sealer's share of a warm token read.
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	k, _ := New(testKey(1), testKey(2))
	v, _ := k.Seal(ctx, []byte(plaintext), grantAccess)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Open(ctx, v, grantAccess); err != nil {
			b.Fatal(err)
		}
	}
}
