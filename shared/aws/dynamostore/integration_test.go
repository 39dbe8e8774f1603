//go:build integration

package dynamostore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// countingAPI counts the calls a Store makes, by operation.
type countingAPI struct {
	DynamoAPI
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingAPI) count(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
}

// take returns the counts so far and starts again.
func (c *countingAPI) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = nil
	if out == nil {
		out = map[string]int{}
	}
	return out
}

func (c *countingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.count("GetItem")
	return c.DynamoAPI.GetItem(ctx, in, o...)
}

func (c *countingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.count("PutItem")
	return c.DynamoAPI.PutItem(ctx, in, o...)
}

func (c *countingAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.count("DeleteItem")
	return c.DynamoAPI.DeleteItem(ctx, in, o...)
}

func (c *countingAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.count("TransactWriteItems")
	return c.DynamoAPI.TransactWriteItems(ctx, in, o...)
}

func (c *countingAPI) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.count("Scan")
	return c.DynamoAPI.Scan(ctx, in, o...)
}

func (c *countingAPI) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.count("BatchGetItem")
	return c.DynamoAPI.BatchGetItem(ctx, in, o...)
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.count("Query")
	return c.DynamoAPI.Query(ctx, in, o...)
}

func must(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// rawItem reads an item as stored.
func rawItem(t *testing.T, api *dynamodb.Client, table, pk string) map[string]types.AttributeValue {
	t.Helper()
	out, err := api.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: key(pk), ConsistentRead: aws.Bool(true),
	})
	must(t, err, "raw GetItem")
	return out.Item
}

func attrS(t *testing.T, item map[string]types.AttributeValue, name string) string {
	t.Helper()
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		t.Fatalf("attribute %s: want a string, got %T", name, item[name])
	}
	return v.Value
}

func attrN(t *testing.T, item map[string]types.AttributeValue, name string) string {
	t.Helper()
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		t.Fatalf("attribute %s: want a number, got %T", name, item[name])
	}
	return v.Value
}

func sameKeys(t *testing.T, item map[string]types.AttributeValue, want ...string) {
	t.Helper()
	got := slices.Sorted(maps.Keys(item))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("attributes %v, want %v", got, want)
	}
}

// futureSession is a pending session that expires in ten minutes (the
// suite's samples expired long ago).
func futureSession() domain.Session {
	s := storetest.SampleSession(storetest.NewSessionID())
	now := time.Now().UTC()
	s.CreatedAt, s.ExpiresAt = now, now.Add(10*time.Minute+123*time.Millisecond)
	s.EventPending = false
	return s
}

func epochText(t time.Time) string {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return fmt.Sprint(sec)
}

