package filequeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// TestListNeverReadsTombstones: a scan reads the queued events only. Every
// file but the one queued event is made garbage after the ack; List and
// New still succeed, and the acknowledged id still deduplicates (a
// tombstone counts by its name and time, not its content).
func TestListNeverReadsTombstones(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q := newQueue(t, dir)
	for _, id := range []string{"acked", "queued"} {
		if err := q.Enqueue(ctx, storetest.SampleEvent(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Delete(ctx, "acked"); err != nil {
		t.Fatal(err)
	}
	queued := filepath.Join(dir, fileName("queued"))
	spoiled := 0
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || path == queued || filepath.Base(path) == ackLock {
			return err
		}
		spoiled++
		return os.WriteFile(path, []byte("{not json"), 0o600)
	})
	if spoiled != 1 {
		t.Fatalf("spoiled %d files, want the one tombstone", spoiled)
	}
	for _, q := range []*Queue{q, newQueue(t, dir)} { // as is, and reopened
		events, err := q.List(ctx)
		if err != nil || len(events) != 1 || events[0].ID != "queued" {
			t.Fatalf("List read a tombstone: %d events, err %v", len(events), err)
		}
		if err := q.Enqueue(ctx, storetest.SampleEvent("acked")); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(ids(t, q), ","); got != "queued" {
			t.Fatalf("an acknowledged id queued again: %s", got)
		}
	}
}

// TestDedupWithinTheWindow: an acknowledged id is not queued again within
// DedupWindow, by this Queue or one opened later on the directory, and is
// new again past it.
func TestDedupWithinTheWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		age    time.Duration // since the ack
		reopen bool
		dedup  bool
	}{
		{"just acknowledged", 0, false, true},
		{"just acknowledged, reopened", 0, true, true},
		{"23 h ago", 23 * time.Hour, false, true},
		{"23 h ago, reopened", 23 * time.Hour, true, true},
		{"past the window", DedupWindow + time.Minute, false, false},
		{"past the window, reopened", DedupWindow + time.Minute, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			q := newQueue(t, dir)
			if err := q.Enqueue(ctx, storetest.SampleEvent("x")); err != nil {
				t.Fatal(err)
			}
			if err := q.Delete(ctx, "x"); err != nil {
				t.Fatal(err)
			}
			if err := q.Delete(ctx, "x"); err != nil {
				t.Fatalf("second ack: %v", err)
			}
			if tc.age > 0 {
				ageTombstone(t, q, "x", tc.age)
			}
			if tc.reopen {
				q = newQueue(t, dir)
			}
			if err := q.Enqueue(ctx, storetest.SampleEvent("x")); err != nil {
				t.Fatal(err)
			}
			got := ids(t, q)
			if dedup := len(got) == 0; dedup != tc.dedup {
				t.Fatalf("queued after the ack: %v, want deduplicated %v", got, tc.dedup)
			}
		})
	}
}

