package ratelimit

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
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// File is the limiter of the local server: each key's TAT is a small file
// <sha256>.tat under one directory, read and replaced while holding the
// advisory lock <sha256>.lock, so every process using the directory shares
// the limit.
type File struct {
	dir    string
	limits Limits
	now    func() time.Time
	// stripes serialize this process's calls per key as well: where the
	// system has no file locks the advisory lock excludes nothing (see
	// atomicfile.Lock), and elsewhere it saves a lock wait.
	stripes [64]sync.Mutex
}

var _ toolhooks.Limiter = (*File)(nil)

// NewFile returns a limiter keeping its state under dir (created with mode
// 0700 if missing), with limits, reading the time from now (time.Now when
// nil).
func NewFile(dir string, limits Limits, now func() time.Time) (*File, error) {
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	if dir == "" {
		return nil, errors.New("ratelimit: empty state directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ratelimit: state directory: %w", err)
	}
	return &File{dir: dir, limits: limits, now: clock(now)}, nil
}

// Allow implements toolhooks.Limiter.
func (f *File) Allow(ctx context.Context, principal, tool string) (bool, time.Duration, error) {
	if err := checkKey(principal, tool); err != nil {
		return false, 0, err
	}
	g := f.limits.For(tool).gcra()
	key := keyHash(principal, tool)
	path := filepath.Join(f.dir, key+".tat")

	stripe := &f.stripes[int(key[0]%64)]
	stripe.Lock()
	defer stripe.Unlock()
	lock, err := atomicfile.LockFile(ctx, filepath.Join(f.dir, key+".lock"))
	if err != nil {
		return false, 0, fmt.Errorf("ratelimit: lock key %.12s: %w", key, err)
	}
	defer lock.Unlock()

	tat, err := readTAT(path)
	if err != nil {
		return false, 0, fmt.Errorf("ratelimit: read key %.12s: %w", key, err)
	}
	// The time is read under the lock, so TATs only move forward even when
	// processes' clocks are read a little apart.
	newTAT, ok, retry := g.decide(tat, f.now().UnixMicro())
	if !ok {
		return false, retry, nil
	}
	if err := atomicfile.Replace(path, []byte(strconv.FormatInt(newTAT, 10)+"\n"), 0o600); err != nil {
		return false, 0, fmt.Errorf("ratelimit: write key %.12s: %w", key, err)
	}
	return true, 0, nil
}

// readTAT returns the TAT stored at path, 0 when there is none.
func readTAT(path string) (int64, error) {
	b, err := os.ReadFile(path)
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
