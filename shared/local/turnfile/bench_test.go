package turnfile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// The console's instance list at 10,000 instances (make bench-console).
// The directory is seeded once, through Commit (each instance's first
// commit, one in ten then paused), into a directory under the system's
// temporary directory that later runs reuse (remove it to seed again):
// five swarms, three agents, created one every 86.4 s over 10 days.
const (
	benchInstances = 10_000
	benchSeedName  = "agentauth-bench-console-instances-v1"
)

var benchT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func benchCreated(i int) time.Time { return benchT0.Add(time.Duration(i) * 86400 * time.Millisecond) }

var (
	benchOnce sync.Once
	benchDir  string
	benchErr  error
)

func seededDir(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		benchDir = filepath.Join(os.TempDir(), benchSeedName)
		done := filepath.Join(benchDir, "seeded")
		if _, err := os.Stat(done); err == nil {
			return
		}
		os.RemoveAll(benchDir)
		s, err := New(benchDir)
		if err != nil {
			benchErr = err
			return
		}
		start := time.Now()
		ctx := context.Background()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < benchInstances; i += 8 {
					k := turn.InstanceKey{Swarm: fmt.Sprint("swarm-", i%5), Key: fmt.Sprint("thread-", i), Agent: fmt.Sprint("agent-", i%3)}
					c := turnstoretest.First(k)
					c.Instance.CreatedAt, c.Instance.UpdatedAt = benchCreated(i), benchCreated(i)
					err := s.Commit(ctx, c)
					if err == nil && i%10 == 4 {
						var st turn.State
						if st, err = s.Load(ctx, k); err == nil {
							in := st.Instance
							in.Version++
							in.Status = turn.Paused
							err = s.Commit(ctx, turn.Commit{Expect: st.Instance.Version, Instance: in})
						}
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		if benchErr = <-errs; benchErr == nil {
			benchErr = os.WriteFile(done, nil, 0o600)
		}
		fmt.Fprintf(os.Stderr, "seeded %d instances in %s into %s\n", benchInstances, time.Since(start).Round(time.Second), benchDir)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDir
}

// BenchmarkQueryInstances10k: one page (50) of the console's instance
// list. Warm: the Store's state cache holds the page's instances; Cold:
// it is dropped before every page (each instance's snapshot and journal
// read again).
func BenchmarkQueryInstances10k(b *testing.B) {
	s, err := New(seededDir(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	middle := domain.ListKey(benchCreated(benchInstances/2), "00000000000000000000000000000000")
	for _, bc := range []struct {
		name string
		q    turn.InstanceQuery
		cold bool
	}{
		{"FirstPage", turn.InstanceQuery{}, false},
		{"FirstPageCold", turn.InstanceQuery{}, true},
		{"LaterPage", turn.InstanceQuery{After: middle}, false},
		{"Swarm", turn.InstanceQuery{Swarm: "swarm-2"}, false},
		{"SwarmLaterPageCold", turn.InstanceQuery{Swarm: "swarm-2", After: middle}, true},
		{"Agent", turn.InstanceQuery{Agent: "agent-1"}, false},
		{"PausedCold", turn.InstanceQuery{Status: turn.Paused}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				if bc.cold {
					s.ReleaseCache()
				}
				p, err := s.QueryInstances(ctx, bc.q)
				if err != nil {
					b.Fatal(err)
				}
				n = len(p.Instances)
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/1e6, "ms/op")
			b.ReportMetric(float64(n), "instances/page")
		})
	}
}
