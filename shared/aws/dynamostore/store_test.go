package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
)

// marker is planted in sealed values and docs: no error may contain it.
const marker = "SECRET-MARKER-7f3a"

func newFakeStore(t *testing.T, f *fakeDynamo) *Store {
	t.Helper()
	s, err := New(f, "agentauth-test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func noMarker(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), marker) {
		t.Fatalf("error text holds item contents: %v", err)
	}
}

// markedGrant and markedSession carry the marker in their sealed values.
func markedGrant() domain.Grant {
	g := storetest.SampleGrant(storetest.NewGrantID())
	g.Token.AccessToken.Ciphertext = marker
	return g
}

func markedSession() domain.Session {
	s := storetest.SampleSession(storetest.NewSessionID())
	s.Flow.State.Ciphertext = marker
	return s
}

func gItem(t *testing.T, g domain.Grant) map[string]types.AttributeValue {
	t.Helper()
	item, err := grantItem(g)
	if err != nil {
		t.Fatal(err)
	}
	return item
}

func sItem(t *testing.T, s domain.Session) map[string]types.AttributeValue {
	t.Helper()
	item, err := sessionItem(s)
	if err != nil {
		t.Fatal(err)
	}
	return item
}

func TestNew(t *testing.T) {
	if _, err := New(nil, "agentauth"); err == nil {
		t.Fatal("New accepted a nil client")
	}
	for _, name := range []string{"", "ab", "has space", "a/b", strings.Repeat("x", 256)} {
		if _, err := New(&fakeDynamo{}, name); err == nil {
			t.Fatalf("New accepted table name %q", name)
		}
	}
	s, err := New(&fakeDynamo{}, "agentauth-prod.v1_x")
	if err != nil || s.Table() != "agentauth-prod.v1_x" {
		t.Fatalf("New: %v", err)
	}
}

