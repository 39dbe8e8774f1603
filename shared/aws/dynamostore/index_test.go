package dynamostore

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

func newMemStore(t *testing.T, m *memTable) *Store {
	t.Helper()
	s, err := New(m, aws.ToString(m.schema.TableName))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The conformance suite on the in-memory table: the Store's keys,
// conditions and index attributes after every write.
func TestConformanceFake(t *testing.T) {
	storetest.RunStore(t, func(t *testing.T) domain.Store {
		s := newMemStore(t, newMemTable())
		s.scanLimit = 2 // scans and queries take several pages
		return s
	})
}

// Two Stores on one table, as two Lambdas.
func TestConformanceFakeTwoStores(t *testing.T) {
	storetest.RunStorePair(t, func(t *testing.T) (domain.Store, domain.Store) {
		m := newMemTable()
		return newMemStore(t, m), newMemStore(t, m)
	})
}

// indexSession is a pending session of storetest's resume target with a
// reuse key.
func indexSession() domain.Session {
	s := storetest.SampleSession(storetest.NewSessionID())
	s.EventPending = false
	s.ReuseKey = domain.SessionReuseKey(s.OAuthAppRef, s.Subject, s.RequestedScopes, s.Resume)
	return s
}

// Every write keeps a session's index attributes as its status says: in
// PendingIndex only while pending, in the SweepIndex partition of its set.
func TestSessionIndexAttributes(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := newMemStore(t, m)
	sess := indexSession()
	pk := sessionPrefix + sess.ID
	want := func(what string, set domain.SweepSet, pending bool) {
		t.Helper()
		item := m.items[pk]
		if got := item[attrSweepSet]; !reflect.DeepEqual(got, str(string(set))) {
			t.Fatalf("%s: sweepSet %v, want %s", what, got, set)
		}
		if got := item[attrExpiresAt]; !reflect.DeepEqual(got, num(sess.ExpiresAt.UnixMilli())) {
			t.Fatalf("%s: expiresAt %v", what, got)
		}
		got, ok := item[attrPendingFor]
		switch {
		case pending && !reflect.DeepEqual(got, str(pendingFor(sess.Resume.InstanceKey, sess.Resume.AgentName))):
			t.Fatalf("%s: pendingFor %v", what, got)
		case !pending && ok:
			t.Fatalf("%s: a session that is not pending keeps pendingFor", what)
		}
	}
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	want("created", domain.SweepPending, true)
	pointer := m.items[reusePrefix+sess.ReuseKey]
	wantPointer := map[string]types.AttributeValue{
		PartitionKey: str(reusePrefix + sess.ReuseKey), attrKind: str(kindReusePointer), attrSessionID: str(sess.ID),
		attrReuseUntil: num(sess.ExpiresAt.Add(-domain.SessionReuseMargin).UnixMilli() + 1), // rounded up
		TTLAttribute:   num(epochCeil(sess.ExpiresAt)),
	}
	if !reflect.DeepEqual(pointer, wantPointer) {
		t.Fatalf("pointer item %v\nwant %v", pointer, wantPointer)
	}

	claimed := sess
	claimed.Status = domain.SessionExchanging
	if _, err := s.UpdateSession(ctx, claimed); err != nil {
		t.Fatal(err)
	}
	want("claimed", domain.SweepExchanging, false)
	if _, _, err := s.CompleteSession(ctx, sess.ID, sess.CreatedAt.Add(time.Minute), storetest.SampleGrant(storetest.NewGrantID())); err != nil {
		t.Fatal(err)
	}
	want("completed", domain.SweepFinished, false)

	// Completion reads the set from the record: an event still to send.
	sess = indexSession()
	sess.EventPending = true
	pk = sessionPrefix + sess.ID
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CompleteSession(ctx, sess.ID, sess.CreatedAt.Add(time.Minute), storetest.SampleGrant(storetest.NewGrantID())); err != nil {
		t.Fatal(err)
	}
	want("completed with its event pending", domain.SweepEventPending, false)

	// A session written before the indexes existed gets them when it
	// completes.
	sess = indexSession()
	sess.ReuseKey = ""
	pk = sessionPrefix + sess.ID
	old := sItem(t, sess)
	delete(old, attrSweepSet)
	delete(old, attrExpiresAt)
	delete(old, attrPendingFor)
	m.items[pk] = old
	if _, _, err := s.CompleteSession(ctx, sess.ID, sess.CreatedAt.Add(time.Minute), storetest.SampleGrant(storetest.NewGrantID())); err != nil {
		t.Fatal(err)
	}
	want("an old session completed", domain.SweepFinished, false)
}

// The request path and the sweep read by key: a Query of the right index
// with the right key condition, never a Scan.
func TestIndexQueries(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)
	sess := indexSession()
	sess.ExpiresAt = at.Add(5 * time.Minute)
	for _, tc := range []struct {
		name  string
		call  func(s *Store) error
		want  dynamodb.QueryInput
		items []map[string]types.AttributeValue
	}{
		{"pending sessions of a target",
			func(s *Store) error {
				list, bad, err := s.ListPendingSessions(ctx, sess.Resume.InstanceKey, sess.Resume.AgentName, at)
				if err == nil && (len(list) != 1 || list[0].ID != sess.ID || len(bad) != 0) {
					t.Errorf("listed %v, bad %v", list, bad)
				}
				return err
			},
			dynamodb.QueryInput{
				IndexName:                aws.String(PendingIndex),
				KeyConditionExpression:   aws.String("#pendingFor = :pendingFor AND #expiresAt >= :at"),
				ExpressionAttributeNames: map[string]string{"#pendingFor": "pendingFor", "#expiresAt": "expiresAt"},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":pendingFor": str(pendingFor(sess.Resume.InstanceKey, sess.Resume.AgentName)), ":at": num(at.UnixMilli()),
				},
			},
			[]map[string]types.AttributeValue{sItem(t, sess)}},
		{"sweep set up to a time",
			func(s *Store) error { _, _, err := s.ListSweepSessions(ctx, domain.SweepPending, at); return err },
			dynamodb.QueryInput{
				IndexName:                 aws.String(SweepIndex),
				KeyConditionExpression:    aws.String("#sweepSet = :sweepSet AND #expiresAt <= :expiredBy"),
				ExpressionAttributeNames:  map[string]string{"#sweepSet": "sweepSet", "#expiresAt": "expiresAt"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":sweepSet": str("pending"), ":expiredBy": num(at.UnixMilli())},
			}, nil},
		{"whole sweep set",
			func(s *Store) error {
				_, _, err := s.ListSweepSessions(ctx, domain.SweepEventPending, time.Time{})
				return err
			},
			dynamodb.QueryInput{
				IndexName:                 aws.String(SweepIndex),
				KeyConditionExpression:    aws.String("#sweepSet = :sweepSet"),
				ExpressionAttributeNames:  map[string]string{"#sweepSet": "sweepSet"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":sweepSet": str("eventPending")},
			}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []*dynamodb.QueryInput
			f := &fakeDynamo{query: func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
				c := *in
				got = append(got, &c)
				return &dynamodb.QueryOutput{Items: tc.items}, nil
			}} // no scan: a Scan fails the call
			if err := tc.call(newFakeStore(t, f)); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%d queries", len(got))
			}
			q := got[0]
			if aws.ToString(q.TableName) != "agentauth-test" || aws.ToString(q.IndexName) != aws.ToString(tc.want.IndexName) ||
				aws.ToString(q.KeyConditionExpression) != aws.ToString(tc.want.KeyConditionExpression) ||
				!maps.Equal(q.ExpressionAttributeNames, tc.want.ExpressionAttributeNames) ||
				!reflect.DeepEqual(q.ExpressionAttributeValues, tc.want.ExpressionAttributeValues) ||
				q.FilterExpression != nil || aws.ToBool(q.ConsistentRead) {
				t.Fatalf("query %+v\nwant %+v", q, tc.want)
			}
		})
	}
}