// The table holds exactly the documented layout.
func TestItemLayout(t *testing.T) {
	ctx := context.Background()
	s, api := newEmulatorStore(t, tableOpts{})

	g := storetest.SampleGrant(storetest.NewGrantID())
	_, err := s.PutGrant(ctx, g, 0)
	must(t, err, "PutGrant")
	item := rawItem(t, api, s.Table(), "grant#"+g.ID)
	sameKeys(t, item, "pk", "kind", "version", "createdAt", "doc", "listKey", "listAll", "listSort")
	if attrS(t, item, "listKey") != "grant#t#" || attrS(t, item, "listAll") != "grant" ||
		attrS(t, item, "listSort") != "a#"+domain.ListKey(g.CreatedAt, g.ID) {
		t.Fatalf("grant item's list keys %v", item)
	}
	created, _ := g.CreatedAt.MarshalText()
	if attrS(t, item, "kind") != "OAuthGrantRecord" || attrN(t, item, "version") != "1" || attrS(t, item, "createdAt") != string(created) {
		t.Fatalf("grant item %v", item)
	}
	var doc map[string]any
	must(t, json.Unmarshal([]byte(attrS(t, item, "doc")), &doc), "grant doc")
	if _, ok := doc["version"]; ok {
		t.Fatal("grant doc holds the version")
	}
	if _, ok := doc["createdAt"]; ok {
		t.Fatal("grant doc holds createdAt")
	}
	want, _ := json.Marshal(g.Token.AccessToken)
	if !strings.Contains(attrS(t, item, "doc"), string(want)) {
		t.Fatal("the sealed access token is not inline in doc as domain's JSON gives it")
	}

	sess := futureSession()
	must(t, s.CreateSession(ctx, sess), "CreateSession")
	item = rawItem(t, api, s.Table(), "session#"+sess.ID)
	sameKeys(t, item, "pk", "kind", "version", "status", "ttl", "doc", "expiresAt", "sweepSet", "pendingFor", "listKey", "listAll", "listSort")
	if attrS(t, item, "listKey") != "session#t#"+sess.Tenant || attrS(t, item, "listSort") != domain.ListKey(sess.CreatedAt, sess.ID) {
		t.Fatalf("session item's list keys %v", item)
	}
	if attrS(t, item, "kind") != "AuthSessionRecord" || attrS(t, item, "status") != "pending" || attrN(t, item, "version") != "0" ||
		attrS(t, item, "sweepSet") != "pending" || attrN(t, item, "expiresAt") != fmt.Sprint(sess.ExpiresAt.UnixMilli()) {
		t.Fatalf("session item %v", item)
	}
	doc = nil
	must(t, json.Unmarshal([]byte(attrS(t, item, "doc")), &doc), "session doc")
	for _, k := range []string{"version", "status", "completedAt"} {
		if _, ok := doc[k]; ok {
			t.Fatalf("session doc holds %s", k)
		}
	}
	docBefore := attrS(t, item, "doc")
	at := time.Now().UTC()
	_, _, err = s.CompleteSession(ctx, sess.ID, at, storetest.SampleGrant(storetest.NewGrantID()))
	must(t, err, "CompleteSession")
	item = rawItem(t, api, s.Table(), "session#"+sess.ID)
	sameKeys(t, item, "pk", "kind", "version", "status", "completedAt", "ttl", "doc", "expiresAt", "sweepSet", "listKey", "listAll", "listSort")
	atText, _ := at.MarshalText()
	if attrS(t, item, "status") != "completed" || attrS(t, item, "completedAt") != string(atText) || attrS(t, item, "sweepSet") != "finished" ||
		attrN(t, item, "version") != "1" || attrS(t, item, "doc") != docBefore {
		t.Fatalf("completed session item %v", item)
	}

	reusable := futureSession()
	reusable.ReuseKey = domain.SessionReuseKey(reusable.OAuthAppRef, reusable.Subject, reusable.RequestedScopes, reusable.Resume)
	must(t, s.CreateSession(ctx, reusable), "CreateSession with a reuse key")
	item = rawItem(t, api, s.Table(), "reuse#"+reusable.ReuseKey)
	sameKeys(t, item, "pk", "kind", "sessionId", "reuseUntil", "ttl")
	if attrS(t, item, "kind") != "SessionReuse" || attrS(t, item, "sessionId") != reusable.ID {
		t.Fatalf("reuse pointer item %v", item)
	}

	leaseKey := "refresh/" + g.ID
	must(t, s.AcquireLease(ctx, leaseKey, "owner-1", time.Minute), "AcquireLease")
	sum := sha256.Sum256([]byte(leaseKey))
	item = rawItem(t, api, s.Table(), "lease#"+hex.EncodeToString(sum[:]))
	sameKeys(t, item, "pk", "kind", "owner", "expiresAt", "ttl")
	if attrS(t, item, "kind") != "Lease" || attrS(t, item, "owner") != "owner-1" {
		t.Fatalf("lease item %v", item)
	}
}

