// Package embedded opens agentauth's embedded backends in one home
// directory — the filesystem OAuthStore, the local AES keyring, the file
// event queue and the turn worker's dead letters — and refuses to run with a key that cannot open the stored
// records. The local server and the Lambda entry points use it.
//
// It never creates a key over existing records and never prints a key.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/local/filelimit"
	"github.com/agentauth/agentauth/shared/local/filequeue"
	"github.com/agentauth/agentauth/shared/local/filestore"
	"github.com/agentauth/agentauth/shared/local/queueworker"
	"github.com/agentauth/agentauth/shared/local/turnfile"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// Backends are the opened embedded backends of a home.
type Backends struct {
	Home    string
	Store   *filestore.Store
	Keyring *aesseal.Keyring
	Queue   *filequeue.Queue
	// Turns holds the agent instances (<home>/turns).
	Turns *turnfile.Store
	// WorkerDir is the turn worker's directory (<home>/worker: its dead
	// letters and instance locks), queueworker.Worker.Dir.
	WorkerDir string
	// DeadLetters lists the worker's dead letters and redrives them to
	// Queue.
	DeadLetters *queueworker.DeadLetters
}

// workerDir is the turn worker's directory inside the home.
const workerDir = "worker"

// ReleaseCaches drops what the stores keep in memory to answer warm reads
// (decoded grants and sessions, instance states); reads after it decode
// from the files again.
func (b *Backends) ReleaseCaches() {
	b.Store.ReleaseCaches()
	b.Turns.ReleaseCache()
}

// Option sets an optional setting of Open.
type Option func(*settings)

type settings struct {
	queue []filequeue.Option
}

// WithQueueDedupWindow opens the event queue with that dedup window
// (filequeue.WithDedupWindow); 0 keeps filequeue.DedupWindow.
func WithQueueDedupWindow(d time.Duration) Option {
	return func(s *settings) {
		if d != 0 {
			s.queue = append(s.queue, filequeue.WithDedupWindow(d))
		}
	}
}

// Open opens home. envKey is the value of GOONDAN_OAUTH_KEY ("" for the
// key file). create allows creating the master key on a fresh home. Every
// record must be sealed under a loaded key: a wrong or missing key is an
// error, never a new key over existing grants.
func Open(ctx context.Context, home, envKey string, create bool, opts ...Option) (*Backends, error) {
	var set settings
	for _, o := range opts {
		o(&set)
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("home %s: %w", home, err)
	}
	if err := CheckHome(home); err != nil {
		return nil, err
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
		kr, _, err = aesseal.Ensure(home, envKey, has)
	} else {
		kr, err = aesseal.Load(home, envKey)
	}
	if err != nil {
		return nil, err
	}
	if err := checkKeys(ctx, st, kr, envKey != ""); err != nil {
		return nil, err
	}
	q, err := filequeue.New(filepath.Join(home, "queue"), set.queue...)
	if err != nil {
		return nil, err
	}
	turns, err := turnfile.New(filepath.Join(home, "turns"))
	if err != nil {
		return nil, err
	}
	wdir := filepath.Join(home, workerDir)
	dls, err := queueworker.NewDeadLetters(wdir, q)
	if err != nil {
		return nil, err
	}
	return &Backends{Home: home, Store: st, Keyring: kr, Queue: q, Turns: turns, WorkerDir: wdir, DeadLetters: dls}, nil
}

// CheckHome refuses a home other local users could write in: a home writable
// by group or others or owned by another user, or a directory in it (its
// top level, and oauth's) that is such a directory or a symbolic link. Such
// a home would let them queue an event that runs as a turn, or plant a key
// or a grant. The home itself may be a link the user made; what is inside
// may not.
func CheckHome(home string) error {
	if err := atomicfile.CheckPrivateDir(home, true); err != nil {
		return fmt.Errorf("home: %w", err)
	}
	for _, dir := range []string{home, filepath.Join(home, "oauth")} {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("home: %w", err)
		}
		for _, e := range entries {
			if !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
				continue // files are opened without following links
			}
			if err := atomicfile.CheckPrivateDir(filepath.Join(dir, e.Name()), false); err != nil {
				return fmt.Errorf("home: %w", err)
			}
		}
	}
	return nil
}

// checkKeys refuses to start when a record is sealed under a key we do
// not hold.
func checkKeys(ctx context.Context, st *filestore.Store, kr *aesseal.Keyring, fromEnv bool) error {
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
	if fromEnv {
		src = aesseal.EnvVar
	}
	return fmt.Errorf("%d stored record(s) are sealed under key(s) %s, which %s does not hold (loaded: %s): refusing to start with the wrong key; restore the key or add it to %s",
		n, strings.Join(missing, ", "), src, strings.Join(kr.IDs(), ", "), aesseal.EnvVar)
}

// ToolLimiter is the tools' rate limiter for this home: a file per key
// under <home>/ratelimit, locked across every server sharing the home.
func (b *Backends) ToolLimiter(limits ratelimit.Limits) (toolhooks.Limiter, error) {
	return filelimit.New(filepath.Join(b.Home, "ratelimit"), limits, nil)
}