// What each index operation costs in DynamoDB calls, on the in-memory
// table (docs/deploy.md lists them).
func TestIndexCalls(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := newMemStore(t, m)
	other := newMemStore(t, m) // a Lambda that has seen nothing
	sess := indexSession()
	at := sess.CreatedAt
	check := func(what string, want map[string]int) {
		t.Helper()
		if got := m.takeCalls(); !maps.Equal(got, want) {
			t.Errorf("%s: calls %v, want %v", what, got, want)
		}
	}
	if _, err := s.FindPendingSession(ctx, sess.ReuseKey, at); !errors.Is(err, domain.ErrNotFound) {
		t.Fatal(err)
	}
	check("lookup, no session", map[string]int{"GetItem": 1})
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	check("create with a reuse key", map[string]int{"TransactWriteItems": 1})
	if _, err := other.FindPendingSession(ctx, sess.ReuseKey, at); err != nil {
		t.Fatal(err)
	}
	check("lookup, found", map[string]int{"GetItem": 2})
	if _, err := other.FindPendingSession(ctx, sess.ReuseKey, sess.ExpiresAt); !errors.Is(err, domain.ErrNotFound) {
		t.Fatal(err)
	}
	check("lookup past the pointer's time", map[string]int{"GetItem": 1})
	rival := indexSession()
	rival.ReuseKey = sess.ReuseKey
	if err := other.CreateSession(ctx, rival); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("create on a held key: %v", err)
	}
	check("create on a held key", map[string]int{"TransactWriteItems": 1, "GetItem": 1})
	failed := sess
	failed.Status = domain.SessionFailed
	if _, err := s.UpdateSession(ctx, failed); err != nil {
		t.Fatal(err)
	}
	m.takeCalls()
	if err := other.CreateSession(ctx, rival); err != nil {
		t.Fatalf("create over a stale pointer: %v", err)
	}
	check("create over a stale pointer", map[string]int{"TransactWriteItems": 2, "GetItem": 1})

	if _, _, err := other.ListPendingSessions(ctx, sess.Resume.InstanceKey, sess.Resume.AgentName, at); err != nil {
		t.Fatal(err)
	}
	check("pending sessions of a target", map[string]int{"Query": 1})
	list, _, err := other.ListSweepSessions(ctx, domain.SweepFinished, time.Time{})
	if err != nil || len(list) != 1 {
		t.Fatalf("finished: %v %v", list, err)
	}
	check("a sweep set of one session", map[string]int{"Query": 1, "GetItem": 1})
}

