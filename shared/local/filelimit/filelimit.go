// Package filelimit is the per-(principal, tool) rate limit of the local
// server (toolhooks.Limiter): GCRA from shared/tools/ratelimit, with each
// key's TAT in a small file under one directory, read and replaced while
// holding an advisory lock, so every process using the directory (several
// `agentauth serve` on one home) shares the limit. Sweep removes the files
// of buckets that have refilled (the local server's sweep calls it every
// minute), as the DynamoDB items expire by TTL.
//
// It must never put a principal or a tool name in a file name or an error:
// files and errors are named by ratelimit.Key only. When the state cannot
// be read or written, Allow returns an error and ok=false, and the caller
// fails closed.
package filelimit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
)

// Limiter keeps each key's TAT in the file <key>.tat under one directory,
// read and replaced while holding the advisory lock <key>.lock.
type Limiter struct {
	dir    string
	limits ratelimit.Limits
	now    func() time.Time
	// stripes serialize this process's calls per key as well: where the
	// system has no file locks the advisory lock excludes nothing (see
	// atomicfile.Lock), and elsewhere it saves a lock wait.
	stripes [64]sync.Mutex
}

// New returns a limiter keeping its state under dir (created with mode
// 0700 if missing), with limits, reading the time from now (time.Now when
// nil).
func New(dir string, limits ratelimit.Limits, now func() time.Time) (*Limiter, error) {
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("filelimit: %w", err)
	}
	if dir == "" {
		return nil, errors.New("filelimit: empty state directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("filelimit: state directory: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &Limiter{dir: dir, limits: limits, now: now}, nil
}

// Allow implements toolhooks.Limiter.
func (f *Limiter) Allow(ctx context.Context, principal, tool string) (bool, time.Duration, error) {
	key, err := ratelimit.Key(principal, tool)
	if err != nil {
		return false, 0, err
	}
	g := f.limits.For(tool).GCRA()
	path := filepath.Join(f.dir, key+".tat")

	stripe := &f.stripes[int(key[0]%64)]
	stripe.Lock()
	defer stripe.Unlock()
	lock, err := atomicfile.LockFile(ctx, filepath.Join(f.dir, key+".lock"))
	if err != nil {
		return false, 0, fmt.Errorf("filelimit: lock key %.12s: %w", key, err)
	}
	defer lock.Unlock()

	tat, err := readTAT(path)
	if err != nil {
		return false, 0, fmt.Errorf("filelimit: read key %.12s: %w", key, err)
	}
	// The time is read under the lock, so TATs only move forward even when
	// processes' clocks are read a little apart.
	newTAT, ok, retry := g.Decide(tat, f.now().UnixMicro())
	if !ok {
		return false, retry, nil
	}
	if err := atomicfile.Replace(path, []byte(strconv.FormatInt(newTAT, 10)+"\n"), 0o600); err != nil {
		return false, 0, fmt.Errorf("filelimit: write key %.12s: %w", key, err)
	}
	return true, 0, nil
}

// readTAT returns the TAT stored at path, 0 when there is none.
func readTAT(path string) (int64, error) {
	b, err := atomicfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	tat, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || tat < 0 {
		return 0, errors.New("stored TAT is not a non-negative integer")
	}
	return tat, nil
}

// sweepSlack keeps a state file a little past the moment its bucket is
// full again, so a clock a little behind another process's never drops a
// TAT still in use.
const sweepSlack = time.Minute

// Sweep removes the state of every key whose bucket has refilled: a TAT at
// or before now − sweepSlack allows exactly what a missing file allows, so
// removing it changes no decision. Each key is removed under its lock, so
// a concurrent Allow either ran before (and its newer TAT is kept) or runs
// after, on a fresh file. Lock files without state are removed too. It
// returns how many keys it removed.
func (f *Limiter) Sweep(ctx context.Context) (int, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return 0, fmt.Errorf("filelimit: sweep: %w", err)
	}
	keys := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if k, ok := strings.CutSuffix(name, ".tat"); ok {
			keys[k] = true
		} else if k, ok := strings.CutSuffix(name, ".lock"); ok {
			keys[k] = true
		}
	}
	removed := 0
	for key := range keys {
		if ctx.Err() != nil {
			return removed, ctx.Err()
		}
		gone, err := f.sweepKey(ctx, key)
		if err != nil {
			return removed, err
		}
		if gone {
			removed++
		}
	}
	return removed, nil
}

func (f *Limiter) sweepKey(ctx context.Context, key string) (bool, error) {
	stripe := &f.stripes[int(key[0]%64)]
	stripe.Lock()
	defer stripe.Unlock()
	lock, err := atomicfile.LockFile(ctx, filepath.Join(f.dir, key+".lock"))
	if err != nil {
		return false, fmt.Errorf("filelimit: sweep: lock key %.12s: %w", key, err)
	}
	path := filepath.Join(f.dir, key+".tat")
	tat, err := readTAT(path)
	if err != nil {
		// Unreadable state is left for Allow to report (fail closed).
		lock.Unlock()
		return false, nil
	}
	if tat > f.now().Add(-sweepSlack).UnixMicro() {
		lock.Unlock()
		return false, nil
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		lock.Unlock()
		return false, fmt.Errorf("filelimit: sweep: remove key %.12s: %w", key, err)
	}
	return true, lock.RemoveAndUnlock()
}
