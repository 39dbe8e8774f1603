package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
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
		case pending && !reflect.DeepEqual(got, str(domain.ResumeTargetKey(sess.Resume.Target()))):
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
	pendingQuery := func(key string) dynamodb.QueryInput {
		return dynamodb.QueryInput{
			IndexName:                 aws.String(PendingIndex),
			KeyConditionExpression:    aws.String("#pendingFor = :pendingFor AND #expiresAt >= :at"),
			ExpressionAttributeNames:  map[string]string{"#pendingFor": "pendingFor", "#expiresAt": "expiresAt"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":pendingFor": str(key), ":at": num(at.UnixMilli())},
		}
	}
	for _, tc := range []struct {
		name string
		call func(s *Store) error
		// want are the queries, by their key value.
		want  []dynamodb.QueryInput
		items []map[string]types.AttributeValue
	}{
		{"pending sessions of a target",
			func(s *Store) error {
				list, bad, err := s.ListPendingSessions(ctx, sess.Resume.Target(), at)
				if err == nil && (len(list) != 1 || list[0].ID != sess.ID || len(bad) != 0) {
					t.Errorf("listed %v, bad %v", list, bad)
				}
				return err
			},
			[]dynamodb.QueryInput{
				// The whole target, swarm included, hashed.
				pendingQuery("rt-" + hex64(t, "agentauth/resume-target/v1", "Swarm", "default", sess.Resume.InstanceKey, sess.Resume.AgentName)),
				// What versions before issue 17 wrote.
				pendingQuery(hex64(t, sess.Resume.InstanceKey, sess.Resume.AgentName)),
			},
			[]map[string]types.AttributeValue{sItem(t, sess)}},
		{"sweep set up to a time",
			func(s *Store) error { _, _, err := s.ListSweepSessions(ctx, domain.SweepPending, at); return err },
			[]dynamodb.QueryInput{{
				IndexName:                 aws.String(SweepIndex),
				KeyConditionExpression:    aws.String("#sweepSet = :sweepSet AND #expiresAt <= :expiredBy"),
				ExpressionAttributeNames:  map[string]string{"#sweepSet": "sweepSet", "#expiresAt": "expiresAt"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":sweepSet": str("pending"), ":expiredBy": num(at.UnixMilli())},
			}}, nil},
		{"whole sweep set",
			func(s *Store) error {
				_, _, err := s.ListSweepSessions(ctx, domain.SweepEventPending, time.Time{})
				return err
			},
			[]dynamodb.QueryInput{{
				IndexName:                 aws.String(SweepIndex),
				KeyConditionExpression:    aws.String("#sweepSet = :sweepSet"),
				ExpressionAttributeNames:  map[string]string{"#sweepSet": "sweepSet"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":sweepSet": str("eventPending")},
			}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			got := map[string]*dynamodb.QueryInput{}
			f := &fakeDynamo{query: func(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
				c := *in
				mu.Lock()
				defer mu.Unlock()
				got[keyOf(in)] = &c
				// Both pending queries answer with the session (as when it
				// was rewritten between them): it is listed once.
				return &dynamodb.QueryOutput{Items: tc.items}, nil
			}} // no scan: a Scan fails the call
			if err := tc.call(newFakeStore(t, f)); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d queries, want %d", len(got), len(tc.want))
			}
			for _, want := range tc.want {
				q := got[keyOf(&want)]
				if q == nil || aws.ToString(q.TableName) != "agentauth-test" || aws.ToString(q.IndexName) != aws.ToString(want.IndexName) ||
					aws.ToString(q.KeyConditionExpression) != aws.ToString(want.KeyConditionExpression) ||
					!maps.Equal(q.ExpressionAttributeNames, want.ExpressionAttributeNames) ||
					!reflect.DeepEqual(q.ExpressionAttributeValues, want.ExpressionAttributeValues) ||
					q.FilterExpression != nil || aws.ToBool(q.ConsistentRead) {
					t.Fatalf("query %+v\nwant %+v", q, want)
				}
			}
		})
	}
}

// keyOf is the value of a query's partition key condition.
func keyOf(in *dynamodb.QueryInput) string {
	for _, name := range []string{":pendingFor", ":sweepSet"} {
		if v, ok := in.ExpressionAttributeValues[name].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
	}
	return ""
}