func TestTableSchema(t *testing.T) {
	in := TableSchema("t1")
	if aws.ToString(in.TableName) != "t1" || in.BillingMode != types.BillingModePayPerRequest {
		t.Fatalf("schema %+v", in)
	}
	if len(in.KeySchema) != 1 || aws.ToString(in.KeySchema[0].AttributeName) != PartitionKey || in.KeySchema[0].KeyType != types.KeyTypeHash {
		t.Fatalf("key schema %+v", in.KeySchema)
	}
	attrs := map[string]types.ScalarAttributeType{}
	for _, d := range in.AttributeDefinitions {
		attrs[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	// infra/stack's table must say the same (its tests check these names).
	wantAttrs := map[string]types.ScalarAttributeType{"pk": "S", "pendingFor": "S", "sweepSet": "S", "expiresAt": "N",
		"listKey": "S", "listAll": "S", "listSort": "S"}
	if !maps.Equal(attrs, wantAttrs) {
		t.Fatalf("attributes %v, want %v", attrs, wantAttrs)
	}
	type gsi struct{ hash, sort, projection string }
	got := map[string]gsi{}
	for _, g := range in.GlobalSecondaryIndexes {
		if len(g.KeySchema) != 2 || g.KeySchema[0].KeyType != types.KeyTypeHash || g.KeySchema[1].KeyType != types.KeyTypeRange ||
			g.ProvisionedThroughput != nil || g.Projection == nil {
			t.Fatalf("index %s: %+v", aws.ToString(g.IndexName), g)
		}
		got[aws.ToString(g.IndexName)] = gsi{aws.ToString(g.KeySchema[0].AttributeName), aws.ToString(g.KeySchema[1].AttributeName), string(g.Projection.ProjectionType)}
	}
	want := map[string]gsi{
		"pending-by-target": {"pendingFor", "expiresAt", "ALL"},
		"sweep-by-expiry":   {"sweepSet", "expiresAt", "KEYS_ONLY"},
		"list-by-scope":     {"listKey", "listSort", "KEYS_ONLY"},
		"list-all":          {"listAll", "listSort", "KEYS_ONLY"},
	}
	if !maps.Equal(got, want) || len(in.LocalSecondaryIndexes) != 0 {
		t.Fatalf("indexes %v, want %v", got, want)
	}
	ttl := TimeToLiveSpec("t1")
	if aws.ToString(ttl.TimeToLiveSpecification.AttributeName) != TTLAttribute || !aws.ToBool(ttl.TimeToLiveSpecification.Enabled) {
		t.Fatalf("ttl %+v", ttl.TimeToLiveSpecification)
	}
}

// The doc holds the record minus the attributes, and a read merges them
// back into exactly the record written.
func TestItemRoundTrip(t *testing.T) {
	g := storetest.SampleGrant(storetest.NewGrantID())
	g.Version = 7
	item := gItem(t, (g))
	var doc map[string]any
	if err := json.Unmarshal([]byte(item[attrDoc].(*types.AttributeValueMemberS).Value), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "createdAt"} {
		if _, ok := doc[k]; ok {
			t.Fatalf("grant doc holds %s", k)
		}
	}
	if doc["token"].(map[string]any)["accessToken"].(map[string]any)["ciphertext"] != g.Token.AccessToken.Ciphertext {
		t.Fatal("sealed value not inline in doc")
	}
	back, err := decodeGrant(g.ID, item)
	if err != nil {
		t.Fatal(err)
	}
	if !back.CreatedAt.Equal(g.CreatedAt) || back.Version != 7 || back.ID != g.ID {
		t.Fatalf("grant round trip: %+v", back)
	}

	s := storetest.SampleSession(storetest.NewSessionID())
	at := s.CreatedAt.Add(time.Minute)
	s.Version, s.Status, s.CompletedAt, s.EventPending = 3, domain.SessionCompleted, &at, false
	item = sItem(t, (s))
	doc = nil
	if err := json.Unmarshal([]byte(item[attrDoc].(*types.AttributeValueMemberS).Value), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"version", "status", "completedAt"} {
		if _, ok := doc[k]; ok {
			t.Fatalf("session doc holds %s", k)
		}
	}
	if got := item[TTLAttribute].(*types.AttributeValueMemberN).Value; got != fmt.Sprint(s.ExpiresAt.Add(24*time.Hour).Unix()+1) {
		// ExpiresAt has nanoseconds, so the ttl rounds up.
		t.Fatalf("ttl %s", got)
	}
	sb, _, err := decodeSession(s.ID, item)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Version != 3 || sb.Status != domain.SessionCompleted || sb.CompletedAt == nil || !sb.CompletedAt.Equal(at) {
		t.Fatalf("session round trip: %+v", sb)
	}
}

func TestConditionalFailures(t *testing.T) {
	ctx := context.Background()
	g, sess := markedGrant(), markedSession()
	storedGrant := gItem(t, (func() domain.Grant { x := g; x.Version = 4; return x }()))
	storedSession := sItem(t, (sess))
	tests := []struct {
		name string
		f    *fakeDynamo
		call func(s *Store) error
		want error // nil: success
	}{
		{"PutGrant create over an existing grant",
			&fakeDynamo{put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(storedGrant) }},
			func(s *Store) error { _, err := s.PutGrant(ctx, g, 0); return err }, domain.ErrConflict},
		{"PutGrant stale version",
			&fakeDynamo{put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(storedGrant) }},
			func(s *Store) error { _, err := s.PutGrant(ctx, g, 3); return err }, domain.ErrConflict},
		{"PutGrant of an absent grant expecting a version",
			&fakeDynamo{put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(nil) }},
			func(s *Store) error { _, err := s.PutGrant(ctx, g, 3); return err }, domain.ErrConflict},
		{"PutGrant while a transaction holds the grant",
			&fakeDynamo{put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				return nil, &types.TransactionConflictException{Message: aws.String("busy")}
			}},
			func(s *Store) error { _, err := s.PutGrant(ctx, g, 3); return err }, domain.ErrConflict},
		{"CreateSession over an existing session",
			&fakeDynamo{put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(storedSession) }},
			func(s *Store) error { return s.CreateSession(ctx, sess) }, domain.ErrConflict},
		{"UpdateSession of an absent session",
			&fakeDynamo{put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(nil) }},
			func(s *Store) error { _, err := s.UpdateSession(ctx, sess); return err }, domain.ErrNotFound},
		{"UpdateSession stale version",
			&fakeDynamo{put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, ccf(storedSession) }},
			func(s *Store) error { _, err := s.UpdateSession(ctx, sess); return err }, domain.ErrConflict},
		{"DeleteSession of an absent session",
			&fakeDynamo{del: func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) { return nil, ccf(nil) }},
			func(s *Store) error { return s.DeleteSession(ctx, sess.ID) }, domain.ErrNotFound},
		{"AcquireLease held by another owner",
			&fakeDynamo{put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
				return nil, ccf(map[string]types.AttributeValue{attrOwner: str(marker), attrExpiresAt: num(time.Now().Add(time.Minute).UnixMilli())})
			}},
			func(s *Store) error { return s.AcquireLease(ctx, "refresh/x", "me", time.Minute) }, domain.ErrConflict},
		{"ReleaseLease not held: no error",
			&fakeDynamo{del: func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) { return nil, ccf(nil) }},
			func(s *Store) error { return s.ReleaseLease(ctx, "refresh/x", "me") }, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(newFakeStore(t, tc.f))
			noMarker(t, err)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			if !strings.HasPrefix(err.Error(), "dynamostore: ") {
				t.Fatalf("error without context: %v", err)
			}
		})
	}
}

