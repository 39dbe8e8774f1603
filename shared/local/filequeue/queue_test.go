package filequeue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

func newQueue(t *testing.T, dir string) *Queue {
	t.Helper()
	q, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestConformance(t *testing.T) {
	storetest.RunQueue(t, func(t *testing.T) storetest.Queue { return newQueue(t, t.TempDir()) })
}

func ids(t *testing.T, q *Queue) []string {
	t.Helper()
	events, err := q.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

func TestDurableAcrossInstances(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "queue")
	q1 := newQueue(t, dir)
	for _, id := range []string{"c", "a", "b"} {
		if err := q1.Enqueue(ctx, storetest.SampleEvent(id)); err != nil {
			t.Fatal(err)
		}
	}
	q2 := newQueue(t, dir) // a restart
	if got := strings.Join(ids(t, q2), ","); got != "c,a,b" {
		t.Fatalf("after restart: %s", got)
	}
	if err := q2.Enqueue(ctx, storetest.SampleEvent("0")); err != nil {
		t.Fatal(err)
	}
	if err := q2.Enqueue(ctx, storetest.SampleEvent("a")); err != nil {
		t.Fatal(err)
	}
	if err := q2.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	q3 := newQueue(t, dir)
	if got := strings.Join(ids(t, q3), ","); got != "a,b,0" {
		t.Fatalf("after a second restart: %s", got)
	}
	events, _ := q3.List(ctx)
	want := storetest.SampleEvent("a")
	want.EnqueuedAt = events[0].EnqueuedAt
	if !reflect.DeepEqual(events[0], want) {
		t.Fatalf("event changed on disk:\n got %+v\nwant %+v", events[0], want)
	}
}

func TestSequenceSurvivesClockStep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q := newQueue(t, dir)
	if err := q.Enqueue(ctx, storetest.SampleEvent("first")); err != nil {
		t.Fatal(err)
	}
	// Pretend the stored event came from a clock an hour ahead.
	path := q.path("first")
	var r record
	data, _ := os.ReadFile(path)
	json.Unmarshal(data, &r)
	r.Seq += int64(time.Hour)
	data, _ = json.Marshal(r)
	os.WriteFile(path, data, 0o600)

	q2 := newQueue(t, dir)
	if err := q2.Enqueue(ctx, storetest.SampleEvent("second")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(t, q2), ","); got != "first,second" {
		t.Fatalf("order after a clock step: %s", got)
	}
}

func TestDedupAcrossInstancesConcurrently(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	queues := []*Queue{newQueue(t, dir), newQueue(t, dir)}
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range 20 {
		wg.Go(func() {
			e := storetest.SampleEvent("as-dup")
			e.Input = fmt.Sprint("racer-", i)
			errs[i] = queues[i%2].Enqueue(ctx, e)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := ids(t, queues[0]); len(got) != 1 {
		t.Fatalf("stored %d times", len(got))
	}
	if files := filesIn(t, dir); len(files) != 1 {
		t.Fatalf("files in the queue dir (temporary files left?): %v", files)
	}
}

// filesIn lists the files (not directories) in dir.
func filesIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}

func TestDeleteIsAnAckThatKeepsDeduplicating(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, t.TempDir())
	if err := q.Delete(ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("Delete of an unknown id: %v", err)
	}
	q.Enqueue(ctx, storetest.SampleEvent("x"))
	q.Enqueue(ctx, storetest.SampleEvent("y"))
	if err := q.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := q.Delete(ctx, "x"); err != nil {
		t.Fatalf("second ack: %v", err)
	}
	if got := strings.Join(ids(t, q), ","); got != "y" {
		t.Fatalf("after delete: %s", got)
	}
	// A redelivery of an acknowledged id does not resume the agent again.
	if err := q.Enqueue(ctx, storetest.SampleEvent("x")); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(t, q), ","); got != "y" {
		t.Fatalf("re-enqueue after ack: %s", got)
	}
	// Past the window the id is new again, and the sweep prunes the
	// tombstone.
	ageTombstone(t, q, "x", DedupWindow+time.Minute)
	q.Enqueue(ctx, storetest.SampleEvent("x"))
	if got := strings.Join(ids(t, q), ","); got != "y,x" {
		t.Fatalf("after the window: %s", got)
	}
	if err := q.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	ageTombstone(t, q, "x", DedupWindow+time.Minute)
	forceSweep(q)
	ids(t, q)
	if _, err := os.Stat(q.tombPath(fileName("x"))); !os.IsNotExist(err) {
		t.Fatal("expired tombstone not pruned")
	}
}

