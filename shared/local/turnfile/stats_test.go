package turnfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

func TestStatsConformance(t *testing.T) {
	turnstoretest.RunStats(t, func(t *testing.T) turnstoretest.StatsPair {
		dir := t.TempDir()
		a, err := New(dir)
		if err != nil {
			t.Fatal(err)
		}
		// A second Store on the same home: nothing shared in memory, its
		// own lock files, as another process.
		b, err := New(dir)
		if err != nil {
			t.Fatal(err)
		}
		return turnstoretest.StatsPair{A: a, B: b}
	})
}

const statsChildEnv = "TURNFILE_STATS_CHILD"

// TestStatsChildProcess records turns for TestStatsTwoProcesses.
func TestStatsChildProcess(t *testing.T) {
	spec := os.Getenv(statsChildEnv)
	if spec == "" {
		t.Skip("helper for TestStatsTwoProcesses")
	}
	var dir string
	var hour int64
	var n int
	if _, err := fmt.Sscanf(spec, "%d %d %s", &hour, &n, &dir); err != nil {
		t.Fatal(err)
	}
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := s.RecordTurnEnd(context.Background(), statsTurn(time.Unix(hour, 0), i), 2); err != nil {
			t.Fatal(err)
		}
	}
}

func statsTurn(h time.Time, i int) turn.Turn {
	k := turn.InstanceKey{Swarm: "s", Key: "k", Agent: "a"}
	return turnstoretest.EndedTurn(k, "t"+strconv.Itoa(i), turn.TurnCompleted, h.Add(time.Duration(i)*time.Second))
}

// TestStatsTwoProcesses: two processes record the same turns at once;
// each counts once.
func TestStatsTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	h := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	const n = 40
	var cmds []*exec.Cmd
	for range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestStatsChildProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d %d %s", statsChildEnv, h.Unix(), n, dir))
		cmd.Stderr, cmd.Stdout = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Hours(context.Background(), h, h.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if got[0].Completed != n || got[0].Parked != n || got[0].ParkedSeconds != 2*n {
		t.Errorf("hour = %+v, want %d completed, each parked 2 s", got[0], n)
	}
}

// TestStatsCrashBetweenWrites: a record that wrote the hour file and
// crashed before its marker is neither lost nor counted again, whether its
// retry or another turn's record comes first.
func TestStatsCrashBetweenWrites(t *testing.T) {
	h := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	for _, otherFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("otherFirst=%v", otherFirst), func(t *testing.T) {
			s, err := New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			crashed := statsTurn(h, 1)
			if err := s.RecordTurnEnd(ctx, crashed, 0); err != nil {
				t.Fatal(err)
			}
			// The crash: the marker never made it to disk.
			if err := os.Remove(filepath.Join(s.statsHourDir(h), statsMarkers, statsMarker(crashed))); err != nil {
				t.Fatal(err)
			}
			if otherFirst {
				if err := s.RecordTurnEnd(ctx, statsTurn(h, 2), 0); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.RecordTurnEnd(ctx, crashed, 0); err != nil {
				t.Fatal(err)
			}
			got, err := s.Hours(ctx, h, h.Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			want := 1
			if otherFirst {
				want = 2
			}
			if got[0].Completed != want {
				t.Errorf("completed = %d, want %d", got[0].Completed, want)
			}
		})
	}
}

// TestStatsSweep: the first record of a new hour removes hours past
// retention; others stay.
func TestStatsSweep(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Hour)
	old := now.Add(-turn.StatsRetention - time.Hour)
	kept := now.Add(-turn.StatsRetention + 2*time.Hour)
	// An old hour as an earlier run left it.
	oldDir := s.statsHourDir(old)
	if err := os.MkdirAll(filepath.Join(oldDir, statsMarkers), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{statsHourFile, lockFile, filepath.Join(statsMarkers, "0123456789abcdef0123456789abcdef")} {
		if err := os.WriteFile(filepath.Join(oldDir, f), []byte(`{"completed":3}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RecordTurnEnd(context.Background(), statsTurn(kept, 1), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(oldDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("old hour still there: %v", err)
	}
	got, err := s.Hours(context.Background(), kept, kept.Add(time.Hour))
	if err != nil || got[0].Completed != 1 {
		t.Errorf("kept hour = %+v, %v", got, err)
	}
}

// TestStatsCorruptHour: an hour file that does not parse is an error that
// names the hour, not its content.
func TestStatsCorruptHour(t *testing.T) {
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	h := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
	dir := s.statsHourDir(h)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, statsHourFile), []byte(turnstoretest.Canary), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = s.Hours(context.Background(), h, h.Add(time.Hour))
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v", err)
	}
	if msg := err.Error(); len(msg) == 0 || strings.Contains(msg, turnstoretest.Canary) {
		t.Errorf("error %q holds the content", msg)
	}
}