// ttl is epoch seconds: a session's expiresAt + 24 h, a lease's end + 1 h,
// and TimeToLive is on for it.
func TestTTLAttribute(t *testing.T) {
	ctx := context.Background()
	s, api := newEmulatorStore(t, tableOpts{})
	d, err := api.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(s.Table())})
	must(t, err, "DescribeTimeToLive")
	if d.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(d.TimeToLiveDescription.AttributeName) != "ttl" {
		t.Fatalf("TimeToLive %+v", d.TimeToLiveDescription)
	}

	sess := futureSession()
	must(t, s.CreateSession(ctx, sess), "CreateSession")
	pk := "session#" + sess.ID
	if got, want := attrN(t, rawItem(t, api, s.Table(), pk), "ttl"), epochText(sess.ExpiresAt.Add(24*time.Hour)); got != want {
		t.Fatalf("created session ttl %s, want %s", got, want)
	}
	sess.ExpiresAt = sess.ExpiresAt.Add(time.Hour)
	sess, err = s.UpdateSession(ctx, sess)
	must(t, err, "UpdateSession")
	want := epochText(sess.ExpiresAt.Add(24 * time.Hour))
	if got := attrN(t, rawItem(t, api, s.Table(), pk), "ttl"); got != want {
		t.Fatalf("updated session ttl %s, want %s", got, want)
	}
	g := storetest.SampleGrant(storetest.NewGrantID())
	_, _, err = s.CompleteSession(ctx, sess.ID, time.Now(), g)
	must(t, err, "CompleteSession")
	if got := attrN(t, rawItem(t, api, s.Table(), pk), "ttl"); got != want {
		t.Fatalf("completed session ttl %s, want %s (kept)", got, want)
	}
	if _, ok := rawItem(t, api, s.Table(), "grant#"+g.ID)["ttl"]; ok {
		t.Fatal("a grant has a ttl")
	}

	// An undelivered auth.granted keeps its session until delivered.
	done, err := s.GetSession(ctx, sess.ID)
	must(t, err, "GetSession")
	done.EventPending = true
	done, err = s.UpdateSession(ctx, done)
	must(t, err, "UpdateSession")
	if _, ok := rawItem(t, api, s.Table(), pk)["ttl"]; ok {
		t.Fatal("a session with an undelivered event has a ttl")
	}
	done.EventPending = false
	_, err = s.UpdateSession(ctx, done)
	must(t, err, "UpdateSession")
	if got := attrN(t, rawItem(t, api, s.Table(), pk), "ttl"); got != want {
		t.Fatalf("delivered session ttl %s, want %s", got, want)
	}

	t0 := time.Now().Add(time.Minute).Truncate(time.Millisecond).Add(400 * time.Microsecond)
	s.now = func() time.Time { return t0 }
	leaseKey := "refresh/" + g.ID
	must(t, s.AcquireLease(ctx, leaseKey, "a", 30*time.Second), "AcquireLease")
	sum := sha256.Sum256([]byte(leaseKey))
	lpk := "lease#" + hex.EncodeToString(sum[:])
	item := rawItem(t, api, s.Table(), lpk)
	until := t0.Add(30 * time.Second)
	if attrN(t, item, "expiresAt") != fmt.Sprint(until.UnixMilli()) || attrN(t, item, "ttl") != epochText(until.Add(time.Hour)) {
		t.Fatalf("lease item %v", item)
	}
	s.now = func() time.Time { return t0.Add(10 * time.Second) }
	must(t, s.AcquireLease(ctx, leaseKey, "a", 30*time.Second), "extend")
	until = t0.Add(40 * time.Second)
	if got := attrN(t, rawItem(t, api, s.Table(), lpk), "ttl"); got != epochText(until.Add(time.Hour)) {
		t.Fatalf("extended lease ttl %s", got)
	}
}