// A missing table is one clear error, whatever the operation.
func TestMissingTable(t *testing.T) {
	ctx := context.Background()
	s := newFakeStore(t, missingTable())
	sess := storetest.SampleSession(storetest.NewSessionID())
	s.known.setSession(sess.ID, sessionState{version: 0, status: domain.SessionPending, doc: "{}"})
	calls := map[string]func() error{
		"GetGrant":      func() error { _, err := s.GetGrant(ctx, storetest.NewGrantID()); return err },
		"PutGrant":      func() error { _, err := s.PutGrant(ctx, storetest.SampleGrant(storetest.NewGrantID()), 0); return err },
		"ListGrants":    func() error { _, _, err := s.ListGrants(ctx); return err },
		"GetSession":    func() error { _, err := s.GetSession(ctx, storetest.NewSessionID()); return err },
		"CreateSession": func() error { return s.CreateSession(ctx, sess) },
		"DeleteSession": func() error { return s.DeleteSession(ctx, sess.ID) },
		"AcquireLease":  func() error { return s.AcquireLease(ctx, "k", "o", time.Second) },
		"ReleaseLease":  func() error { return s.ReleaseLease(ctx, "k", "o") },
		"HasRecords":    func() error { _, err := s.HasRecords(ctx); return err },
		"FindPendingSession": func() error {
			_, err := s.FindPendingSession(ctx, domain.SessionReuseKey(sess.OAuthAppRef, "x", nil, sess.Resume), time.Now())
			return err
		},
		"ListPendingSessions": func() error { _, _, err := s.ListPendingSessions(ctx, sess.Resume.Target(), time.Now()); return err },
		"ListSweepSessions": func() error {
			_, _, err := s.ListSweepSessions(ctx, domain.SweepPending, time.Now())
			return err
		},
		"CompleteSession": func() error {
			_, _, err := s.CompleteSession(ctx, sess.ID, time.Now(), storetest.SampleGrant(storetest.NewGrantID()))
			return err
		},
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, ErrTableNotFound) || !strings.Contains(err.Error(), `table "agentauth-test" does not exist`) {
			t.Errorf("%s: want ErrTableNotFound naming the table, got %v", name, err)
		}
	}
	// Other SDK errors pass through, wrapped with context.
	boom := errors.New("throttled")
	s = newFakeStore(t, &fakeDynamo{get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, boom }})
	id := storetest.NewGrantID()
	if _, err := s.GetGrant(ctx, id); !errors.Is(err, boom) || !strings.Contains(err.Error(), "get grant "+id) {
		t.Fatalf("GetGrant: %v", err)
	}
	// An AWS error's message can quote request values: only its code
	// reaches the text (awserr), and the error stays reachable.
	echo := &smithy.GenericAPIError{Code: "ValidationException", Message: "invalid value " + marker}
	s = newFakeStore(t, &fakeDynamo{get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, echo }})
	_, err := s.GetGrant(ctx, id)
	var api smithy.APIError
	if !errors.As(err, &api) || strings.Contains(err.Error(), marker) || !strings.Contains(err.Error(), "api error ValidationException") {
		t.Fatalf("GetGrant: %v", err)
	}
}

