package filequeue

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// benchQueue is a queue with 10 queued events and n tombstones of the
// last hour (written directly: n acks would take minutes of fsyncs).
func benchQueue(b *testing.B, n int) *Queue {
	b.Helper()
	ctx := context.Background()
	q, err := New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10 {
		if err := q.Enqueue(ctx, storetest.SampleEvent(fmt.Sprint("queued-", i))); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		id := fmt.Sprint("acked-", i)
		at := time.Now().Add(-time.Duration(i) * time.Hour / time.Duration(n)).UTC()
		data, _ := json.Marshal(record{Seq: int64(i), ID: id, AckedAt: &at})
		path := q.tombPath(fileName(id))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
		os.Chtimes(path, at, at)
	}
	// Between sweep passes, as a queue is but for a minute an hour
	// (BenchmarkSweep is the pass).
	q.lastSweep = time.Now()
	return q
}

var tombstoneCounts = []int{0, 10_000, 50_000}

// BenchmarkList is a scan of 10 queued events beside 0, 10k and 50k
// tombstones: it must not grow with the tombstones.
//
//	go test -run '^$' -bench 'List|Enqueue|Sweep' -benchmem ./shared/local/filequeue
func BenchmarkList(b *testing.B) {
	for _, n := range tombstoneCounts {
		b.Run(fmt.Sprintf("tombstones=%d", n), func(b *testing.B) {
			q := benchQueue(b, n)
			ctx := context.Background()
			for b.Loop() {
				events, err := q.List(ctx)
				if err != nil || len(events) != 10 {
					b.Fatalf("%d events, err %v", len(events), err)
				}
			}
		})
	}
}

// BenchmarkEnqueueDuplicate is the redelivery of an acknowledged id: a
// stat of its tombstone, whatever the number of tombstones.
func BenchmarkEnqueueDuplicate(b *testing.B) {
	for _, n := range tombstoneCounts {
		b.Run(fmt.Sprintf("tombstones=%d", n), func(b *testing.B) {
			q := benchQueue(b, max(n, 1))
			ctx := context.Background()
			e := storetest.SampleEvent("acked-0")
			for b.Loop() {
				if err := q.Enqueue(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
			if len(q.wake) != 1 { // the 10 queued events' signal, no other
				b.Fatal("a duplicate was queued")
			}
		})
	}
}

// BenchmarkSweep is an hourly pass of the sweep finding nothing expired,
// which Lists take in steps of sweepStep tombstones.
func BenchmarkSweep(b *testing.B) {
	for _, n := range tombstoneCounts {
		b.Run(fmt.Sprintf("tombstones=%d", n), func(b *testing.B) {
			q := benchQueue(b, n)
			ctx := context.Background()
			for b.Loop() {
				if err := q.sweep(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
