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
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/local/bundlerepo"
	"github.com/agentauth/agentauth/shared/local/embedded"
)

// localConfig reads the environment with the local defaults (home
// ./.agentauth, bundle ./examples/bundle); each command's flags then
// override it.
func localConfig() (config.Config, error) { return config.FromEnv(os.Getenv, config.Local) }

// homeFlag binds --home to cfg.Home.
func homeFlag(fs *flag.FlagSet, cfg *config.Config) {
	fs.StringVar(&cfg.Home, "home", cfg.Home, "`DIR` the agentauth home: its state, keys and runtime token")
}

// openHome opens the home's embedded backends (see shared/local/embedded)
// as configured (app.OpenEmbedded).
func openHome(ctx context.Context, cfg config.Config, create bool) (*embedded.Backends, error) {
	return app.OpenEmbedded(ctx, cfg, create)
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// storedRuntimeToken returns AGENTAUTH_RUNTIME_TOKEN, else the token
// stored in <home>/runtime-token; fs.ErrNotExist when there is neither.
func storedRuntimeToken(cfg config.Config) (domain.Secret, error) {
	if !cfg.RuntimeToken.IsZero() {
		return cfg.RuntimeToken, nil
	}
	path := filepath.Join(cfg.Home, "runtime-token")
	b, err := os.ReadFile(path)
	if err != nil {
		return domain.Secret{}, fmt.Errorf("read runtime token: %w", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return domain.Secret{}, fmt.Errorf("%s is empty: delete it to generate a new token", path)
	}
	return domain.NewSecret(t), nil
}

// runtimeToken returns storedRuntimeToken, creating the home's token
// (0600) on first use.
func runtimeToken(cfg config.Config) (domain.Secret, bool, error) {
	if tok, err := storedRuntimeToken(cfg); !errors.Is(err, fs.ErrNotExist) {
		return tok, false, err
	}
	home := cfg.Home
	path := filepath.Join(home, "runtime-token")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return domain.Secret{}, false, err
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	tok := domain.RuntimeTokenPrefix + base64.RawURLEncoding.EncodeToString(raw)
	// Written whole before it appears, so a concurrent starter never reads
	// half a token.
	err := atomicfile.CreateExclusive(path, []byte(tok+"\n"), 0o600)
	if errors.Is(err, fs.ErrExist) {
		return runtimeToken(cfg) // another starter won the race
	}
	if err != nil {
		return domain.Secret{}, false, fmt.Errorf("create runtime token: %w", err)
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

// localBackends are the backends a local command builds on: the home's
// embedded ones and, when the bundle directory is a git repository, its
// changesets (the repository, records under the home).
func localBackends(ctx context.Context, cfg config.Config, h *embedded.Backends, log *slog.Logger) (*app.Backends, error) {
	be := app.FromEmbedded(h, cfg.LocalSecrets())
	repo, recs, err := bundlerepo.OpenLocal(ctx, cfg.BundleDir, h.Home, log)
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w", cfg.BundleDir, err)
	}
	if repo != nil {
		be.Changesets = &app.Changesets{Repo: repo, Records: recs, Describe: "git " + repo.Branch().Short()}
	}
	return be, nil
}