func TestCorruptItems(t *testing.T) {
	ctx := context.Background()
	g := markedGrant()
	good := gItem(t, (g))
	with := func(name string, v types.AttributeValue) map[string]types.AttributeValue {
		item := map[string]types.AttributeValue{}
		for k, x := range good {
			item[k] = x
		}
		if v == nil {
			delete(item, name)
		} else {
			item[name] = v
		}
		return item
	}
	for name, item := range map[string]map[string]types.AttributeValue{
		"bad doc":          with(attrDoc, str(`{"provider": "`+marker)),
		"doc of a type":    with(attrDoc, str(`{"subject": {"x": "`+marker+`"}}`)),
		"no version":       with(attrVersion, nil),
		"string version":   with(attrVersion, str("1")),
		"bad createdAt":    with(attrCreatedAt, str(marker)),
		"session kind":     with(attrKind, str(kindSession)),
		"no doc":           with(attrDoc, nil),
		"fractional count": with(attrVersion, &types.AttributeValueMemberN{Value: "1.5"}),
	} {
		t.Run(name, func(t *testing.T) {
			s := newFakeStore(t, &fakeDynamo{get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
				return &dynamodb.GetItemOutput{Item: item}, nil
			}})
			_, err := s.GetGrant(ctx, g.ID)
			noMarker(t, err)
			if !errors.Is(err, domain.ErrCorrupt) || !strings.Contains(err.Error(), g.ID) {
				t.Fatalf("want ErrCorrupt naming %s, got %v", g.ID, err)
			}
		})
	}

	// In a list, a bad item is reported and the rest are returned.
	other := storetest.SampleGrant(storetest.NewGrantID())
	s := newFakeStore(t, &fakeDynamo{scan: func(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		return &dynamodb.ScanOutput{Items: []map[string]types.AttributeValue{
			with(attrDoc, str("{"+marker)),
			gItem(t, (other)),
			with(PartitionKey, str("grant#../../etc")), // a key is named, so an operator can find it
		}}, nil
	}})
	list, bad, err := s.ListGrants(ctx)
	if err != nil || len(list) != 1 || list[0].ID != other.ID || len(bad) != 2 {
		t.Fatalf("ListGrants: %d grants, bad %v, err %v", len(list), bad, err)
	}
	if !errors.Is(bad[0], domain.ErrCorrupt) || !errors.Is(bad[1], domain.ErrInvalidID) {
		t.Fatalf("bad items: %v", bad)
	}
	for _, e := range bad {
		noMarker(t, e)
	}
}

