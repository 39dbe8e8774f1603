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

// memBlobs is a hand-written bucket: objects by key, and the calls made.
type memBlobs struct {
	mu           sync.Mutex
	objs         map[string][]byte
	puts, gets   int
	deletedUnder []string
}

func newMemBlobs() *memBlobs { return &memBlobs{objs: map[string][]byte{}} }

func (b *memBlobs) Put(_ context.Context, key string, data []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.puts++
	b.objs[key] = append([]byte(nil), data...)
	return nil
}

func (b *memBlobs) Get(_ context.Context, key string) ([]byte, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gets++
	v, ok := b.objs[key]
	if !ok {
		return nil, domain.ErrNotFound
	}
	return append([]byte(nil), v...), nil
}

func (b *memBlobs) DeletePrefix(_ context.Context, prefix string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.deletedUnder = append(b.deletedUnder, prefix)
	for k := range b.objs {
		if strings.HasPrefix(k, prefix) {
			delete(b.objs, k)
		}
	}
	return nil
}

// The conformance suite with a bucket: nothing in it is large, so nothing
// goes to S3, and every rule holds the same.
func TestTurnConformanceWithBlobs(t *testing.T) {
	turnstoretest.Run(t, func(t *testing.T) turn.Store {
		s, err := New(newMemTable(), "agentauth-test")
		if err != nil {
			t.Fatal(err)
		}
		return s.Turns(newMemBlobs())
	})
}

// bigText is a message over BlobThreshold (and over the item bound).
var bigText = strings.Repeat("tool output ", maxTurnItemBytes/10)

func TestTurnLargeItemsGoToS3(t *testing.T) {
	ctx := context.Background()
	m, blobs := newMemTable(), newMemBlobs()
	s1, err := New(m, "agentauth-test")
	if err != nil {
		t.Fatal(err)
	}
	ts := s1.Turns(blobs)
	k := turnstoretest.Key(t)
	if err := ts.Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	st, err := ts.Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	// A 360 KB message and a backlog that makes the instance item itself
	// large: both kept in S3, neither in the table.
	c := nextCommit(st, appendMessages(st, 1, bigText))
	c.BacklogPush = []domain.Event{{ID: "ev-big", InstanceKey: k.Key, AgentName: k.Agent, Input: strings.Repeat("q", 2*BlobThreshold)}}
	if err := ts.Commit(ctx, c); err != nil {
		t.Fatalf("a commit with a large message: %v", err)
	}
	m.mu.Lock()
	var inS3 []string
	for pk, item := range m.items {
		if doc, ok := item[attrDoc].(*types.AttributeValueMemberS); ok && len(doc.Value) > BlobThreshold {
			t.Errorf("item %s keeps a %d-byte doc in the table", pk, len(doc.Value))
		}
		if b, ok := item[attrBlob].(*types.AttributeValueMemberS); ok {
			inS3 = append(inS3, pk)
			if !strings.HasPrefix(b.Value, "turns/"+turnHash(k)+"/") {
				t.Errorf("item %s names blob %s, outside its instance's prefix", pk, b.Value)
			}
		}
	}
	m.mu.Unlock()
	if len(inS3) != 2 || len(blobs.objs) != 2 {
		t.Fatalf("items naming a blob: %v; objects %d; want the message and the instance item", inS3, len(blobs.objs))
	}
	// Another Store (a cold Lambda environment) reads them back from S3.
	s2, _ := New(m, "agentauth-test")
	got, err := s2.Turns(blobs).Load(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	last := got.Events[len(got.Events)-1]
	if last.Message == nil || last.Message.Content[0].Text != bigText || len(got.Backlog) != 1 || len(got.Backlog[0].Input) != 2*BlobThreshold {
		t.Fatal("what S3 gave back is not what was committed")
	}
	if blobs.gets != 2 {
		t.Fatalf("%d S3 reads for a cold load, want 2", blobs.gets)
	}
	// The warm Store reads nothing from S3: objects are content-addressed.
	if _, err := ts.Load(ctx, k); err != nil || blobs.gets != 2 {
		t.Fatalf("warm load: %v, %d S3 reads", err, blobs.gets)
	}
	// Delete removes the instance's objects.
	if err := ts.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if len(blobs.objs) != 0 || len(blobs.deletedUnder) != 1 {
		t.Fatalf("after Delete: %d objects left, prefixes deleted %v", len(blobs.objs), blobs.deletedUnder)
	}
}

func TestTurnBlobCorruptionIsDetected(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(b *memBlobs, key string)
	}{
		{"missing object", func(b *memBlobs, key string) { delete(b.objs, key) }},
		{"changed object", func(b *memBlobs, key string) { b.objs[key] = []byte(`{"seq":1}`) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, blobs := newMemTable(), newMemBlobs()
			s1, _ := New(m, "agentauth-test")
			ts := s1.Turns(blobs)
			k := turnstoretest.Key(t)
			if err := ts.Commit(ctx, turnstoretest.First(k)); err != nil {
				t.Fatal(err)
			}
			st, _ := ts.Load(ctx, k)
			if err := ts.Commit(ctx, nextCommit(st, appendMessages(st, 1, bigText))); err != nil {
				t.Fatal(err)
			}
			for key := range blobs.objs {
				tc.spoil(blobs, key)
			}
			s2, _ := New(m, "agentauth-test")
			if _, err := s2.Turns(blobs).Load(ctx, k); !errors.Is(err, domain.ErrCorrupt) {
				t.Fatalf("load: %v, want ErrCorrupt", err)
			}
			// A store without the bucket cannot read the item either.
			if _, err := s2.Turns(nil).Load(ctx, k); !errors.Is(err, domain.ErrCorrupt) {
				t.Fatalf("load without a bucket: %v, want ErrCorrupt", err)
			}
		})
	}
}

// A message of the threshold's size stays in the table; one byte more
// goes to S3.
func TestTurnBlobThreshold(t *testing.T) {
	ctx := context.Background()
	m, blobs := newMemTable(), newMemBlobs()
	s, _ := New(m, "agentauth-test")
	ts := turnStore{s: s, blobs: blobs}
	small, err := ts.docItem(ctx, "turns/x/e/", "pk1", kindTurnMessage, strings.Repeat("a", BlobThreshold-2))
	if err != nil || small[attrDoc] == nil || small[attrBlob] != nil {
		t.Fatalf("a doc of BlobThreshold bytes: %v %v", err, small[attrBlob])
	}
	big, err := ts.docItem(ctx, "turns/x/e/", "pk2", kindTurnMessage, strings.Repeat("a", BlobThreshold-1))
	if err != nil || big[attrDoc] != nil || big[attrBlob] == nil {
		t.Fatalf("a doc of BlobThreshold+1 bytes: %v", err)
	}
}