// The callback reads the session (GetSession) and completes it: one
// GetItem and one TransactWriteItems, nothing else.
func TestCompleteSessionCalls(t *testing.T) {
	ctx := context.Background()
	gettoken, api := newEmulatorStore(t, tableOpts{})
	calls := &countingAPI{DynamoAPI: api}
	callbackLambda := func() *Store {
		s, err := New(calls, gettoken.Table())
		must(t, err, "New")
		return s
	}
	complete := func(s *Store, g domain.Grant, needsGet bool) (domain.Grant, map[string]int) {
		t.Helper()
		sess := futureSession()
		must(t, gettoken.CreateSession(ctx, sess), "CreateSession")
		calls.take()
		if needsGet {
			_, err := s.GetSession(ctx, sess.ID)
			must(t, err, "GetSession")
		}
		_, got, err := s.CompleteSession(ctx, sess.ID, time.Now(), g)
		must(t, err, "CompleteSession")
		return got, calls.take()
	}

	// A first consent, in a Lambda that has never seen the grant.
	g := storetest.SampleGrant(storetest.NewGrantID())
	got, n := complete(callbackLambda(), g, true)
	if !maps.Equal(n, map[string]int{"GetItem": 1, "TransactWriteItems": 1}) || got.Version != 1 {
		t.Fatalf("first consent: calls %v, version %d", n, got.Version)
	}

	// A grant this Lambda knows (it wrote or read it): still one transaction.
	warm := callbackLambda()
	_, err := warm.GetGrant(ctx, g.ID)
	must(t, err, "GetGrant")
	got, n = complete(warm, g, true)
	if !maps.Equal(n, map[string]int{"GetItem": 1, "TransactWriteItems": 1}) || got.Version != 2 {
		t.Fatalf("known grant: calls %v, version %d", n, got.Version)
	}

	// Re-consent in a Lambda that has never seen the existing grant: the
	// first transaction guesses "no grant", is refused with the stored
	// grant, and the second writes at its version. No read.
	g.CreatedAt = time.Now()
	got, n = complete(callbackLambda(), g, true)
	if !maps.Equal(n, map[string]int{"GetItem": 1, "TransactWriteItems": 2}) || got.Version != 3 {
		t.Fatalf("re-consent: calls %v, version %d", n, got.Version)
	}
	stored, err := gettoken.GetGrant(ctx, g.ID)
	must(t, err, "GetGrant")
	if !stored.CreatedAt.Equal(storetest.SampleGrant(g.ID).CreatedAt) || !got.CreatedAt.Equal(stored.CreatedAt) {
		t.Fatalf("CreatedAt %v (returned %v), want the first consent's", stored.CreatedAt, got.CreatedAt)
	}

	// A session this Store has not read is read once.
	_, n = complete(warm, storetest.SampleGrant(storetest.NewGrantID()), false)
	if !maps.Equal(n, map[string]int{"GetItem": 1, "TransactWriteItems": 1}) {
		t.Fatalf("unread session: calls %v", n)
	}
}

// Two Lambdas that both read the session race to complete it: one wins,
// the other gets ErrConflict, and only the winner's grant is stored.
func TestCompleteSessionRaceAcrossStores(t *testing.T) {
	ctx := context.Background()
	a, api := newEmulatorStore(t, tableOpts{})
	b, err := New(api, a.Table())
	must(t, err, "New")
	gid := storetest.NewGrantID()
	for round := 1; round <= 8; round++ {
		sess := futureSession()
		must(t, a.CreateSession(ctx, sess), "CreateSession")
		stores := []*Store{a, b}
		for _, s := range stores {
			_, err := s.GetSession(ctx, sess.ID)
			must(t, err, "GetSession")
		}
		winner := storetest.RaceOneWinner(t, fmt.Sprint("round ", round), len(stores), func(i int) error {
			g := storetest.SampleGrant(gid)
			g.Subject = fmt.Sprint("lambda-", i)
			_, _, err := stores[i].CompleteSession(ctx, sess.ID, time.Now(), g)
			return err
		})
		g, err := a.GetGrant(ctx, gid)
		must(t, err, "GetGrant")
		if g.Version != int64(round) || g.Subject != fmt.Sprint("lambda-", winner) {
			t.Fatalf("round %d: grant version %d subject %q, winner %d", round, g.Version, g.Subject, winner)
		}
	}
}

// Lambdas racing to write one grant version: exactly one wins each round.
func TestPutGrantRaceAcrossStores(t *testing.T) {
	ctx := context.Background()
	first, api := newEmulatorStore(t, tableOpts{})
	stores := []*Store{first}
	for range 4 {
		s, err := New(api, first.Table())
		must(t, err, "New")
		stores = append(stores, s)
	}
	g := storetest.SampleGrant(storetest.NewGrantID())
	cur, err := first.PutGrant(ctx, g, 0)
	must(t, err, "PutGrant")
	for round := range 5 {
		winner := storetest.RaceOneWinner(t, fmt.Sprint("round ", round), len(stores), func(i int) error {
			x := g
			x.Subject = fmt.Sprint("refresher-", i)
			_, err := stores[i].PutGrant(ctx, x, cur.Version)
			return err
		})
		next, err := first.GetGrant(ctx, g.ID)
		must(t, err, "GetGrant")
		if next.Version != cur.Version+1 || next.Subject != fmt.Sprint("refresher-", winner) {
			t.Fatalf("round %d: version %d subject %q, winner %d", round, next.Version, next.Subject, winner)
		}
		cur = next
	}
}