// CompleteSession reads the cancellation reasons: the session's decides the
// outcome, a stale guess is retried with the item DynamoDB returned.
func TestCompleteSessionCancellation(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 2, 1, 10, 0, 0, 0, time.UTC)
	sess := markedSession()
	pending := sItem(t, (sess))
	done := func() map[string]types.AttributeValue {
		x := sess
		x.Status, x.Version = domain.SessionCompleted, 1
		return sItem(t, (x))
	}()
	newer := func() map[string]types.AttributeValue {
		x := sess
		x.Version, x.EventPending, x.StatusReason = 5, false, "touched"
		return sItem(t, (x))
	}()
	g := markedGrant()
	created := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	storedGrant := func() map[string]types.AttributeValue {
		x := g
		x.Version, x.CreatedAt = 3, created
		return gItem(t, (x))
	}()

	type script []func(in *dynamodb.TransactWriteItemsInput) error
	tests := []struct {
		name    string
		script  script
		want    error // nil: success
		calls   int
		check   func(t *testing.T, txs []*dynamodb.TransactWriteItemsInput, s domain.Session, g domain.Grant)
		errText string
	}{
		{name: "session gone", calls: 1, want: domain.ErrNotFound, script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("ConditionalCheckFailed", nil), reason("None", nil))
			}}},
		{name: "session completed by another", calls: 1, want: domain.ErrConflict, errText: "status is completed", script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("ConditionalCheckFailed", done), reason("ConditionalCheckFailed", storedGrant))
			}}},
		{name: "grant exists: retried at its version", calls: 2, script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("None", nil), reason("ConditionalCheckFailed", storedGrant))
			},
			func(in *dynamodb.TransactWriteItemsInput) error {
				put := in.TransactItems[1].Put
				if aws.ToString(put.ConditionExpression) != "#version = :v" || put.ExpressionAttributeValues[":v"].(*types.AttributeValueMemberN).Value != "3" {
					return fmt.Errorf("second attempt condition %q", aws.ToString(put.ConditionExpression))
				}
				return nil
			}},
			check: func(t *testing.T, _ []*dynamodb.TransactWriteItemsInput, _ domain.Session, got domain.Grant) {
				if got.Version != 4 || !got.CreatedAt.Equal(created) {
					t.Fatalf("grant version %d createdAt %v", got.Version, got.CreatedAt)
				}
			}},
		{name: "session changed but pending: retried from the returned item", calls: 2, script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("ConditionalCheckFailed", newer), reason("None", nil))
			},
			func(in *dynamodb.TransactWriteItemsInput) error {
				if v := in.TransactItems[0].Update.ExpressionAttributeValues[":v"].(*types.AttributeValueMemberN).Value; v != "5" {
					return fmt.Errorf("second attempt expects version %s", v)
				}
				return nil
			}},
			check: func(t *testing.T, _ []*dynamodb.TransactWriteItemsInput, got domain.Session, _ domain.Grant) {
				if got.Version != 6 || got.StatusReason != "touched" || got.Status != domain.SessionCompleted || !got.CompletedAt.Equal(at) {
					t.Fatalf("session %+v", got)
				}
			}},
		{name: "transaction conflict: retried", calls: 2, script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("TransactionConflict", nil), reason("None", nil))
			},
			func(*dynamodb.TransactWriteItemsInput) error { return nil }}},
		{name: "validation error: not retried", calls: 1, errText: "ValidationError", script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("ValidationError", nil), reason("None", nil))
			}}},
		{name: "grant validation error: not retried", calls: 1, errText: "transaction canceled (None, ValidationError)", script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("None", nil), reason("ValidationError", nil))
			}}},
		{name: "one reason instead of two: not retried", calls: 1, errText: "transaction canceled (ConditionalCheckFailed)", script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("ConditionalCheckFailed", pending))
			}}},
		{name: "not a cancellation: not retried", calls: 1, errText: "InternalServerError", script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return &types.InternalServerError{Message: aws.String("try later")}
			}}},
		{name: "session busy, then completed by another", calls: 2, want: domain.ErrConflict, errText: "status is completed", script: script{
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("ThrottlingError", nil), reason("None", nil))
			},
			func(*dynamodb.TransactWriteItemsInput) error {
				return canceled(reason("ConditionalCheckFailed", done), reason("None", nil))
			}}},
		{name: "always busy: gives up", calls: maxCompleteAttempts, want: domain.ErrConflict, script: func() script {
			var sc script
			for range maxCompleteAttempts {
				sc = append(sc, func(*dynamodb.TransactWriteItemsInput) error {
					return canceled(reason("None", nil), reason("TransactionConflict", nil))
				})
			}
			return sc
		}()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDynamo{
				get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
					return &dynamodb.GetItemOutput{Item: pending}, nil
				},
				tx: func(n int, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					if n > len(tc.script) {
						return nil, errUnexpected
					}
					if err := tc.script[n-1](in); err != nil {
						return nil, err
					}
					return &dynamodb.TransactWriteItemsOutput{}, nil
				},
			}
			s := newFakeStore(t, f)
			gotS, gotG, err := s.CompleteSession(ctx, sess.ID, at, g)
			noMarker(t, err)
			if len(f.txs) != tc.calls {
				t.Fatalf("%d transactions, want %d", len(f.txs), tc.calls)
			}
			switch {
			case tc.errText != "" && (err == nil || !strings.Contains(err.Error(), tc.errText)):
				t.Fatalf("want an error saying %q, got %v", tc.errText, err)
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("want %v, got %v", tc.want, err)
			case tc.want == nil && tc.errText == "" && err != nil:
				t.Fatal(err)
			case tc.want == nil && tc.errText != "" && (errors.Is(err, domain.ErrConflict) || errors.Is(err, domain.ErrNotFound)):
				t.Fatalf("a failure is not a conflict: %v", err)
			}
			if err == nil && tc.check != nil {
				tc.check(t, f.txs, gotS, gotG)
			}
		})
	}
}

