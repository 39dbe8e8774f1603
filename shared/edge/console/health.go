package console

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
)

// healthCheck is one backend as the overview shows it: whether a cheap
// read through its port answered, and how long it took.
type healthCheck struct {
	Name    string
	OK      bool
	Latency time.Duration
	Detail  string
}

// healthTimeout bounds each check: a backend that hangs shows as failing
// rather than holding the page.
const healthTimeout = 3 * time.Second

// probeGrant is a grant id no grant has (no OAuthApp is named so): its
// read answers not found from a healthy store.
var probeGrant = domain.GrantID(domain.ObjectRef{Kind: "OAuthApp", Name: "agentauth-console-health-probe"}, "probe")

// health reads each backend once, at the same time, through the ports
// the pages use: the grant store, the turn store, the dead letters and
// the bundle. A failure is logged with its error; the page says only
// that it failed.
func (c *Console) health(ctx context.Context) []healthCheck {
	type probe struct {
		name string
		run  func(context.Context) (string, error)
	}
	probes := []probe{{"grant and session store", func(ctx context.Context) (string, error) {
		_, err := c.cfg.Grants.GetGrant(ctx, probeGrant)
		if errors.Is(err, domain.ErrNotFound) {
			return "", nil
		}
		if err == nil {
			return "", errors.New("the probe grant exists")
		}
		return "", err
	}}}
	if c.cfg.Instances != nil {
		probes = append(probes, probe{"turn store", func(ctx context.Context) (string, error) {
			_, err := c.cfg.Instances.QueryInstances(ctx, turn.InstanceQuery{Limit: 1})
			return "", err
		}})
	}
	if c.cfg.DeadLetters != nil {
		probes = append(probes, probe{"event queue (dead letters)", func(ctx context.Context) (string, error) {
			_, n, err := c.cfg.DeadLetters.ListDeadLetters(ctx, 1)
			if err != nil || n == 0 {
				return "", err
			}
			return itoa(int64(n)) + " dead-lettered", nil
		}})
	}
	if c.cfg.Active != nil {
		probes = append(probes, probe{"bundle", func(ctx context.Context) (string, error) {
			b, err := c.cfg.Active(ctx)
			if err != nil {
				return "", err
			}
			return "revision " + shortRef(b.Revision), nil
		}})
	}
	out := make([]healthCheck, len(probes))
	var wg sync.WaitGroup
	for i, p := range probes {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, healthTimeout)
			defer cancel()
			began := time.Now()
			detail, err := p.run(pctx)
			out[i] = healthCheck{Name: p.name, OK: err == nil, Latency: time.Since(began), Detail: detail}
			if err != nil {
				c.cfg.Log.WarnContext(ctx, "console health check failed", "backend", p.name, "err", err)
				out[i].Detail = "failed: the server's log has the error"
				if errors.Is(err, context.DeadlineExceeded) {
					out[i].Detail = "no answer within " + healthTimeout.String()
				}
			}
		})
	}
	wg.Wait()
	return out
}
