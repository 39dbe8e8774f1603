package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/agentauth/agentauth/shared/aesseal"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/filequeue"
	"github.com/agentauth/agentauth/shared/filestore"
)

// envKeyName is the seed's environment variable for the master key.
const envKeyName = "GOONDAN_OAUTH_KEY"

func defaultHome() string {
	if h := os.Getenv("AGENTAUTH_HOME"); h != "" {
		return h
	}
	return ".agentauth"
}

func defaultBundle() string {
	if b := os.Getenv("AGENTAUTH_BUNDLE"); b != "" {
		return b
	}
	return filepath.Join("examples", "bundle")
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageError{fmt.Sprintf("%s: %v", fs.Name(), err)}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

// local is an opened agentauth home: store, keyring, queue.
type local struct {
	home    string
	store   *filestore.Store
	keyring *aesseal.Keyring
	queue   *filequeue.Queue
}

// openHome opens the home's store and keys. create allows creating the
// master key on a fresh home (serve); admin commands never create keys.
// Every record must be sealed under a loaded key: a wrong or missing key
// is a startup error, never a new key over existing grants.
func openHome(ctx context.Context, home string, create bool) (*local, error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("home %s: %w", home, err)
	}
	st, err := filestore.New(home)
	if err != nil {
		return nil, err
	}
	has, err := st.HasRecords()
	if err != nil {
		return nil, err
	}
	var kr *aesseal.Keyring
	if create {
		kr, _, err = aesseal.Ensure(home, os.Getenv(envKeyName), has)
	} else {
		kr, err = aesseal.Load(home, os.Getenv(envKeyName))
	}
	if err != nil {
		return nil, err
	}
	if err := checkKeys(ctx, st, kr); err != nil {
		return nil, err
	}
	q, err := filequeue.New(filepath.Join(home, "queue"))
	if err != nil {
		return nil, err
	}
	return &local{home: home, store: st, keyring: kr, queue: q}, nil
}

// checkKeys refuses to start when a record is sealed under a key we do
// not hold.
func checkKeys(ctx context.Context, st *filestore.Store, kr *aesseal.Keyring) error {
	used, err := st.KeyIDs(ctx)
	if err != nil {
		return fmt.Errorf("check record keys: %w", err)
	}
	var missing []string
	n := 0
	for id, recs := range used {
		if !kr.Has(id) {
			missing = append(missing, id)
			n += len(recs)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing)
	src := "the key file oauth/keys/master.key"
	if os.Getenv(envKeyName) != "" {
		src = envKeyName
	}
	return fmt.Errorf("%d stored record(s) are sealed under key(s) %s, which %s does not hold (loaded: %s): refusing to start with the wrong key; restore the key or add it to %s",
		n, strings.Join(missing, ", "), src, strings.Join(kr.IDs(), ", "), envKeyName)
}

func loadBundle(dir, home string) (*bundle.Bundle, error) {
	b, err := bundle.LoadDir(dir, bundle.Options{Secrets: bundle.DirSecrets{Dir: filepath.Join(home, "secrets")}})
	if err != nil {
		return nil, fmt.Errorf("bundle %s:\n%w", dir, err)
	}
	return b, nil
}

// runtimeToken returns AGENTAUTH_RUNTIME_TOKEN, else the token stored in
// <home>/runtime-token, creating it (0600) on first use.
func runtimeToken(home string) (domain.Secret, bool, error) {
	if t := os.Getenv("AGENTAUTH_RUNTIME_TOKEN"); t != "" {
		return domain.NewSecret(t), false, nil
	}
	path := filepath.Join(home, "runtime-token")
	if b, err := os.ReadFile(path); err == nil {
		t := strings.TrimSpace(string(b))
		if t == "" {
			return domain.Secret{}, false, fmt.Errorf("%s is empty: delete it to generate a new token", path)
		}
		return domain.NewSecret(t), false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return domain.Secret{}, false, fmt.Errorf("read runtime token: %w", err)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return domain.Secret{}, false, err
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	tok := "aat_" + base64.RawURLEncoding.EncodeToString(raw)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return runtimeToken(home) // another starter won the race
	}
	if err != nil {
		return domain.Secret{}, false, fmt.Errorf("create runtime token: %w", err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return domain.Secret{}, false, err
	}
	if err := f.Close(); err != nil {
		return domain.Secret{}, false, err
	}
	return domain.NewSecret(tok), true, nil
}

// lockHome takes <home>/agentauth.lock: servers share it (several may
// serve one home), key maintenance takes it alone, so a rotation never
// runs under a server that holds the old keyring in memory.
func lockHome(home string, exclusive bool) (func(), error) {
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(home, "agentauth.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is in use by a running agentauth serve (or another admin command): stop it first", home)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
