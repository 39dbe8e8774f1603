package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
	"github.com/agentauth/agentauth/shared/turn/message"
)

// The turn store conformance suite on the in-memory table: the keys,
// conditions and item layout, without an emulator.
func TestTurnConformance(t *testing.T) {
	turnstoretest.Run(t, func(t *testing.T) turn.Store {
		s, err := New(newMemTable(), "agentauth-test")
		if err != nil {
			t.Fatal(err)
		}
		return s.Turns(nil)
	})
}

func turnStoreOn(t *testing.T, m *memTable) turn.Store {
	t.Helper()
	s, err := New(m, "agentauth-test")
	if err != nil {
		t.Fatal(err)
	}
	return s.Turns(nil)
}

// firstInstance commits the first turn of a new instance through s and
// loads it back.
func firstInstance(t *testing.T, s turn.Store) (turn.InstanceKey, turn.State) {
	t.Helper()
	ctx := context.Background()
	k := turnstoretest.Key(t)
	if err := s.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	return k, st
}

// nextCommit is a commit over st with what mut adds.
func nextCommit(st turn.State, mut func(*turn.Commit)) turn.Commit {
	inst := st.Instance
	inst.Version++
	c := turn.Commit{Expect: st.Instance.Version, Instance: inst}
	mut(&c)
	return c
}

func appendMessages(st turn.State, n int, text string) func(*turn.Commit) {
	return func(c *turn.Commit) {
		for range n {
			c.Messages = append(c.Messages, message.Event{Seq: c.Instance.NextSeq, Type: message.LLMMessage,
				Message: &message.Message{ID: fmt.Sprint("m", c.Instance.NextSeq), Role: message.Assistant, Content: []message.Part{{Type: message.Text, Text: text}}}})
			c.Instance.NextSeq++
		}
	}
}

// A commit that would not fit one transaction, or one item, is refused
// before any write.
func TestTurnCommitTooLarge(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		text string
	}{
		{"too many items", maxTurnTxItems, "x"},
		{"item too large", 1, strings.Repeat("x", maxTurnItemBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := newMemTable()
			s := turnStoreOn(t, m)
			_, st := firstInstance(t, s)
			before := len(m.items)
			err := s.Commit(ctx, nextCommit(st, appendMessages(st, tc.n, tc.text)))
			if !errors.Is(err, ErrTurnCommitTooLarge) {
				t.Fatalf("commit: %v, want ErrTurnCommitTooLarge", err)
			}
			if len(m.items) != before {
				t.Fatalf("a refused commit wrote: %d items, were %d", len(m.items), before)
			}
			if err := s.Commit(ctx, nextCommit(st, appendMessages(st, maxTurnTxItems-2, "x"))); err != nil {
				t.Fatalf("a commit that fits: %v", err)
			}
		})
	}
}

// Load reads by key (one GetItem, one BatchGetItem), a commit this Store
// can fence from what it saw is one TransactWriteItems, and a rebase
// deletes the old base and message items after its transaction.
func TestTurnCallsAndRebaseCleanup(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := turnStoreOn(t, m)
	k, st := firstInstance(t, s)
	var err error
	m.takeCalls()
	if err := s.Commit(ctx, nextCommit(st, appendMessages(st, 3, "x"))); err != nil {
		t.Fatal(err)
	}
	if got := m.takeCalls(); !maps.Equal(got, map[string]int{"TransactWriteItems": 1}) {
		t.Fatalf("commit calls %v", got)
	}
	if st, err = s.Load(ctx, k); err != nil {
		t.Fatal(err)
	}
	if got := m.takeCalls(); !maps.Equal(got, map[string]int{"GetItem": 1, "BatchGetItem": 1}) || len(st.Events) != 4 {
		t.Fatalf("load calls %v, %d events", got, len(st.Events))
	}
	msgs := func() int {
		n := 0
		for pk := range m.items {
			if strings.HasPrefix(pk, turnMsgPrefix) {
				n++
			}
		}
		return n
	}
	if n := msgs(); n != 4 {
		t.Fatalf("%d message items before the rebase", n)
	}
	folded, _ := message.Fold(st.Base, st.Events)
	if err := s.Commit(ctx, nextCommit(st, func(c *turn.Commit) { c.Rebase, c.NewBase = true, folded })); err != nil {
		t.Fatal(err)
	}
	if n := msgs(); n != 0 {
		t.Fatalf("%d message items after the rebase, want 0", n)
	}
	if st, err = s.Load(ctx, k); err != nil || len(st.Base) != 4 || len(st.Events) != 0 {
		t.Fatalf("after rebase: %v, base %d, events %d", err, len(st.Base), len(st.Events))
	}
}