// hex64 is the hex sha256 of parts, each length-prefixed (uvarint), as
// the pending index's keys are written: spelled out here so that a
// change of the stored format fails a test.
func hex64(t *testing.T, parts ...string) string {
	t.Helper()
	h := sha256.New()
	for _, p := range parts {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
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

	if _, _, err := other.ListPendingSessions(ctx, sess.Resume.Target(), at); err != nil {
		t.Fatal(err)
	}
	// The target's key and the key before issue 17 (legacyPendingFor).
	check("pending sessions of a target", map[string]int{"Query": 2})
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

// The pending index's key names the whole resume target (issue 17): two
// swarms that share an instance key and an Agent name have different
// partitions, and neither lists the other's sessions, also those an
// older version wrote under the key without the swarm (which stay listed
// for their own target across the upgrade, and move to the new key with
// their next write).
func TestPendingKeyNamesTheSwarm(t *testing.T) {
	ctx := context.Background()
	m := newMemTable()
	s := newMemStore(t, m)
	of := func(swarm string) domain.Session {
		sess := indexSession()
		sess.ReuseKey = ""
		sess.Resume.SwarmRef.Name, sess.Resume.InstanceKey, sess.Resume.AgentName = swarm, "C1", "assistant"
		return sess
	}
	victim, other := of("victim"), of("other")
	for _, sess := range []domain.Session{victim, other} {
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	keyOfItem := func(id string) types.AttributeValue { return m.items[sessionPrefix+id][attrPendingFor] }
	if vk, ok := keyOfItem(victim.ID), keyOfItem(other.ID); vk == nil || reflect.DeepEqual(vk, ok) {
		t.Fatalf("pendingFor of swarm victim %v and swarm other %v: want two keys", vk, ok)
	}

	// As versions before issue 17 wrote them: the key without the swarm,
	// the same for both swarms' sessions (and one with no swarm at all).
	oldVictim, oldOther, noSwarm := of("victim"), of("other"), of("")
	noSwarm.Resume.SwarmRef = domain.ObjectRef{}
	for _, sess := range []domain.Session{oldVictim, oldOther, noSwarm} {
		item := sItem(t, sess)
		item[attrPendingFor] = str(legacyPendingFor("C1", "assistant"))
		m.items[sessionPrefix+sess.ID] = item
	}
	at := victim.CreatedAt
	list := func(swarm string) []string {
		t.Helper()
		got, bad, err := s.ListPendingSessions(ctx, of(swarm).Resume.Target(), at)
		if err != nil || len(bad) > 0 {
			t.Fatalf("ListPendingSessions(%s): %v, unreadable %v", swarm, err, bad)
		}
		ids := make([]string, len(got))
		for i, sess := range got {
			ids[i] = sess.ID
		}
		slices.Sort(ids)
		return ids
	}
	sorted := func(ids ...string) []string { slices.Sort(ids); return ids }
	for swarm, want := range map[string][]string{
		"victim": sorted(victim.ID, oldVictim.ID),
		"other":  sorted(other.ID, oldOther.ID),
		"third":  {},
	} {
		if got := list(swarm); !slices.Equal(got, want) {
			t.Errorf("swarm %s lists %v, want %v", swarm, got, want)
		}
	}

	// The next write of an old session gives it the new key.
	stored, err := s.GetSession(ctx, oldVictim.ID)
	if err != nil {
		t.Fatal(err)
	}
	stored.AuthorizationURL += "&x=1"
	if _, err := s.UpdateSession(ctx, stored); err != nil {
		t.Fatal(err)
	}
	if got := keyOfItem(oldVictim.ID); !reflect.DeepEqual(got, str(pendingFor(oldVictim.Resume.Target()))) {
		t.Fatalf("after an update pendingFor is %v, want the target's key", got)
	}
	if got, want := list("victim"), sorted(victim.ID, oldVictim.ID); !slices.Equal(got, want) {
		t.Fatalf("after the update swarm victim lists %v, want %v", got, want)
	}

	// A session with no complete target is in no partition.
	lone := indexSession()
	lone.ReuseKey, lone.Resume.SwarmRef = "", domain.ObjectRef{}
	if err := s.CreateSession(ctx, lone); err != nil {
		t.Fatal(err)
	}
	if got := keyOfItem(lone.ID); got != nil {
		t.Fatalf("a session without a swarm has pendingFor %v", got)
	}
}
