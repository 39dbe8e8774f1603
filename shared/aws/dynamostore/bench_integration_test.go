//go:build integration

package dynamostore

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// The console's lists on the emulator (make bench-console). Each
// benchmark seeds a table of its own, deleted at its end: grants with
// BatchWriteItem of the items PutGrant writes (grantItem), instances
// through Commit. AGENTAUTH_BENCH_GRANTS and AGENTAUTH_BENCH_INSTANCES
// lower the counts (100,000 and 10,000) when the emulator is slow to
// seed. The figures are the emulator's: MiniStack is one Python process,
// and how it keeps a global secondary index is its own, so they say how
// many calls a page makes more than what DynamoDB takes to answer them.

func benchCount(b *testing.B, env string, def int) int {
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive count", env, v)
		}
		return n
	}
	return def
}

var benchT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func BenchmarkQueryGrants100k(b *testing.B) {
	n := benchCount(b, "AGENTAUTH_BENCH_GRANTS", 100_000)
	api := emulatortest.DynamoDB(b)
	s, err := New(api, emulatortest.DynamoTable(b, api, "agentauth-bench-console-", TableSchema, nil))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	created := func(i int) time.Time { return benchT0.Add(time.Duration(i) * 86400 * time.Millisecond) }
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			var batch []types.WriteRequest
			flush := func() error {
				req := map[string][]types.WriteRequest{s.table: batch}
				for len(req) > 0 {
					out, err := api.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: req})
					if err != nil {
						return err
					}
					req = out.UnprocessedItems
				}
				batch = batch[:0]
				return nil
			}
			for i := w; i < n; i += 8 {
				g := storetest.SampleGrant(domain.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "bench"}, fmt.Sprint("subject-", i)))
				g.CreatedAt, g.Subject, g.Version = created(i), fmt.Sprint("subject-", i), 1
				g.Tenant, g.OAuthAppRef.Name, g.Revoked = fmt.Sprint("tenant-", i%10), fmt.Sprint("app-", i%5), i%20 == 3
				item, err := grantItem(g)
				if err != nil {
					errs <- err
					return
				}
				batch = append(batch, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
				if len(batch) == 25 {
					if err := flush(); err != nil {
						errs <- err
						return
					}
				}
			}
			if len(batch) > 0 {
				if err := flush(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d grants in %s", n, time.Since(start).Round(time.Second))
	middle := domain.ListKey(created(n/2), "grant-0000000000000000")
	for _, bc := range []struct {
		name string
		q    domain.GrantQuery
	}{
		{"FirstPage", domain.GrantQuery{AnyTenant: true}},
		{"LaterPage", domain.GrantQuery{AnyTenant: true, After: middle}},
		{"Tenant", domain.GrantQuery{Tenant: "tenant-3"}},
		{"TenantLaterPage", domain.GrantQuery{Tenant: "tenant-3", After: middle}},
		{"App", domain.GrantQuery{AnyTenant: true, App: "app-2"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			got := 0
			for b.Loop() {
				p, err := s.QueryGrants(ctx, bc.q)
				if err != nil {
					b.Fatal(err)
				}
				got = len(p.Grants)
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/1e6, "ms/op")
			b.ReportMetric(float64(got), "grants/page")
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

func BenchmarkQueryInstances10k(b *testing.B) {
	n := benchCount(b, "AGENTAUTH_BENCH_INSTANCES", 10_000)
	api := emulatortest.DynamoDB(b)
	st, err := New(api, emulatortest.DynamoTable(b, api, "agentauth-bench-console-", TableSchema, nil))
	if err != nil {
		b.Fatal(err)
	}
	s := st.Turns(nil)
	ctx := context.Background()
	start := time.Now()
	created := func(i int) time.Time { return benchT0.Add(time.Duration(i) * 86400 * time.Millisecond) }
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				k := turn.InstanceKey{Swarm: fmt.Sprint("swarm-", i%5), Key: fmt.Sprint("thread-", i), Agent: fmt.Sprint("agent-", i%3)}
				c := turnstoretest.First(k)
				c.Instance.CreatedAt, c.Instance.UpdatedAt = created(i), created(i)
				if err := s.Commit(ctx, c); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d instances in %s", n, time.Since(start).Round(time.Second))
	q := s.(turn.InstanceQuerier)
	middle := domain.ListKey(created(n/2), "0")
	for _, bc := range []struct {
		name string
		q    turn.InstanceQuery
	}{
		{"FirstPage", turn.InstanceQuery{}},
		{"LaterPage", turn.InstanceQuery{After: middle}},
		{"Swarm", turn.InstanceQuery{Swarm: "swarm-2"}},
		{"Agent", turn.InstanceQuery{Agent: "agent-1"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			got := 0
			for b.Loop() {
				p, err := q.QueryInstances(ctx, bc.q)
				if err != nil {
					b.Fatal(err)
				}
				got = len(p.Instances)
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/1e6, "ms/op")
			b.ReportMetric(float64(got), "instances/page")
		})
	}
}

var _ = aws.String
