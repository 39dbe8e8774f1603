package aesseal

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/agentauth/agentauth/shared/local/atomicfile"
)

// EnvVar is the environment variable the caller reads the key list from.
const EnvVar = "GOONDAN_OAUTH_KEY"

const keyFormat = "want 32 bytes as base64 (standard or URL alphabet, padding optional) or as 64 hex digits"

// KeysDir is where file keys live under home.
func KeysDir(home string) string { return filepath.Join(home, "oauth", "keys") }

// MasterKeyPath is the current key file under home.
func MasterKeyPath(home string) string { return filepath.Join(KeysDir(home), "master.key") }

// RetiredDir holds older, still readable keys as <keyId>.key.
func RetiredDir(home string) string { return filepath.Join(KeysDir(home), "retired") }

// ParseKey decodes one key: base64 (standard or URL alphabet, padded or
// not) or hex, of exactly KeySize bytes. The error never echoes s.
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if len(s) == 2*KeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{
		base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding,
	} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == KeySize {
			return b, nil
		}
	}
	return nil, errors.New(keyFormat)
}

// ParseEnvKeys parses a GOONDAN_OAUTH_KEY value: comma-separated keys, the
// first current.
func ParseEnvKeys(envKey string) ([][]byte, error) {
	parts := strings.Split(envKey, ",")
	keys := make([][]byte, 0, len(parts))
	for i, p := range parts {
		if strings.TrimSpace(p) == "" {
			return nil, fmt.Errorf("aesseal: %s: key #%d of %d is empty; want comma-separated keys, current first", EnvVar, i+1, len(parts))
		}
		k, err := ParseKey(p)
		if err != nil {
			return nil, fmt.Errorf("aesseal: %s: key #%d of %d: %w", EnvVar, i+1, len(parts), err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// NewKeyString returns a fresh random key, base64 encoded, for an operator
// to prepend to GOONDAN_OAUTH_KEY.
func NewKeyString() (string, error) {
	k, err := newKey()
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(k), nil
}

func newKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("aesseal: new key: %w", err)
	}
	return k, nil
}

// Load builds the keyring from envKey (the value of GOONDAN_OAUTH_KEY, which
// wins when non-empty) or else from <home>/oauth/keys: master.key as the
// current key plus retired/<keyId>.key as readable older keys.
func Load(home, envKey string) (*Keyring, error) {
	if strings.TrimSpace(envKey) != "" {
		keys, err := ParseEnvKeys(envKey)
		if err != nil {
			return nil, err
		}
		return New(keys[0], keys[1:]...)
	}
	current, err := readKeyFile(MasterKeyPath(home))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("aesseal: %s does not exist: create it (first start) or set %s: %w",
				MasterKeyPath(home), EnvVar, err)
		}
		return nil, err
	}
	older, err := readRetired(home)
	if err != nil {
		return nil, err
	}
	return New(current, older...)
}

// Ensure is Load that creates master.key on first start: when neither
// envKey nor the key file is there and the store holds no records yet, it
// writes a new random key and reports created. It refuses to create a key
// when storeHasRecords, because those records were sealed with a key that
// is now missing and a new one would only hide that.
func Ensure(home, envKey string, storeHasRecords bool) (k *Keyring, created bool, err error) {
	if strings.TrimSpace(envKey) != "" {
		k, err := Load(home, envKey)
		return k, false, err
	}
	path := MasterKeyPath(home)
	if _, err := os.Lstat(path); err == nil {
		k, err := Load(home, "")
		return k, false, err
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("aesseal: %w", err)
	}
	if storeHasRecords {
		what := "records exist"
		if n := countSeedRecords(home); n > 0 {
			what = fmt.Sprintf("%d records exist", n)
		}
		return nil, false, fmt.Errorf("aesseal: %s is missing but %s: refusing to create a new key over existing grants; restore the key or set %s",
			path, what, EnvVar)
	}
	key, err := newKey()
	if err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(KeysDir(home), 0o700); err != nil {
		return nil, false, fmt.Errorf("aesseal: create key dir: %w", err)
	}
	err = atomicfile.CreateExclusive(path, encodeKeyFile(key), 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		// Another starter won the race; use its key.
		k, err := Load(home, "")
		return k, false, err
	case err != nil:
		return nil, false, err
	}
	k, err = Load(home, "")
	if err != nil {
		return nil, false, err
	}
	return k, true, nil
}

