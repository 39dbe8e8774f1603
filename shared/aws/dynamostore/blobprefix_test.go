package dynamostore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// fetchLog is a bucket that records the keys read from it.
type fetchLog struct {
	*memBlobs
	mu   sync.Mutex
	read []string
}

func (f *fetchLog) Get(ctx context.Context, key string) ([]byte, error) {
	f.mu.Lock()
	f.read = append(f.read, key)
	f.mu.Unlock()
	return f.memBlobs.Get(ctx, key)
}

func (f *fetchLog) fetched(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range f.read {
		if k == key {
			return true
		}
	}
	return false
}

// Issue 17 item 12: a turn item names its S3 object, and a reader took
// the name as it found it. An item that names an object outside its own
// instance incarnation's prefix (turns/<instance hash>/<epoch>/<sha256>)
// is corrupt, and the object is never read — from S3 or from the cache
// of objects this Store wrote — even when it exists and matches its hash.
func TestTurnBlobOutsideItsPrefixIsCorrupt(t *testing.T) {
	ctx := context.Background()
	// large commits an instance whose instance item and last message both
	// keep their docs in S3, and returns the Store that wrote them.
	large := func(t *testing.T, m *memTable, blobs Blobs, k turn.InstanceKey, letter string) turn.Store {
		t.Helper()
		s, _ := New(m, "agentauth-test")
		ts := s.Turns(blobs)
		if err := ts.Commit(ctx, turnstoretest.First(k)); err != nil {
			t.Fatal(err)
		}
		st, err := ts.Load(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		c := nextCommit(st, appendMessages(st, 1, strings.Repeat(letter, 2*BlobThreshold)))
		c.BacklogPush = []domain.Event{{ID: "ev-big", InstanceKey: k.Key, AgentName: k.Agent, Input: strings.Repeat(letter, 2*BlobThreshold)}}
		if err := ts.Commit(ctx, c); err != nil {
			t.Fatal(err)
		}
		return ts
	}
	// blobOf is the pk and blob key of k's item of kind.
	blobOf := func(t *testing.T, m *memTable, k turn.InstanceKey, kind string) (string, string) {
		t.Helper()
		m.mu.Lock()
		defer m.mu.Unlock()
		for pk, item := range m.items {
			b, ok := item[attrBlob].(*types.AttributeValueMemberS)
			if ok && item[attrKind].(*types.AttributeValueMemberS).Value == kind && strings.HasPrefix(b.Value, "turns/"+turnHash(k)+"/") {
				return pk, b.Value
			}
		}
		t.Fatalf("no %s item of %s names a blob", kind, k)
		return "", ""
	}
	for _, tc := range []struct {
		name string
		kind string
		// spoil returns the key the item of a gets instead of its own, and
		// may put an object there; epoch, when set, replaces the instance
		// item's epoch attribute.
		spoil func(blobs *memBlobs, own, others string) (key, epoch string)
	}{
		{"a message naming another instance's object", kindTurnMessage, func(_ *memBlobs, _, others string) (string, string) { return others, "" }},
		{"a message naming its own object under another epoch", kindTurnMessage, func(b *memBlobs, own, _ string) (string, string) {
			parts := strings.Split(own, "/")
			key := strings.Join([]string{parts[0], parts[1], "0123456789abcdef", parts[3]}, "/")
			b.objs[key] = b.objs[own]
			return key, ""
		}},
		{"a message naming a key below its prefix", kindTurnMessage, func(b *memBlobs, own, _ string) (string, string) {
			i := strings.LastIndexByte(own, '/')
			key := own[:i] + "/x" + own[i:]
			b.objs[key] = b.objs[own]
			return key, ""
		}},
		{"a message naming a key outside turns/", kindTurnMessage, func(b *memBlobs, own, _ string) (string, string) {
			key := own[strings.LastIndexByte(own, '/')+1:]
			b.objs[key] = b.objs[own]
			return key, ""
		}},
		{"a message naming its prefix alone", kindTurnMessage, func(_ *memBlobs, own, _ string) (string, string) {
			return own[:strings.LastIndexByte(own, '/')+1], ""
		}},
		{"an instance item naming another instance's object, its epoch too", kindTurnInstance, func(_ *memBlobs, _, others string) (string, string) {
			return others, strings.Split(others, "/")[2]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, blobs := newMemTable(), &fetchLog{memBlobs: newMemBlobs()}
			a := turnstoretest.Key(t)
			b := a
			b.Key += "-other"
			large(t, m, blobs, a, "a")
			warm := large(t, m, blobs, b, "b")
			pk, own := blobOf(t, m, a, tc.kind)
			_, others := blobOf(t, m, b, tc.kind)
			key, epoch := tc.spoil(blobs.memBlobs, own, others)
			m.mu.Lock()
			m.items[pk][attrBlob] = str(key)
			if epoch != "" {
				m.items[pk][attrEpoch] = str(epoch)
			}
			m.mu.Unlock()

			cold, _ := New(m, "agentauth-test")
			for name, ts := range map[string]turn.Store{"cold": cold.Turns(blobs), "warm (it wrote the other object)": warm} {
				if _, err := ts.Load(ctx, a); !errors.Is(err, domain.ErrCorrupt) {
					t.Fatalf("%s load: %v, want ErrCorrupt", name, err)
				}
			}
			if blobs.fetched(key) {
				t.Fatalf("the object outside the prefix was read: %s", key)
			}
			if tc.kind == kindTurnInstance {
				insts, unreadable, err := cold.Turns(blobs).List(ctx)
				if err != nil || len(insts) != 1 || insts[0].Key != b || len(unreadable) != 1 || unreadable[0].ID != turnHash(a)[:12] {
					t.Fatalf("list: %v %+v %+v, want %s listed and %s unreadable", err, insts, unreadable, b, a)
				}
			}
			// The other instance is untouched.
			if _, err := cold.Turns(blobs).Load(ctx, b); err != nil {
				t.Fatalf("load of the other instance: %v", err)
			}
		})
	}
}

func TestBlobUnder(t *testing.T) {
	const sum = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	under := blobPrefix("h1", "e1")
	for _, tc := range []struct {
		key, under string
		ok         bool
	}{
		{under + sum, under, true},
		{under + strings.ToUpper(sum), under, false},
		{under + sum[:63], under, false},
		{under + sum + "0", under, false},
		{under + "x/" + sum[2:], under, false},
		{blobPrefix("h2", "e1") + sum, under, false},
		{blobPrefix("h1", "e2") + sum, under, false},
		{sum, "", false},
		{"turns/h1/e1/" + sum, "", false},
	} {
		if got := blobUnder(tc.key, tc.under); got != tc.ok {
			t.Errorf("blobUnder(%q, %q) = %v, want %v", tc.key, tc.under, got, tc.ok)
		}
	}
}