// TestOldTombstonesMoved: tombstones an older version kept beside the
// events are moved out of the scanned directory when the queue is opened,
// keeping their ack time; expired ones are removed.
func TestOldTombstonesMoved(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	old := func(id string, age time.Duration) {
		at := time.Now().Add(-age).UTC()
		data, _ := json.Marshal(record{Seq: 1, ID: id, AckedAt: &at})
		if err := os.WriteFile(filepath.Join(dir, fileName(id)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old("recent", time.Hour)
	old("expired", DedupWindow+time.Minute)
	data, _ := json.Marshal(record{Seq: 2, ID: "queued", Event: new(storetest.SampleEvent("queued"))})
	os.WriteFile(filepath.Join(dir, fileName("queued")), data, 0o600)

	q := newQueue(t, dir)
	if got := filesIn(t, dir); !slices.Equal(got, []string{fileName("queued")}) {
		t.Fatalf("queue dir after open: %v", got)
	}
	fi, err := os.Stat(q.tombPath(fileName("recent")))
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(fi.ModTime()); d < time.Hour-time.Minute || d > time.Hour+time.Minute {
		t.Fatalf("moved tombstone acknowledged %v ago, want 1h", d)
	}
	if _, err := os.Stat(q.tombPath(fileName("expired"))); !os.IsNotExist(err) {
		t.Fatal("expired tombstone kept")
	}
	for _, id := range []string{"recent", "expired"} {
		if err := q.Enqueue(ctx, storetest.SampleEvent(id)); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(ids(t, q), ","); got != "queued,expired" {
		t.Fatalf("queued: %s", got)
	}
}

// TestInterruptedAck: an ack that wrote its tombstone but did not remove
// the event file (a crash between the two) is finished by the next scan,
// even one more than DedupWindow later; an event queued again after an
// expired tombstone is not taken for it.
func TestInterruptedAck(t *testing.T) {
	for _, tc := range []struct {
		name string
		// tombAge and fileAge: how long ago the tombstone and the event
		// file were written.
		tombAge, fileAge time.Duration
		listed           bool
	}{
		{"just now", 0, 0, false},
		{"a day and more ago", 30 * time.Hour, 30 * time.Hour, false},
		{"queued again past the window", 30 * time.Hour, time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			q := newQueue(t, dir)
			if err := q.Enqueue(ctx, storetest.SampleEvent("x")); err != nil {
				t.Fatal(err)
			}
			path := q.path("x")
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.Delete(ctx, "x"); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(path, data, 0o600) // as if the removal never happened
			now := time.Now()
			at := func(p string, age time.Duration) {
				ts := now.Add(-age)
				if err := os.Chtimes(p, ts, ts); err != nil {
					t.Fatal(err)
				}
			}
			at(q.tombPath(fileName("x")), tc.tombAge)
			at(path, tc.fileAge)

			got := ids(t, newQueue(t, dir))
			if listed := len(got) == 1; listed != tc.listed {
				t.Fatalf("listed %v, want %v", got, tc.listed)
			}
			if _, err := os.Stat(path); os.IsNotExist(err) == tc.listed {
				t.Fatalf("event file removed: %v, want %v", os.IsNotExist(err), !tc.listed)
			}
		})
	}
}

// TestRedeliveryRacingTheAck: redeliveries of an event running while it is
// acknowledged never leave it queued.
func TestRedeliveryRacingTheAck(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, t.TempDir())
	for i := range 100 {
		id := fmt.Sprint("race-", i)
		if err := q.Enqueue(ctx, storetest.SampleEvent(id)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := q.Enqueue(ctx, storetest.SampleEvent(id)); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Go(func() {
			if err := q.Delete(ctx, id); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		if got := ids(t, q); len(got) != 0 {
			t.Fatalf("round %d: %v queued after the ack", i, got)
		}
	}
}

// TestSweep: the sweep removes the tombstones past the window, and keeps
// the fresh ones and an expired one whose event file is there (scan
// settles that first).
func TestSweep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q := newQueue(t, dir)
	for _, id := range []string{"fresh", "expired", "interrupted"} {
		q.Enqueue(ctx, storetest.SampleEvent(id))
		data, _ := os.ReadFile(q.path(id))
		if err := q.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if id != "fresh" {
			ageTombstone(t, q, id, DedupWindow+time.Hour)
		}
		if id == "interrupted" {
			os.WriteFile(q.path(id), data, 0o600)
			past := time.Now().Add(-DedupWindow - 2*time.Hour)
			os.Chtimes(q.path(id), past, past)
		}
	}
	if err := q.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{ackLock, fileName("fresh"), fileName("interrupted")}
	slices.Sort(want)
	if got := filesIn(t, filepath.Join(dir, ackedDir)); !slices.Equal(got, want) {
		t.Fatalf("after the sweep: %v, want %v", got, want)
	}
	// The scan settles the interrupted ack; the next sweep takes its
	// tombstone.
	if got := ids(t, q); len(got) != 0 {
		t.Fatalf("queued %v", got)
	}
	if err := q.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	want = []string{ackLock, fileName("fresh")}
	slices.Sort(want)
	if got := filesIn(t, filepath.Join(dir, ackedDir)); !slices.Equal(got, want) {
		t.Fatalf("after the second sweep: %v, want %v", got, want)
	}
}

// TestSweepIsSpreadOverLists: one List removes at most sweepStep expired
// tombstones, and the Lists that follow finish the pass.
func TestSweepIsSpreadOverLists(t *testing.T) {
	dir := t.TempDir()
	q := newQueue(t, dir)
	const n = 2*sweepStep + 10
	past := time.Now().Add(-DedupWindow - time.Hour)
	for i := range n {
		path := q.tombPath(fileName(fmt.Sprint("old-", i)))
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, past, past)
	}
	acked := filepath.Join(dir, ackedDir)
	left := func() int { return len(filesIn(t, acked)) - 1 } // less the lock
	forceSweep(q)
	ids(t, q)
	if got := left(); got < n-sweepStep {
		t.Fatalf("one List removed %d tombstones, at most %d allowed", n-got, sweepStep)
	}
	for range n/sweepStep + 1 {
		ids(t, q) // the pass goes on, however recent its start
	}
	if got := left(); got != 0 {
		t.Fatalf("%d expired tombstones left after the pass", got)
	}
}

// TestShortDedupWindow: a queue opened WithDedupWindow keeps an
// acknowledged id deduplicating for that window only, and its sweep,
// which starts every quarter of the window, removes a tombstone past it —
// where the default window would still deduplicate and not sweep yet.
func TestShortDedupWindow(t *testing.T) {
	const window = 4 * time.Minute
	for _, tc := range []struct {
		name    string
		opts    []Option
		age     time.Duration // of the tombstone
		dedup   bool
		removed bool // by the List after a quarter of the window
	}{
		{"within the short window", []Option{WithDedupWindow(window)}, window - time.Minute, true, false},
		{"past the short window", []Option{WithDedupWindow(window)}, window + time.Minute, false, true},
		{"the default window", nil, window + time.Minute, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			q, err := New(dir, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"x", "y"} {
				if err := q.Enqueue(ctx, storetest.SampleEvent(id)); err != nil {
					t.Fatal(err)
				}
				if err := q.Delete(ctx, id); err != nil {
					t.Fatal(err)
				}
				ageTombstone(t, q, id, tc.age)
			}
			// The last pass started a quarter of the short window and a
			// second ago: due for the short window, not for the default.
			q.mu.Lock()
			q.lastSweep = time.Now().Add(-window/4 - time.Second)
			q.mu.Unlock()
			ids(t, q)
			_, err = os.Lstat(q.tombPath(fileName("y")))
			if removed := errors.Is(err, fs.ErrNotExist); removed != tc.removed {
				t.Fatalf("tombstone removed by the sweep: %v, want %v (window %s, age %s)", removed, tc.removed, q.DedupWindow(), tc.age)
			}
			if err := q.Enqueue(ctx, storetest.SampleEvent("x")); err != nil {
				t.Fatal(err)
			}
			if dedup := len(ids(t, q)) == 0; dedup != tc.dedup {
				t.Fatalf("deduplicated %v, want %v (window %s, age %s)", dedup, tc.dedup, q.DedupWindow(), tc.age)
			}
		})
	}
}

func TestDedupWindowOption(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Minute} {
		if _, err := New(t.TempDir(), WithDedupWindow(d)); err == nil || !strings.Contains(err.Error(), "dedup window") {
			t.Errorf("window %s: %v, want an error naming the dedup window", d, err)
		}
	}
	q := newQueue(t, t.TempDir())
	if q.DedupWindow() != DedupWindow || q.sweepEvery != time.Hour {
		t.Fatalf("default: window %s, sweep every %s", q.DedupWindow(), q.sweepEvery)
	}
	for d, every := range map[time.Duration]time.Duration{5 * time.Minute: 75 * time.Second, 4 * time.Hour: time.Hour, 48 * time.Hour: time.Hour} {
		if got := sweepPeriod(d); got != every {
			t.Errorf("sweepPeriod(%s) = %s, want %s", d, got, every)
		}
	}
}