// Rotate makes a new random master.key and keeps the old one readable as
// retired/<oldID>.key. File keys only: with GOONDAN_OAUTH_KEY the operator
// prepends NewKeyString to the variable instead. There is never a moment
// without a readable current key: the old key is retired (durably) before
// master.key is atomically replaced. Records keep their old key id until
// they are resealed.
func Rotate(home string) (newID, oldID string, err error) {
	lock, err := atomicfile.LockFile(context.Background(), filepath.Join(KeysDir(home), ".rotate.lock"))
	if err != nil {
		return "", "", fmt.Errorf("aesseal: rotate: %w", err)
	}
	defer lock.Unlock()

	old, err := readKeyFile(MasterKeyPath(home))
	if err != nil {
		return "", "", fmt.Errorf("aesseal: rotate: %w", err)
	}
	oldID = KeyID(old)
	if err := os.MkdirAll(RetiredDir(home), 0o700); err != nil {
		return "", "", fmt.Errorf("aesseal: rotate: %w", err)
	}
	retired := filepath.Join(RetiredDir(home), oldID+".key")
	if err := atomicfile.Replace(retired, encodeKeyFile(old), 0o600); err != nil {
		return "", "", fmt.Errorf("aesseal: rotate: retire %s: %w", oldID, err)
	}
	key, err := newKey()
	if err != nil {
		return "", "", err
	}
	if err := atomicfile.Replace(MasterKeyPath(home), encodeKeyFile(key), 0o600); err != nil {
		return "", "", fmt.Errorf("aesseal: rotate: write new master.key: %w", err)
	}
	return KeyID(key), oldID, nil
}

func encodeKeyFile(key []byte) []byte {
	return []byte(base64.StdEncoding.EncodeToString(key) + "\n")
}

// readKeyFile reads a key file, refusing one that others can read.
func readKeyFile(path string) ([]byte, error) {
	f, err := atomicfile.Open(path) // never a link planted in the home
	if err != nil {
		return nil, fmt.Errorf("aesseal: read key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("aesseal: read key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("aesseal: key file %s is not a regular file", path)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("aesseal: key file %s has mode %04o, readable by group or others: run chmod 600 %s",
			path, fi.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, 257))
	if err != nil {
		return nil, fmt.Errorf("aesseal: read key: %w", err)
	}
	if len(data) > 256 {
		return nil, fmt.Errorf("aesseal: key file %s: too long; %s", path, keyFormat)
	}
	k, err := ParseKey(string(data))
	if err != nil {
		return nil, fmt.Errorf("aesseal: key file %s: %w", path, err)
	}
	return k, nil
}

func readRetired(home string) ([][]byte, error) {
	dir := RetiredDir(home)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("aesseal: read retired keys: %w", err)
	}
	var keys [][]byte
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".key") || strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		k, err := readKeyFile(path)
		if err != nil {
			return nil, err
		}
		if id := KeyID(k); id+".key" != name {
			return nil, fmt.Errorf("aesseal: retired key file %s holds key %s; the file must be named %s.key", path, id, id)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// countSeedRecords counts the record files of the seed's filesystem store
// under home, only to say how much a lost key would strand.
func countSeedRecords(home string) int {
	n := 0
	for _, sub := range []string{"grants", "sessions"} {
		entries, _ := os.ReadDir(filepath.Join(home, "oauth", sub))
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".enc.json") {
				n++
			}
		}
	}
	return n
}
