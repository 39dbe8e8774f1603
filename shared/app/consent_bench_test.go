package app

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/turn"
)

// BenchmarkConsentToResume: consent-to-resume latency on the local
// server's parts — from the callback's answer (auth.granted is in the
// file queue by then) to the resumed whoami call reaching its upstream —
// through serve's turn worker on the file queue: "poll" finds the event at
// its next scan (every 200 ms, serve's default), "wake" is woken by the
// queue as the callback queues it (serve's wiring). Each iteration is a
// new instance and subject, so each turn parks on a consent of its own;
// the user takes a random time to consent, uniform over one poll interval
// (the consent falls at a uniformly random point of the worker's poll
// cycle, as a person's would), and the turn's answer is awaited before
// the next. Reports p50 and p99 of the iterations; run with a count:
//
//	go test -run '^$' -bench ConsentToResume -benchtime 100x ./shared/app
func BenchmarkConsentToResume(b *testing.B) {
	for _, mode := range []struct {
		name string
		wake bool
	}{{"poll", false}, {"wake", true}} {
		b.Run(mode.name, func(b *testing.B) {
			r := newConsentRig(b)
			w := r.worker()
			if mode.wake {
				w.Wake = r.home.Queue.Wake()
			}
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan struct{})
			go func() { w.Run(ctx); close(stopped) }()
			defer func() { cancel(); <-stopped }()
			var lat []time.Duration
			for b.Loop() {
				n := len(lat) + 1
				r.post(b, fmt.Sprintf("bench-%d", n), n)
				authURL := receive(b, r.parked, "turn.parked")
				time.Sleep(rand.N(servePoll))
				r.consent(b, authURL)
				done := time.Now()
				lat = append(lat, receive(b, r.hits, "the resumed call").Sub(done))
				if t := receive(b, r.ended, "the turn's end"); t.Status != turn.TurnCompleted {
					b.Fatalf("turn %s: %s", t.ID, t.Status)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(msAt(lat, 50), "p50-ms")
			b.ReportMetric(msAt(lat, 99), "p99-ms")
		})
	}
}

// servePoll is the worker's default poll interval, which serve keeps.
const servePoll = 200 * time.Millisecond

// msAt is the p-th percentile of sorted (nearest rank), in milliseconds.
func msAt(sorted []time.Duration, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return float64(sorted[max(i, 0)].Microseconds()) / 1000
}