// Lists page through the table and skip what is not theirs.
func TestListPagination(t *testing.T) {
	ctx := context.Background()
	s, _ := newEmulatorStore(t, tableOpts{})
	s.scanLimit = 2
	if has, err := s.HasRecords(ctx); err != nil || has {
		t.Fatalf("empty table: HasRecords %v %v", has, err)
	}
	for i := range 3 {
		must(t, s.AcquireLease(ctx, fmt.Sprint("lease-", i), "o", time.Minute), "AcquireLease")
	}
	if has, err := s.HasRecords(ctx); err != nil || has {
		t.Fatalf("leases only: HasRecords %v %v", has, err)
	}
	var gids, sids []string
	for range 5 {
		g, err := s.PutGrant(ctx, storetest.SampleGrant(storetest.NewGrantID()), 0)
		must(t, err, "PutGrant")
		gids = append(gids, g.ID)
	}
	for range 4 {
		sess := futureSession()
		must(t, s.CreateSession(ctx, sess), "CreateSession")
		sids = append(sids, sess.ID)
	}
	slices.Sort(gids)
	slices.Sort(sids)
	grants, bad, err := s.ListGrants(ctx)
	must(t, err, "ListGrants")
	if len(bad) != 0 || !slices.Equal(ids(grants, func(g domain.Grant) string { return g.ID }), gids) {
		t.Fatalf("ListGrants: %d grants, errors %v", len(grants), bad)
	}
	sessions, bad, err := s.ListSessions(ctx)
	must(t, err, "ListSessions")
	if len(bad) != 0 || !slices.Equal(ids(sessions, func(s domain.Session) string { return s.ID }), sids) {
		t.Fatalf("ListSessions: %d sessions, errors %v", len(sessions), bad)
	}
	if has, err := s.HasRecords(ctx); err != nil || !has {
		t.Fatalf("HasRecords %v %v", has, err)
	}
}

func ids[T any](recs []T, id func(T) string) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = id(r)
	}
	return out
}

// Unreadable items are reported, never fatal to a list, never overwritten.
func TestCorruptItemsEmulator(t *testing.T) {
	ctx := context.Background()
	s, api := newEmulatorStore(t, tableOpts{})
	put := func(item map[string]types.AttributeValue) {
		_, err := api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: item})
		must(t, err, "raw PutItem")
	}
	badGrant := storetest.NewGrantID()
	put(map[string]types.AttributeValue{"pk": str("grant#" + badGrant), "kind": str(kindGrant), "version": num(1),
		"createdAt": str("2026-01-01T00:00:00Z"), "doc": str(`{"token": "` + marker)})
	put(map[string]types.AttributeValue{"pk": str("grant#not-an-id"), "kind": str(kindGrant)})
	badSession := storetest.NewSessionID()
	put(map[string]types.AttributeValue{"pk": str("session#" + badSession), "kind": str(kindSession), "version": num(0),
		"status": str("pending"), "doc": str(`[` + marker)})
	good, err := s.PutGrant(ctx, storetest.SampleGrant(storetest.NewGrantID()), 0)
	must(t, err, "PutGrant")

	_, err = s.GetGrant(ctx, badGrant)
	if !errors.Is(err, domain.ErrCorrupt) || !strings.Contains(err.Error(), badGrant) || strings.Contains(err.Error(), marker) {
		t.Fatalf("GetGrant of a corrupt grant: %v", err)
	}
	grants, bad, err := s.ListGrants(ctx)
	must(t, err, "ListGrants")
	if len(grants) != 1 || grants[0].ID != good.ID || len(bad) != 2 {
		t.Fatalf("ListGrants: %d grants, errors %v", len(grants), bad)
	}
	_, bad, err = s.ListSessions(ctx)
	if err != nil || len(bad) != 1 || !errors.Is(bad[0], domain.ErrCorrupt) {
		t.Fatalf("ListSessions: errors %v, %v", bad, err)
	}
	g := storetest.SampleGrant(storetest.NewGrantID())
	if _, _, err := s.CompleteSession(ctx, badSession, time.Now(), g); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("CompleteSession of a corrupt session: %v", err)
	}
	if _, err := s.GetGrant(ctx, g.ID); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("a refused completion wrote the grant: %v", err)
	}
	if n, err := s.Reseal(ctx, mustKeyring(t, 1)); err == nil || n != 0 {
		t.Fatalf("Reseal over unreadable records: n=%d err=%v", n, err)
	}
	must(t, s.DeleteSession(ctx, badSession), "DeleteSession of a corrupt session")
}