// A sweep listing skips what the index still shows after a session moved
// on or went away, and stops at a failed read.
func TestSweepListingRereads(t *testing.T) {
	ctx := context.Background()
	moved, gone, bad := indexSession(), indexSession(), indexSession()
	moved.Status = domain.SessionExpired
	keys := func(ids ...string) []map[string]types.AttributeValue {
		var out []map[string]types.AttributeValue
		for _, id := range ids {
			out = append(out, map[string]types.AttributeValue{PartitionKey: str(sessionPrefix + id), attrSweepSet: str("pending"), attrExpiresAt: num(1)})
		}
		return out
	}
	stored := map[string]map[string]types.AttributeValue{
		sessionPrefix + moved.ID: sItem(t, moved),
		sessionPrefix + bad.ID:   {PartitionKey: str(sessionPrefix + bad.ID), attrKind: str(kindSession), attrDoc: str("{" + marker)},
	}
	f := &fakeDynamo{
		query: func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
			return &dynamodb.QueryOutput{Items: keys(moved.ID, gone.ID, bad.ID)}, nil
		},
		get: func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{Item: stored[pkOf(in.Key)]}, nil
		},
	}
	list, unreadable, err := newFakeStore(t, f).ListSweepSessions(ctx, domain.SweepPending, time.Time{})
	if err != nil || len(list) != 0 || len(unreadable) != 1 || !errors.Is(unreadable[0], domain.ErrCorrupt) {
		t.Fatalf("list %v, unreadable %v, err %v", list, unreadable, err)
	}
	noMarker(t, unreadable[0])

	boom := errors.New("throttled")
	f.get = func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, boom }
	if _, _, err := newFakeStore(t, f).ListSweepSessions(ctx, domain.SweepPending, time.Time{}); !errors.Is(err, boom) {
		t.Fatalf("a failed read: %v", err)
	}
}

// A pointer item that does not decode is an error that names the key and
// holds no item contents; the Store never overwrites it.
func TestCorruptReusePointer(t *testing.T) {
	ctx := context.Background()
	sess := indexSession()
	corrupt := map[string]types.AttributeValue{PartitionKey: str(reusePrefix + sess.ReuseKey), attrKind: str(kindReusePointer), attrSessionID: str(marker)}
	f := &fakeDynamo{
		get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{Item: corrupt}, nil
		},
		tx: func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
			return nil, canceled(reason("None", nil), reason("ConditionalCheckFailed", corrupt))
		},
	}
	s := newFakeStore(t, f)
	_, err := s.FindPendingSession(ctx, sess.ReuseKey, sess.CreatedAt)
	noMarker(t, err)
	if !errors.Is(err, domain.ErrCorrupt) || !strings.Contains(err.Error(), sess.ReuseKey) {
		t.Fatalf("FindPendingSession: %v", err)
	}
	err = s.CreateSession(ctx, sess)
	noMarker(t, err)
	if !errors.Is(err, domain.ErrCorrupt) || len(f.txs) != 1 {
		t.Fatalf("CreateSession: %v after %d transactions", err, len(f.txs))
	}
}

// Transaction conflicts on the pointer are retried, each with a fresh
// input.
func TestCreateReusableRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	sess := indexSession()
	f := &fakeDynamo{tx: func(n int, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		if n < 3 {
			return nil, canceled(reason("None", nil), reason("TransactionConflict", nil))
		}
		return &dynamodb.TransactWriteItemsOutput{}, nil
	}}
	if err := newFakeStore(t, f).CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if len(f.txs) != 3 || slices.ContainsFunc(f.txs[1:], func(in *dynamodb.TransactWriteItemsInput) bool { return in == f.txs[0] }) {
		t.Fatalf("%d transactions", len(f.txs))
	}
	f.tx = func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return nil, canceled(reason("None", nil), reason("TransactionConflict", nil))
	}
	f.txs = nil
	if err := newFakeStore(t, f).CreateSession(ctx, sess); !errors.Is(err, domain.ErrConflict) || len(f.txs) != maxReuseAttempts {
		t.Fatalf("always busy: %v after %d transactions", err, len(f.txs))
	}
}