// ageTombstone makes id's tombstone look acknowledged age ago.
func ageTombstone(t *testing.T, q *Queue, id string, age time.Duration) {
	t.Helper()
	at := time.Now().Add(-age)
	if err := os.Chtimes(q.tombPath(fileName(id)), at, at); err != nil {
		t.Fatal(err)
	}
}

// forceSweep makes the next List sweep.
func forceSweep(q *Queue) {
	q.mu.Lock()
	q.lastSweep = time.Time{}
	q.mu.Unlock()
}

func TestFileModesAndNames(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "queue")
	q := newQueue(t, dir)
	if err := q.Enqueue(ctx, storetest.SampleEvent("../../etc/passwd")); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %o", fi.Mode().Perm())
	}
	files := filesIn(t, dir)
	if len(files) != 1 || strings.Contains(files[0], "passwd") || len(files[0]) != 64+len(".json") {
		t.Fatalf("files %v", files)
	}
	fi, _ = os.Stat(filepath.Join(dir, files[0]))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %o", fi.Mode().Perm())
	}
	if err := q.Delete(ctx, "../../etc/passwd"); err != nil {
		t.Fatal(err)
	}
	fi, _ = os.Stat(filepath.Join(dir, ackedDir))
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("tombstone dir mode %o", fi.Mode().Perm())
	}
	tombs := filesIn(t, filepath.Join(dir, ackedDir))
	if !slices.Equal(tombs, []string{ackLock, files[0]}) {
		t.Fatalf("tombstone dir %v", tombs)
	}
	fi, _ = os.Stat(filepath.Join(dir, ackedDir, files[0]))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("tombstone mode %o", fi.Mode().Perm())
	}
	if err := q.Enqueue(ctx, domain.Event{}); err == nil {
		t.Fatal("accepted an event without id")
	}
}

func TestCorruptFileDoesNotStallTheQueue(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	q := newQueue(t, dir)
	q.Enqueue(ctx, storetest.SampleEvent("good"))
	q.Enqueue(ctx, storetest.SampleEvent("bad"))
	os.WriteFile(q.path("bad"), []byte("{not json"), 0o600)
	os.WriteFile(filepath.Join(dir, fileName("elsewhere")), []byte(`{"seq":1,"id":"moved","event":{"id":"moved"}}`), 0o600)
	events, err := q.List(ctx)
	if !errors.Is(err, domain.ErrCorrupt) || len(events) != 1 || events[0].ID != "good" {
		t.Fatalf("events %d, err %v", len(events), err)
	}
	if _, err := New(dir); err != nil {
		t.Fatalf("New over a corrupt file: %v", err)
	}
	if err := q.Delete(ctx, "bad"); err != nil {
		t.Fatalf("ack of a corrupt event: %v", err)
	}
}

// TestWake: an Enqueue that stores a new event signals Wake — one pending
// signal at most, so an Enqueue with no one receiving never blocks — and a
// duplicate id signals nothing.
func TestWake(t *testing.T) {
	q, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	woken := func() bool {
		select {
		case <-q.Wake():
			return true
		default:
			return false
		}
	}
	for _, tc := range []struct {
		name string
		ack  string // acknowledged first
		ids  []string
		want bool
	}{
		{"nothing queued", "", nil, false},
		{"a new event", "", []string{"e1"}, true},
		{"a duplicate", "", []string{"e1"}, false},
		{"many new events: one signal, no Enqueue blocked", "", []string{"e2", "e3", "e4"}, true},
		{"the signal was taken", "", nil, false},
		{"an acknowledged id queued again (deduplicated)", "e2", []string{"e2"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.ack != "" {
				if err := q.Delete(ctx, tc.ack); err != nil {
					t.Fatal(err)
				}
			}
			for _, id := range tc.ids {
				if err := q.Enqueue(ctx, domain.Event{ID: id}); err != nil {
					t.Fatal(err)
				}
			}
			if got := woken(); got != tc.want {
				t.Fatalf("woken = %v, want %v", got, tc.want)
			}
		})
	}
}