// The transaction itself: one Update of the session and one Put of the
// grant, each conditioned and asking for the old item on failure.
func TestCompleteSessionTransaction(t *testing.T) {
	sess := storetest.SampleSession(storetest.NewSessionID())
	pending := sItem(t, (sess))
	f := &fakeDynamo{
		get: func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			return &dynamodb.GetItemOutput{Item: pending}, nil
		},
		tx: func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
			return &dynamodb.TransactWriteItemsOutput{}, nil
		},
	}
	s := newFakeStore(t, f)
	at := time.Date(2026, 2, 1, 10, 0, 0, 5, time.UTC)
	g := storetest.SampleGrant(storetest.NewGrantID())
	gotS, gotG, err := s.CompleteSession(context.Background(), sess.ID, at, g)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.txs) != 1 || len(f.txs[0].TransactItems) != 2 {
		t.Fatalf("%d transactions", len(f.txs))
	}
	up, put := f.txs[0].TransactItems[0].Update, f.txs[0].TransactItems[1].Put
	if up == nil || put == nil {
		t.Fatal("want an Update of the session and a Put of the grant")
	}
	if aws.ToString(up.ConditionExpression) != "#version = :v AND #status IN (:pending, :exchanging) AND #doc = :doc" ||
		up.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
		t.Fatalf("session update %q", aws.ToString(up.ConditionExpression))
	}
	if aws.ToString(put.ConditionExpression) != "attribute_not_exists(#pk)" ||
		put.ReturnValuesOnConditionCheckFailure != types.ReturnValuesOnConditionCheckFailureAllOld {
		t.Fatalf("grant put %q", aws.ToString(put.ConditionExpression))
	}
	if f.txs[0].ClientRequestToken != nil {
		t.Fatal("the SDK fills ClientRequestToken per call; a fixed one would make retries with new conditions fail")
	}
	if gotS.Status != domain.SessionCompleted || gotS.Version != 1 || !gotS.CompletedAt.Equal(at) || gotS.Subject != sess.Subject {
		t.Fatalf("session %+v", gotS)
	}
	if gotG.Version != 1 || !gotG.CreatedAt.Equal(g.CreatedAt) {
		t.Fatalf("grant version %d", gotG.Version)
	}
}