func TestMissingTableEmulator(t *testing.T) {
	api := emulatortest.DynamoDB(t)
	s, err := New(api, "agentauth-dynamostore-test-missing-"+storetest.NewGrantID())
	must(t, err, "New")
	ctx := context.Background()
	_, err = s.GetGrant(ctx, storetest.NewGrantID())
	if !errors.Is(err, ErrTableNotFound) || !strings.Contains(err.Error(), s.Table()) {
		t.Fatalf("GetGrant: %v", err)
	}
	// A state as a read leaves it, so the store skips its own read and
	// goes straight to the transaction, which meets the missing table.
	sess := storetest.SampleSession(storetest.NewSessionID())
	item, err := sessionItem(sess)
	must(t, err, "sessionItem")
	item[attrVersion] = num(1)
	_, st, err := decodeSession(sess.ID, item)
	must(t, err, "decodeSession")
	s.known.setSession(sess.ID, st)
	for id := range s.known.sessions {
		_, _, err = s.CompleteSession(ctx, id, time.Now(), storetest.SampleGrant(storetest.NewGrantID()))
	}
	if !errors.Is(err, ErrTableNotFound) {
		t.Fatalf("CompleteSession: %v", err)
	}
}

func mustKeyring(t *testing.T, keys ...byte) *aesseal.Keyring {
	t.Helper()
	raw := make([][]byte, len(keys))
	for i, b := range keys {
		raw[i] = bytes.Repeat([]byte{b}, aesseal.KeySize)
	}
	k, err := aesseal.New(raw[0], raw[1:]...)
	must(t, err, "keyring")
	return k
}

func sealedGrant(t *testing.T, k *aesseal.Keyring, id, access string) domain.Grant {
	t.Helper()
	ctx := context.Background()
	g := storetest.SampleGrant(id)
	var err error
	g.Token.AccessToken, err = k.Seal(ctx, []byte(access), domain.GrantBinding(g, domain.FieldAccessToken))
	must(t, err, "seal")
	r, err := k.Seal(ctx, []byte("refresh-"+id), domain.GrantBinding(g, domain.FieldRefreshToken))
	must(t, err, "seal")
	g.Token.RefreshToken = &r
	return g
}

// hookAPI runs before once, just before the first PutItem on pk.
type hookAPI struct {
	DynamoAPI
	pk     string
	before func()
	once   sync.Once
}

func (h *hookAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if pk, _ := getPK(in.Item); pk == h.pk {
		h.once.Do(h.before)
	}
	return h.DynamoAPI.PutItem(ctx, in, o...)
}