// Two Stores on one table, as two Lambdas: what one remembers of an
// instance the other moved on is only a guess the condition refuses.
func TestTurnTwoStores(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	a, b := turnStoreOn(t, m), turnStoreOn(t, m)
	k := turnstoretest.Key(t)
	if err := a.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	st, err := b.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, nextCommit(st, appendMessages(st, 1, "b"))); err != nil {
		t.Fatal(err)
	}
	// a remembers version 1, which is no longer stored.
	if err := a.Commit(ctx, nextCommit(st, appendMessages(st, 1, "a"))); !errors.Is(err, turn.ErrStale) {
		t.Fatalf("a's commit over version 1: %v, want ErrStale", err)
	}
	if st, err = a.Load(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, nextCommit(st, appendMessages(st, 1, "a"))); err != nil {
		t.Fatalf("a's commit after reloading: %v", err)
	}
	if st, err = b.Load(ctx, k); err != nil || len(st.Events) != 3 || st.Events[1].Message.Content[0].Text != "b" || st.Events[2].Message.Content[0].Text != "a" {
		t.Fatalf("b loads %v, %+v", err, st.Events)
	}
}

// A transaction canceled because another holds the instance is a lost
// fence (the caller reloads); a throttled one is an error of its own.
func TestTurnCommitCanceled(t *testing.T) {
	for _, tc := range []struct {
		code  string
		stale bool
	}{
		{"ConditionalCheckFailed", true},
		{"TransactionConflict", true},
		{"ThrottlingError", false},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f := &fakeDynamo{
				get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return &dynamodb.GetItemOutput{}, nil },
				tx: func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					return nil, canceled(reason(tc.code, nil), reason("None", nil))
				},
			}
			s, err := New(f, "agentauth-test")
			if err != nil {
				t.Fatal(err)
			}
			err = s.Turns(nil).Commit(context.Background(), turnstoretest.First(turnstoretest.Key(t)))
			if errors.Is(err, turn.ErrStale) != tc.stale || err == nil {
				t.Fatalf("commit: %v, want stale %v", err, tc.stale)
			}
		})
	}
}

// afterDelete runs hook after each DeleteItem of an item whose key starts
// with prefix.
type afterDelete struct {
	*memTable
	prefix string
	hook   func()
}

func (a afterDelete) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	out, err := a.memTable.DeleteItem(ctx, in, o...)
	if strings.HasPrefix(pkOf(in.Key), a.prefix) && a.hook != nil {
		a.hook()
	}
	return out, err
}

