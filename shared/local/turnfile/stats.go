package turnfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/atomicfile"
	"github.com/agentauth/agentauth/shared/turn"
)

// Turn statistics (turn.TurnStats) live under <dir>/stats, one directory
// per UTC hour:
//
//	stats/<2006-01-02T15>/hour.json       the hour's figures and the marker of the last turn added
//	stats/<2006-01-02T15>/instance.lock   taken by every record of the hour (atomicfile.LockFile)
//	stats/<2006-01-02T15>/turns/<32 hex>  one empty marker per turn counted: 16 bytes of sha256(turn.StatsTurnKey), hex
//
// A record takes the hour's lock, so two processes on one home never both
// count a turn. Exactly once also across a crash: the hour file is
// replaced (with the turn's marker name in last) before the marker is
// created, and every record first creates the marker last names if it is
// missing, so a crash between the two writes neither loses the count nor
// lets a retry add it again. The first record of a new hour removes the
// hours older than turn.StatsRetention.
const (
	statsDir        = "stats"
	statsHourLayout = "2006-01-02T15"
	statsHourFile   = "hour.json"
	statsMarkers    = "turns"
)

var _ turn.TurnStats = (*Store)(nil)

// hourFile is an hour's figures as stored.
type hourFile struct {
	Completed     int     `json:"completed"`
	Failed        int     `json:"failed"`
	Parked        int     `json:"parked"`
	ParkedSeconds float64 `json:"parkedSeconds"`
	// Last is the marker of the turn added last: see the layout above.
	Last string `json:"last,omitempty"`
}

func (s *Store) statsHourDir(h time.Time) string {
	return filepath.Join(s.dir, statsDir, h.UTC().Format(statsHourLayout))
}

// statsMarker is the marker name of a turn: a hash, so no instance key
// reaches a path.
func statsMarker(t turn.Turn) string {
	sum := sha256.Sum256([]byte(turn.StatsTurnKey(t)))
	return hex.EncodeToString(sum[:16])
}

// statsExpired reports whether hour h is past retention now.
func statsExpired(h, now time.Time) bool { return !h.Add(turn.StatsRetention).After(now) }

// RecordTurnEnd implements turn.TurnStats.
func (s *Store) RecordTurnEnd(ctx context.Context, t turn.Turn, parkedSeconds float64) error {
	h, err := turn.StatsHour(t)
	if err != nil {
		return fmt.Errorf("turnfile: %w", err)
	}
	now := time.Now()
	if statsExpired(h, now) {
		return nil
	}
	dir := s.statsHourDir(h)
	if err := os.MkdirAll(filepath.Join(s.dir, statsDir), 0o700); err != nil {
		return fmt.Errorf("turnfile: record turn end: %w", err)
	}
	l, err := lock(ctx, dir, true)
	if err != nil {
		return fmt.Errorf("turnfile: record turn end in hour %s: %w", h.Format(statsHourLayout), err)
	}
	created, err := s.recordLocked(dir, t, parkedSeconds)
	l.Unlock()
	if err != nil {
		return fmt.Errorf("turnfile: record turn end in hour %s: %w", h.Format(statsHourLayout), err)
	}
	if created {
		s.sweepStats(ctx, now)
	}
	return nil
}

// recordLocked adds t to the hour in dir, whose lock the caller holds;
// created reports that the hour had no figures before.
func (s *Store) recordLocked(dir string, t turn.Turn, parkedSeconds float64) (created bool, err error) {
	markers := filepath.Join(dir, statsMarkers)
	if err := os.MkdirAll(markers, 0o700); err != nil {
		return false, err
	}
	hf, created, err := readHourFile(filepath.Join(dir, statsHourFile))
	if err != nil {
		return false, err
	}
	if hf.Last != "" {
		// The last record may have crashed after the hour file, before its
		// marker: create that marker now, so its retry stays a no-op.
		if err := ensureMarker(filepath.Join(markers, hf.Last)); err != nil {
			return false, err
		}
	}
	me := statsMarker(t)
	switch _, err := os.Lstat(filepath.Join(markers, me)); {
	case err == nil:
		return false, nil // counted already
	case !errors.Is(err, fs.ErrNotExist):
		return false, err
	}
	if turn.StatsCompleted(t) {
		hf.Completed++
	} else {
		hf.Failed++
	}
	if parkedSeconds > 0 && !math.IsInf(parkedSeconds, 0) { // NaN is not > 0
		hf.Parked++
		hf.ParkedSeconds += parkedSeconds
	}
	hf.Last = me
	data, err := json.Marshal(hf)
	if err != nil {
		return false, err
	}
	if err := s.replace(filepath.Join(dir, statsHourFile), data, 0o600); err != nil {
		return false, err
	}
	return created, ensureMarker(filepath.Join(markers, me))
}

// ensureMarker creates the empty marker file path unless it exists.
func ensureMarker(path string) error {
	err := atomicfile.CreateExclusive(path, nil, 0o600)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// readHourFile reads an hour's figures; absent is zero (created true).
func readHourFile(path string) (hourFile, bool, error) {
	var hf hourFile
	data, err := atomicfile.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return hf, true, nil
	}
	if err != nil {
		return hf, false, err
	}
	if err := json.Unmarshal(data, &hf); err != nil {
		return hf, false, fmt.Errorf("%s: %w", statsHourFile, domain.ErrCorrupt)
	}
	return hf, false, nil
}

// Hours implements turn.TurnStats: one file read per hour, no lock (an
// hour file is replaced whole).
func (s *Store) Hours(ctx context.Context, from, to time.Time) ([]turn.HourStats, error) {
	hs, err := turn.StatsHours(from, to)
	if err != nil {
		return nil, fmt.Errorf("turnfile: %w", err)
	}
	now := time.Now()
	out := make([]turn.HourStats, 0, len(hs))
	for _, h := range hs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st := turn.HourStats{Hour: h}
		if !statsExpired(h, now) {
			hf, _, err := readHourFile(filepath.Join(s.statsHourDir(h), statsHourFile))
			if err != nil {
				return nil, fmt.Errorf("turnfile: stats of hour %s: %w", h.Format(statsHourLayout), err)
			}
			st.Completed, st.Failed, st.Parked, st.ParkedSeconds = hf.Completed, hf.Failed, hf.Parked, hf.ParkedSeconds
		}
		out = append(out, st)
	}
	return out, nil
}

// sweepStats removes the hours past retention, each under its lock (a
// record never takes the lock of such an hour: it refuses it first). Best
// effort: what it cannot remove, the next new hour's sweep tries again.
func (s *Store) sweepStats(ctx context.Context, now time.Time) {
	root := filepath.Join(s.dir, statsDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		h, err := time.Parse(statsHourLayout, e.Name())
		if err != nil || !e.IsDir() || !statsExpired(h, now) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		l, err := lock(ctx, dir, false)
		if err != nil {
			continue
		}
		if os.RemoveAll(filepath.Join(dir, statsMarkers)) != nil || removeIfThere(filepath.Join(dir, statsHourFile)) != nil {
			l.Unlock()
			continue
		}
		_ = atomicfile.RemoveStaleTemps(dir, 0)
		if l.RemoveAndUnlock() == nil {
			_ = os.Remove(dir)
		}
	}
}

func removeIfThere(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
