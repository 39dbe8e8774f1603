package turnfile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
)

// longConversation is an instance after turns ended turns: each a user
// message of 200 bytes and an answer of 600, four turn events, folded
// into the base at the turn's end (what the engine leaves behind).
func longConversation(tb testing.TB, k turn.InstanceKey, turns int) turn.State {
	tb.Helper()
	st, err := turn.Apply(turn.NewState(), turnstoretest.First(k))
	if err != nil {
		tb.Fatal(err)
	}
	at := st.Instance.CreatedAt
	for i := range turns {
		id := fmt.Sprint("turn-", i)
		at = at.Add(time.Minute)
		end := at.Add(time.Second)
		tr := turn.Turn{ID: id, Instance: k, InputEventID: "ev-" + id, InputType: "user.input", Status: turn.TurnCompleted,
			TraceID: "trace-" + id, StartedAt: at, EndedAt: &end, Steps: 1, Final: strings.Repeat("a", 600), NextEvent: 4}
		var evs []turn.TurnEvent
		for j, typ := range []string{turn.EvTurnStarted, turn.EvStepStarted, turn.EvStepCompleted, turn.EvTurnCompleted} {
			evs = append(evs, turn.TurnEvent{TurnID: id, Seq: int64(j), Type: typ, At: at, Data: json.RawMessage(`{"steps":1,"toolCalls":0,"errors":0}`)})
		}
		seq := st.Instance.NextSeq
		msgs := []message.Event{
			{Seq: seq, Type: message.LLMMessage, Message: &message.Message{ID: fmt.Sprint("u", seq), Role: message.User,
				Content: []message.Part{{Type: message.Text, Text: strings.Repeat("q", 200)}}}},
			{Seq: seq + 1, Type: message.LLMMessage, Message: &message.Message{ID: fmt.Sprint("a", seq+1), Role: message.Assistant,
				Content: []message.Part{{Type: message.Text, Text: strings.Repeat("a", 600)}}}},
		}
		folded, _ := message.Fold(st.Base, append(st.Events, msgs...))
		inst := st.Instance
		inst.Version++
		inst.NextSeq += 2
		inst.ActiveTurn, inst.UpdatedAt = "", end
		c := turn.Commit{Expect: st.Instance.Version, Instance: inst, Turn: &tr, Events: evs, Rebase: true, NewBase: folded, Processed: tr.InputEventID}
		if st, err = turn.Apply(st, c); err != nil {
			tb.Fatal(err)
		}
	}
	return st
}

// writeInstances lays out n instances of st (their keys k-0 … k-(n-1)) in
// dir as the store leaves them after a turn's end: a snapshot, the key,
// no journal.
func writeInstances(tb testing.TB, dir string, st turn.State, n int) []turn.InstanceKey {
	tb.Helper()
	s, err := New(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var keys []turn.InstanceKey
	for i := range n {
		k := st.Instance.Key
		k.Key = fmt.Sprint("k-", i)
		st.Instance.Key = k
		keys = append(keys, k)
		d := s.instanceDir(k)
		kb, _ := json.Marshal(k)
		sb, _ := json.Marshal(st)
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatal(err)
		}
		for name, b := range map[string][]byte{keyFile: kb, snapshotFile: sb} {
			if err := os.WriteFile(filepath.Join(d, name), b, 0o600); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return keys
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestLiveHeapIsBounded: a store that has read 400 long instances (49 MB
// of snapshots) holds about its cache bound of them, not all (issue 16:
// 31.8 MB of a 45 MB live heap was this cache). Unbounded it held 65 MB.
func TestLiveHeapIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads 49 MB")
	}
	const n, limit = 400, 32 << 20 // twice the default bound
	dir := t.TempDir()
	keys := writeInstances(t, dir, longConversation(t, turn.InstanceKey{Swarm: "default", Key: "k", Agent: "assistant"}, 50), n)
	before := liveHeap()
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, err := s.Load(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	held := int64(liveHeap()) - int64(before)
	runtime.KeepAlive(s)
	t.Logf("%d instances read: %.1f MB of live heap held", n, float64(held)/1e6)
	if held > limit {
		t.Fatalf("the store holds %.1f MB of live heap after reading %d instances, want at most %.1f", float64(held)/1e6, n, float64(limit)/1e6)
	}
}

// BenchmarkHeapFor400Instances: the live heap a store holds once it has
// read 400 instances of 50 turns each (123 kB of snapshot each), with the
// default bound, with none, and unbounded as it was before the bound:
// go test -run '^$' -bench HeapFor400 -benchtime 3x ./shared/local/turnfile
func BenchmarkHeapFor400Instances(b *testing.B) {
	const n = 400
	st := longConversation(b, turn.InstanceKey{Swarm: "default", Key: "k", Agent: "assistant"}, 50)
	sb, _ := json.Marshal(st)
	dir := b.TempDir()
	keys := writeInstances(b, dir, st, n)
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"default bound", nil},
		{"no cache", []Option{CacheBytes(0)}},
		{"unbounded", []Option{CacheBytes(1 << 40)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var held float64
			for b.Loop() {
				before := liveHeap()
				s, err := New(dir, bc.opts...)
				if err != nil {
					b.Fatal(err)
				}
				for _, k := range keys {
					if _, err := s.Load(ctx, k); err != nil {
						b.Fatal(err)
					}
				}
				after := liveHeap()
				runtime.KeepAlive(s)
				held = float64(after) - float64(before)
			}
			b.ReportMetric(float64(len(sb))/1e3, "kB-snapshot/instance")
			b.ReportMetric(held/1e6, "MB-live-heap")
		})
	}
}
