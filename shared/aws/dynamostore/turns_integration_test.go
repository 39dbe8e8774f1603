//go:build integration

package dynamostore

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// One engine step on the emulator is a Load and a Commit: the calls each
// makes (asserted) and their latency (logged, -v).
func TestTurnStepCallsEmulator(t *testing.T) {
	emulatortest.Config(t)
	ctx := context.Background()
	s0, api := newEmulatorStore(t, tableOpts{noTTL: true})
	calls := &countingAPI{DynamoAPI: api}
	s, err := New(calls, s0.Table())
	if err != nil {
		t.Fatal(err)
	}
	ts := s.Turns(nil)
	k := turnstoretest.Key(t)
	if err := ts.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	const steps = 40
	var loads, commits []time.Duration
	for i := range steps {
		calls.take()
		start := time.Now()
		st, err := ts.Load(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		loads = append(loads, time.Since(start))
		if got := calls.take(); !maps.Equal(got, map[string]int{"GetItem": 1, "BatchGetItem": 1}) {
			t.Fatalf("step %d: Load calls %v", i, got)
		}
		tr := st.Turns["t1"]
		tr.NextEvent++
		c := nextCommit(st, appendMessages(st, 1, "step"))
		c.Turn = &tr
		c.Events = []turn.TurnEvent{{TurnID: "t1", Seq: tr.NextEvent - 1, Type: turn.EvTurnStarted, At: time.Now(), Data: json.RawMessage(`{}`)}}
		start = time.Now()
		if err := ts.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
		commits = append(commits, time.Since(start))
		if got := calls.take(); !maps.Equal(got, map[string]int{"TransactWriteItems": 1}) {
			t.Fatalf("step %d: Commit calls %v", i, got)
		}
	}
	p50 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	t.Logf("%d steps (items read by Load grow to %d): Load p50 %v, Commit p50 %v", steps, 2*steps+2, p50(loads), p50(commits))
}
