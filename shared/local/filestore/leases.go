package filestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
)

// leaseRecord is a lease file. The key is kept for people reading the
// directory; the file name is a hash of it.
type leaseRecord struct {
	Key       string    `json:"key"`
	Owner     string    `json:"owner"`
	ExpiresAt time.Time `json:"expiresAt"`
}

func (s *Store) leasePath(name string) string {
	return filepath.Join(s.leasesDir, name+".json")
}

// readLease returns the lease on disk; ok is false when there is none. A
// lease file that does not decode counts as no lease: leases are short-lived
// coordination, and a stuck unreadable one would block refresh forever.
func (s *Store) readLease(name string) (leaseRecord, bool, error) {
	data, _, err := readFile(s.leasePath(name))
	if errors.Is(err, fs.ErrNotExist) {
		return leaseRecord{}, false, nil
	}
	if err != nil {
		return leaseRecord{}, false, err
	}
	var l leaseRecord
	if json.Unmarshal(data, &l) != nil {
		return leaseRecord{}, false, nil
	}
	return l, true, nil
}

// AcquireLease takes key for owner until now+ttl. The same owner may
// re-acquire to extend; another owner gets ErrConflict until expiry.
func (s *Store) AcquireLease(ctx context.Context, key, owner string, ttl time.Duration) error {
	if owner == "" {
		return fmt.Errorf("filestore: acquire lease: empty owner")
	}
	if ttl <= 0 {
		return fmt.Errorf("filestore: acquire lease: ttl %v must be positive", ttl)
	}
	name := leaseName(key)
	l, err := s.lock(ctx, "lease-"+name)
	if err != nil {
		return fmt.Errorf("filestore: acquire lease: %w", err)
	}
	defer l.release(false)
	cur, ok, err := s.readLease(name)
	if err != nil {
		return fmt.Errorf("filestore: acquire lease: %w", err)
	}
	now := time.Now()
	if ok && cur.Owner != owner && now.Before(cur.ExpiresAt) {
		return fmt.Errorf("filestore: acquire lease: held by another owner for %v more: %w",
			cur.ExpiresAt.Sub(now).Round(time.Millisecond), domain.ErrConflict)
	}
	data, err := json.Marshal(leaseRecord{Key: key, Owner: owner, ExpiresAt: now.Add(ttl).UTC()})
	if err != nil {
		return fmt.Errorf("filestore: acquire lease: %w", err)
	}
	if _, err := writeFileAtomic(s.leasePath(name), append(data, '\n')); err != nil {
		return fmt.Errorf("filestore: acquire lease: %w", err)
	}
	return nil
}

// ReleaseLease drops the lease if owner still holds it, and otherwise does
// nothing.
func (s *Store) ReleaseLease(ctx context.Context, key, owner string) error {
	name := leaseName(key)
	l, err := s.lock(ctx, "lease-"+name)
	if err != nil {
		return fmt.Errorf("filestore: release lease: %w", err)
	}
	cur, ok, err := s.readLease(name)
	if err != nil {
		l.release(false)
		return fmt.Errorf("filestore: release lease: %w", err)
	}
	if !ok || cur.Owner != owner {
		l.release(false)
		return nil
	}
	if err := os.Remove(s.leasePath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.release(false)
		return fmt.Errorf("filestore: release lease: %w", err)
	}
	l.release(true)
	return nil
}