// An instance created again while Delete is still removing the old one's
// items keeps its own: the old removal never reaches them.
func TestTurnDeleteRacingCreate(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	k := turnstoretest.Key(t)
	other := turnStoreOn(t, m)
	api := afterDelete{memTable: m, prefix: turnInstPrefix}
	api.hook = func() {
		if err := other.Commit(ctx, turnstoretest.First(k)); err != nil {
			t.Errorf("re-create: %v", err)
		}
	}
	s, err := New(api, "agentauth-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	if err := s.Turns(nil).Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	st, err := other.Load(ctx, k)
	if err != nil || len(st.Events) != 1 || len(st.TurnEvents["t1"]) != 1 {
		t.Fatalf("the new instance after the old one's removal: %v, %d events", err, len(st.Events))
	}
}

// What a Store saw of an instance since deleted and created again, at the
// same version, is not the instance: a commit over it is stale.
func TestTurnStaleIncarnation(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	a, b := turnStoreOn(t, m), turnStoreOn(t, m)
	k := turnstoretest.Key(t)
	if err := a.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	old, err := a.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	c := nextCommit(old, func(c *turn.Commit) {
		c.Calls = []turn.Call{{ID: "c1", TurnID: "t1", Tool: "whoami", State: turn.CallPlanned}}
	})
	if err := a.Commit(ctx, c); !errors.Is(err, turn.ErrStale) {
		t.Fatalf("commit over the old incarnation: %v, want ErrStale", err)
	}
	st, err := b.Load(ctx, k)
	if err != nil || len(st.Calls) != 0 || st.Instance.Version != 1 {
		t.Fatalf("the new incarnation after a stale commit: %v, %d calls, version %d", err, len(st.Calls), st.Instance.Version)
	}
	if st, err = a.Load(ctx, k); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(ctx, nextCommit(st, func(*turn.Commit) {})); err != nil {
		t.Fatalf("commit after reloading: %v", err)
	}
}

// Load reads more items than one BatchGetItem takes in requests of 100.
func TestTurnLoadManyItems(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := turnStoreOn(t, m)
	k := turnstoretest.Key(t)
	if err := s.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	st, err := s.Load(ctx, k)
	for range 5 {
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(ctx, nextCommit(st, appendMessages(st, 40, "x"))); err != nil {
			t.Fatal(err)
		}
		st, err = s.Load(ctx, k)
	}
	m.takeCalls()
	if st, err = s.Load(ctx, k); err != nil || len(st.Events) != 201 || st.Events[200].Seq != 200 {
		t.Fatalf("load: %v, %d events", err, len(st.Events))
	}
	if got := m.takeCalls(); got["BatchGetItem"] != 3 {
		t.Fatalf("load calls %v, want 3 BatchGetItem for 202 items", got)
	}
}

// Ended turns are items of their own: the instance item, rewritten by
// every commit, keeps only the live turns and the names of the rest; an
// instance written before that (ended turns inside the instance item)
// moves them out at its next commit.
func TestTurnEndedTurnsAreItems(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := turnStoreOn(t, m)
	k, st := firstInstance(t, s)
	// End t1 and start nothing: the instance item names it, holds no copy.
	tr := st.Turns["t1"]
	tr.Status = turn.TurnCompleted
	tr.Final = strings.Repeat("answer ", 200)
	if err := s.Commit(ctx, nextCommit(st, func(c *turn.Commit) { c.Turn = &tr })); err != nil {
		t.Fatal(err)
	}
	h := turnHash(k)
	var d instDoc
	m.mu.Lock()
	inst := m.items[turnInstPK(h)]
	m.mu.Unlock()
	if err := json.Unmarshal([]byte(inst[attrDoc].(*types.AttributeValueMemberS).Value), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Turns) != 0 || len(d.Ended) != 1 || d.Ended[0] != "t1" || strings.Contains(inst[attrDoc].(*types.AttributeValueMemberS).Value, "answer answer") {
		t.Fatalf("instance doc: %d live turns, ended %+v", len(d.Turns), d.Ended)
	}
	fresh, _ := New(m, "agentauth-test")
	got, err := fresh.Turns(nil).Load(ctx, k)
	if err != nil || got.Turns["t1"].Final != tr.Final || got.Turns["t1"].Status != turn.TurnCompleted {
		t.Fatalf("load: %v %+v", err, got.Turns["t1"])
	}

	// An instance item of the old layout: the ended turn inside it.
	legacy := d
	legacy.Turns, legacy.Ended = map[string]turn.Turn{"t1": got.Turns["t1"]}, nil
	doc, _ := json.Marshal(legacy)
	m.mu.Lock()
	item := maps.Clone(inst)
	item[attrDoc] = &types.AttributeValueMemberS{Value: string(doc)}
	m.items[turnInstPK(h)] = item
	delete(m.items, turnRecPK(itemsKey(h, d), "t1"))
	m.mu.Unlock()
	old, _ := New(m, "agentauth-test")
	ts := old.Turns(nil)
	st, err = ts.Load(ctx, k)
	if err != nil || st.Turns["t1"].Final != tr.Final {
		t.Fatalf("load of the old layout: %v", err)
	}
	if err := ts.Commit(ctx, nextCommit(st, appendMessages(st, 1, "next"))); err != nil {
		t.Fatal(err)
	}
	again, _ := New(m, "agentauth-test")
	if got, err := again.Turns(nil).Load(ctx, k); err != nil || got.Turns["t1"].Final != tr.Final {
		t.Fatalf("after the first commit on the old layout: %v", err)
	}
}