func TestResealAndKeyIDs(t *testing.T) {
	ctx := context.Background()
	other, api := newEmulatorStore(t, tableOpts{})
	old := mustKeyring(t, 1)
	g1 := sealedGrant(t, old, storetest.NewGrantID(), "access-1")
	g1, err := other.PutGrant(ctx, g1, 0)
	must(t, err, "PutGrant")
	g2 := sealedGrant(t, old, storetest.NewGrantID(), "access-2")
	g2.Token.RefreshToken = nil
	_, err = other.PutGrant(ctx, g2, 0)
	must(t, err, "PutGrant")
	sess := futureSession()
	b := func(f string) domain.Binding { return domain.SessionBinding(sess, f) }
	sess.Flow.PKCE.CodeVerifier, _ = old.Seal(ctx, []byte("verifier"), b(domain.FieldCodeVerifier))
	sess.Flow.State, _ = old.Seal(ctx, []byte("state"), b(domain.FieldState))
	sess.Flow.DeviceCode.DeviceCode, _ = old.Seal(ctx, []byte("device"), b(domain.FieldDeviceCode))
	must(t, other.CreateSession(ctx, sess), "CreateSession")

	// While Reseal runs, another Lambda refreshes g1 (sealed with the old
	// key still): Reseal must not overwrite it, but reseal what it wrote.
	hook := &hookAPI{DynamoAPI: api, pk: "grant#" + g1.ID}
	hook.before = func() {
		refreshed := sealedGrant(t, old, g1.ID, "access-refreshed")
		_, err := other.PutGrant(ctx, refreshed, g1.Version)
		must(t, err, "concurrent PutGrant")
	}
	s, err := New(hook, other.Table())
	must(t, err, "New")

	keys, err := s.KeyIDs(ctx)
	must(t, err, "KeyIDs")
	if len(keys) != 1 || len(keys[old.CurrentID()]) != 3 {
		t.Fatalf("KeyIDs before: %v", keys)
	}
	if n, err := s.Reseal(ctx, mustKeyring(t, 9)); err == nil || n != 0 || !errors.Is(err, aesseal.ErrUnknownKey) {
		t.Fatalf("Reseal with a keyring lacking the key: n=%d err=%v", n, err)
	}
	rotated := mustKeyring(t, 2, 1)
	n, err := s.Reseal(ctx, rotated)
	must(t, err, "Reseal")
	if n != 2+1+3 {
		t.Fatalf("resealed %d values, want 6", n)
	}
	keys, err = s.KeyIDs(ctx)
	must(t, err, "KeyIDs")
	if len(keys) != 1 || len(keys[rotated.CurrentID()]) != 3 {
		t.Fatalf("KeyIDs after: %v", keys)
	}
	got, err := s.GetGrant(ctx, g1.ID)
	must(t, err, "GetGrant")
	if got.Version != g1.Version+2 {
		t.Fatalf("g1 version %d, want %d (refresh, then reseal)", got.Version, g1.Version+2)
	}
	newOnly := mustKeyring(t, 2)
	pt, err := newOnly.Open(ctx, got.Token.AccessToken, domain.GrantBinding(got, domain.FieldAccessToken))
	if err != nil || string(pt) != "access-refreshed" {
		t.Fatalf("g1 after reseal: %q %v (the concurrent refresh was lost?)", pt, err)
	}
	gs, err := s.GetSession(ctx, sess.ID)
	must(t, err, "GetSession")
	pt, err = newOnly.Open(ctx, gs.Flow.DeviceCode.DeviceCode, domain.SessionBinding(gs, domain.FieldDeviceCode))
	if err != nil || string(pt) != "device" {
		t.Fatalf("session after reseal: %v", err)
	}
}

// replayAPI sends every transaction twice, as the SDK does when a response
// is lost after DynamoDB applied the request, and answers with the second.
type replayAPI struct{ DynamoAPI }

func (r replayAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if _, err := r.DynamoAPI.TransactWriteItems(ctx, in, o...); err != nil {
		return nil, err
	}
	return r.DynamoAPI.TransactWriteItems(ctx, in, o...)
}

// A replayed completion is not a lost race: the SDK gives the transaction
// an idempotency token (ClientRequestToken) that a replay carries too.
func TestCompleteSessionReplayed(t *testing.T) {
	ctx := context.Background()
	base, api := newEmulatorStore(t, tableOpts{})
	s, err := New(replayAPI{api}, base.Table())
	must(t, err, "New")
	sess := futureSession()
	must(t, s.CreateSession(ctx, sess), "CreateSession")
	done, g, err := s.CompleteSession(ctx, sess.ID, time.Now(), storetest.SampleGrant(storetest.NewGrantID()))
	if err != nil || done.Status != domain.SessionCompleted || g.Version != 1 {
		t.Fatalf("replayed CompleteSession: %v", err)
	}
	got, err := base.GetSession(ctx, sess.ID)
	must(t, err, "GetSession")
	if got.Version != 1 || got.Status != domain.SessionCompleted {
		t.Fatalf("session version %d status %s", got.Version, got.Status)
	}
}
