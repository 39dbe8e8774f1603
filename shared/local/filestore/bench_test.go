package filestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// The console's grant lists at 100,000 grants (make bench-console).
//
// The home is seeded once, through PutGrant, into a directory under the
// system's temporary directory that later runs reuse (remove it to seed
// again): 100,000 grants created one every 86.4 s over 100 days, ten
// tenants, five apps, one grant in twenty revoked, one in a thousand of
// the app "rare".
const (
	benchGrants   = 100_000
	benchTenants  = 10
	benchApps     = 5
	benchSeedName = "agentauth-bench-console-grants-v1"
)

var benchT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func benchCreated(i int) time.Time { return benchT0.Add(time.Duration(i) * 86400 * time.Millisecond) }

var (
	benchOnce sync.Once
	benchHome string
	benchErr  error
)

// seededHome returns the benchmark home, seeding it the first time.
func seededHome(b *testing.B) string {
	b.Helper()
	benchOnce.Do(func() {
		benchHome = filepath.Join(os.TempDir(), benchSeedName)
		done := filepath.Join(benchHome, "seeded")
		if _, err := os.Stat(done); err == nil {
			return
		}
		os.RemoveAll(benchHome)
		s, err := New(benchHome)
		if err != nil {
			benchErr = err
			return
		}
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for w := range 8 {
			wg.Go(func() {
				for i := w; i < benchGrants; i += 8 {
					g := storetest.SampleGrant(domain.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "bench"}, fmt.Sprint("subject-", i)))
					g.CreatedAt = benchCreated(i)
					g.Subject = fmt.Sprint("subject-", i)
					g.Tenant = fmt.Sprint("tenant-", i%benchTenants)
					g.OAuthAppRef.Name = fmt.Sprint("app-", i%benchApps)
					if i%1000 == 7 {
						g.OAuthAppRef.Name = "rare"
					}
					g.Revoked = i%20 == 3
					if _, err := s.PutGrant(context.Background(), g, 0); err != nil {
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
		fmt.Fprintf(os.Stderr, "seeded %d grants in %s into %s\n", benchGrants, time.Since(start).Round(time.Second), benchHome)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchHome
}

// BenchmarkQueryGrants100k: one page (50) of the console's grant list.
// Warm: the Store's record cache holds the page's grants (a stat each);
// Cold: the caches are dropped before every page.
func BenchmarkQueryGrants100k(b *testing.B) {
	s, err := New(seededHome(b))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	middle := domain.ListKey(benchCreated(benchGrants/2), "grant-0000000000000000")
	for _, bc := range []struct {
		name string
		q    domain.GrantQuery
		cold bool
	}{
		{"FirstPage", domain.GrantQuery{AnyTenant: true}, false},
		{"FirstPageCold", domain.GrantQuery{AnyTenant: true}, true},
		{"LaterPage", domain.GrantQuery{AnyTenant: true, After: middle}, false},
		{"LaterPageCold", domain.GrantQuery{AnyTenant: true, After: middle}, true},
		{"Tenant", domain.GrantQuery{Tenant: "tenant-3"}, false},
		{"TenantLaterPage", domain.GrantQuery{Tenant: "tenant-3", After: middle}, false},
		{"TenantRevoked", domain.GrantQuery{Tenant: "tenant-3", Revoked: ptrTo(true)}, false},
		{"App", domain.GrantQuery{AnyTenant: true, App: "app-2"}, false},
		{"AppCold", domain.GrantQuery{AnyTenant: true, App: "app-2"}, true},
		{"TenantApp", domain.GrantQuery{Tenant: "tenant-3", App: "app-2"}, false},
		{"RareAppBound", domain.GrantQuery{AnyTenant: true, App: "rare"}, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				if bc.cold {
					s.ReleaseCaches()
				}
				p, err := s.QueryGrants(ctx, bc.q)
				if err != nil {
					b.Fatal(err)
				}
				n = len(p.Grants)
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/1e6, "ms/op")
			b.ReportMetric(float64(n), "grants/page")
		})
	}
	b.Run("CountGrants1000", func(b *testing.B) {
		for b.Loop() {
			if _, _, _, err := s.CountGrants(ctx, "", true, 1000); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed())/float64(b.N)/1e6, "ms/op")
	})
}
