package turnstoretest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
)

// RunQueries runs the conformance suite of turn.InstanceQuerier (the
// store newStore returns must implement it): filters by swarm, agent and
// status, most recently created first, paging with After with no
// duplicate or gap while instances are added, Limit bounds.
func RunQueries(t *testing.T, newStore func(t *testing.T) turn.Store) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, turn.Store, turn.InstanceQuerier)
	}{
		{"Filters", testQueryFilters},
		{"PagingWhileAdding", testQueryPagingWhileAdding},
		{"Limits", testQueryLimits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			q, ok := s.(turn.InstanceQuerier)
			if !ok {
				t.Fatalf("%T is not a turn.InstanceQuerier", s)
			}
			tc.fn(t, s, q)
		})
	}
}

// createAt creates instance k, created at at.
func createAt(t *testing.T, s turn.Store, k turn.InstanceKey, at time.Time) turn.Instance {
	t.Helper()
	c := First(k)
	c.Instance.CreatedAt, c.Instance.UpdatedAt = at, at
	must(t, s.Commit(context.Background(), c), "create "+k.String())
	return c.Instance
}

// allInstances pages through q to the end.
func allInstances(t *testing.T, s turn.InstanceQuerier, q turn.InstanceQuery) []turn.Instance {
	t.Helper()
	var out []turn.Instance
	limit, _ := domain.PageLimit(q.Limit)
	for pages := 0; ; pages++ {
		p, err := s.QueryInstances(context.Background(), q)
		must(t, err, "QueryInstances")
		if len(p.Instances) > limit || pages > 1000 || len(p.Unreadable) != 0 {
			t.Fatalf("page of %d (limit %d), page %d, unreadable %v", len(p.Instances), limit, pages, p.Unreadable)
		}
		out = append(out, p.Instances...)
		if p.Next == "" {
			return out
		}
		q.After = p.Next
	}
}

func keysOf(ins []turn.Instance) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.Key.String()
	}
	return out
}

func testQueryFilters(t *testing.T, s turn.Store, qs turn.InstanceQuerier) {
	ctx := context.Background()
	swarms, agents := []string{"support", "sales"}, []string{"planner", "writer", "critic"}
	run := fmt.Sprint(time.Now().UnixNano())
	var all []turn.Instance
	for i := range 12 {
		k := turn.InstanceKey{Swarm: swarms[i%2], Key: fmt.Sprintf("q-%s-%d", run, i), Agent: agents[i%3]}
		in := createAt(t, s, k, t0.Add(time.Duration(i)*time.Minute))
		if i%4 == 1 {
			st := load(t, s, k)
			c := next(st, nil)
			c.Instance.Status = turn.Paused
			must(t, s.Commit(ctx, c), "pause")
			in = c.Instance
		}
		all = append(all, in)
	}
	for _, q := range []turn.InstanceQuery{
		{}, {Swarm: "support"}, {Swarm: "sales", Agent: "writer"}, {Agent: "critic"}, {Status: turn.Paused},
		{Swarm: "support", Status: turn.Active}, {Swarm: "none"}, {Agent: "none"},
	} {
		for _, limit := range []int{0, 1, 5} {
			q.Limit = limit
			t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) {
				got := allInstances(t, qs, q)
				var want []string
				for i := len(all) - 1; i >= 0; i-- {
					in := all[i]
					if (q.Swarm == "" || in.Key.Swarm == q.Swarm) && (q.Agent == "" || in.Key.Agent == q.Agent) &&
						(q.Status == "" || in.Status == q.Status) {
						want = append(want, in.Key.String())
					}
				}
				if !slices.Equal(keysOf(got), want) {
					t.Fatalf("instances %v, want %v", keysOf(got), want)
				}
				for _, in := range got {
					if in != findInstance(all, in.Key) {
						t.Fatalf("instance %+v, want %+v", in, findInstance(all, in.Key))
					}
				}
			})
		}
	}
	// A deleted instance leaves the list.
	must(t, s.Delete(ctx, all[11].Key), "Delete")
	if got := allInstances(t, qs, turn.InstanceQuery{Swarm: all[11].Key.Swarm}); slices.Contains(keysOf(got), all[11].Key.String()) {
		t.Fatal("a deleted instance is listed")
	}
}

func findInstance(all []turn.Instance, k turn.InstanceKey) turn.Instance {
	for _, in := range all {
		if in.Key == k {
			return in
		}
	}
	return turn.Instance{}
}

func testQueryPagingWhileAdding(t *testing.T, s turn.Store, qs turn.InstanceQuerier) {
	run := fmt.Sprint(time.Now().UnixNano())
	var first []turn.InstanceKey
	for i := range 9 {
		k := turn.InstanceKey{Swarm: "paging", Key: fmt.Sprintf("p-%s-%d", run, i), Agent: "a"}
		createAt(t, s, k, t0.Add(time.Duration(i)*time.Minute))
		first = append(first, k)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	stopped := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopped() // also when a check below ends the test
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := turn.InstanceKey{Swarm: "paging", Key: fmt.Sprintf("late-%s-%d", run, i), Agent: "a"}
			at := t0.Add(time.Duration(100+i) * time.Minute)
			if i%2 == 1 {
				at = t0.Add(-time.Duration(i) * time.Minute)
			}
			c := First(k)
			c.Instance.CreatedAt = at
			if err := s.Commit(context.Background(), c); err != nil {
				t.Errorf("create while paging: %v", err)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	seen := map[turn.InstanceKey]int{}
	q := turn.InstanceQuery{Swarm: "paging", Limit: 2}
	for {
		p, err := qs.QueryInstances(context.Background(), q)
		must(t, err, "QueryInstances")
		for _, in := range p.Instances {
			seen[in.Key]++
		}
		if p.Next == "" {
			break
		}
		q.After = p.Next
	}
	stopped()
	for k, n := range seen {
		if n != 1 {
			t.Fatalf("instance %v listed %d times", k, n)
		}
	}
	for _, k := range first {
		if seen[k] != 1 {
			t.Fatalf("instance %v, there all along, was skipped", k)
		}
	}
}

func testQueryLimits(t *testing.T, s turn.Store, qs turn.InstanceQuerier) {
	ctx := context.Background()
	for _, q := range []turn.InstanceQuery{{Limit: -1}, {Limit: domain.MaxPageLimit + 1}, {After: "../x"}, {After: "0123.ab"}} {
		if _, err := qs.QueryInstances(ctx, q); !errors.Is(err, domain.ErrInvalidID) {
			t.Errorf("QueryInstances(%+v): %v, want ErrInvalidID", q, err)
		}
	}
	p, err := qs.QueryInstances(ctx, turn.InstanceQuery{Swarm: "empty"})
	must(t, err, "QueryInstances of an empty swarm")
	if len(p.Instances) != 0 || p.Next != "" {
		t.Fatalf("empty swarm: %+v", p)
	}
}
