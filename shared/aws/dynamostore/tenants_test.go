package dynamostore

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strconv"
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

// tenantTable is an in-memory table that answers the requests the tenant
// store makes, and only those: any other expression is errUnexpected. It
// lets the conformance suite check the store's own logic (keys, decoding,
// pagination, sorting, retries) without an emulator; the integration
// tests hold the same suite to DynamoDB's semantics.
type tenantTable struct {
	mu    sync.Mutex
	items map[string]map[string]types.AttributeValue
	// conflicts cancels the next n transactions as DynamoDB does when
	// another transaction holds an item.
	conflicts int
}

func newTenantTable() *tenantTable {
	return &tenantTable{items: map[string]map[string]types.AttributeValue{}}
}

// api is a fakeDynamo backed by the table.
func (m *tenantTable) api() *fakeDynamo {
	return &fakeDynamo{get: m.get, tx: m.tx, scan: m.scan}
}

func (m *tenantTable) store(t *testing.T, api DynamoAPI) *Store {
	t.Helper()
	s, err := New(api, "agentauth-test")
	if err != nil {
		t.Fatal(err)
	}
	s.scanLimit = 3 // several pages for most tests
	return s
}

func pkOf(k map[string]types.AttributeValue) string {
	v, _ := k[PartitionKey].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

func (m *tenantTable) get(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
	if !aws.ToBool(in.ConsistentRead) || in.ProjectionExpression != nil {
		return nil, errUnexpected
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return &dynamodb.GetItemOutput{Item: maps.Clone(m.items[pkOf(in.Key)])}, nil
}

func (m *tenantTable) tx(_ int, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	failed := false
	for i, op := range in.TransactItems {
		code := "None"
		switch {
		case op.Put != nil && op.Put.ConditionExpression == nil:
		case op.Delete != nil && aws.ToString(op.Delete.ConditionExpression) == "attribute_exists(#pk)" &&
			reflect.DeepEqual(op.Delete.ExpressionAttributeNames, map[string]string{"#pk": PartitionKey}):
			if m.items[pkOf(op.Delete.Key)] == nil {
				code, failed = "ConditionalCheckFailed", true
			}
		case op.Update != nil && aws.ToString(op.Update.UpdateExpression) == "SET #kind = :kind ADD #revision :one" &&
			op.Update.ConditionExpression == nil:
		default:
			return nil, errUnexpected
		}
		if m.conflicts > 0 && op.Update != nil {
			code, failed = "TransactionConflict", true
		}
		reasons[i] = types.CancellationReason{Code: aws.String(code)}
	}
	if m.conflicts > 0 {
		m.conflicts--
	}
	if failed {
		return nil, canceled(reasons...)
	}
	for _, op := range in.TransactItems {
		switch {
		case op.Put != nil:
			m.items[pkOf(op.Put.Item)] = maps.Clone(op.Put.Item)
		case op.Delete != nil:
			delete(m.items, pkOf(op.Delete.Key))
		case op.Update != nil:
			u := op.Update
			pk := pkOf(u.Key)
			item := maps.Clone(m.items[pk])
			if item == nil {
				item = maps.Clone(u.Key)
			}
			item[u.ExpressionAttributeNames["#kind"]] = u.ExpressionAttributeValues[":kind"]
			rev := u.ExpressionAttributeNames["#revision"]
			var n int64
			if v, ok := item[rev].(*types.AttributeValueMemberN); ok {
				n, _ = strconv.ParseInt(v.Value, 10, 64)
			}
			one, _ := strconv.ParseInt(u.ExpressionAttributeValues[":one"].(*types.AttributeValueMemberN).Value, 10, 64)
			item[rev] = num(n + one)
			m.items[pk] = item
		}
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// scan examines items in key order, at most Limit a page, as DynamoDB's
// pages do (in its own order).
func (m *tenantTable) scan(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
	if !aws.ToBool(in.ConsistentRead) || aws.ToString(in.FilterExpression) != "#kind = :kind" {
		return nil, errUnexpected
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	kind := in.ExpressionAttributeValues[":kind"]
	keys := slices.Sorted(maps.Keys(m.items))
	start := 0
	if in.ExclusiveStartKey != nil {
		after := pkOf(in.ExclusiveStartKey)
		start, _ = slices.BinarySearch(keys, after)
		if start < len(keys) && keys[start] == after {
			start++
		}
	}
	end := len(keys)
	if in.Limit != nil && start+int(*in.Limit) < end {
		end = start + int(*in.Limit)
	}
	out := &dynamodb.ScanOutput{}
	for _, k := range keys[start:end] {
		if reflect.DeepEqual(m.items[k][in.ExpressionAttributeNames["#kind"]], kind) {
			out.Items = append(out.Items, maps.Clone(m.items[k]))
		}
	}
	if end < len(keys) {
		out.LastEvaluatedKey = key(keys[end-1])
	}
	return out, nil
}

func TestTenantConformanceFake(t *testing.T) {
	storetest.RunTenantStore(t, func(t *testing.T) domain.TenantStore {
		m := newTenantTable()
		return m.store(t, m.api())
	})
}

func TestTenantConformanceFakeTwoStores(t *testing.T) {
	storetest.RunTenantStorePair(t, func(t *testing.T) (domain.TenantStore, domain.TenantStore) {
		m := newTenantTable()
		return m.store(t, m.api()), m.store(t, m.api())
	})
}

func TestTenantWriteRetriesConflicts(t *testing.T) {
	ctx := context.Background()
	m := newTenantTable()
	f := m.api()
	s := m.store(t, f)
	r := storetest.SampleTenantResource("acme", domain.TenantKindTool, "menu:list")

	m.conflicts = 3
	if err := s.PutTenantResource(ctx, r); err != nil {
		t.Fatalf("put through three conflicts: %v", err)
	}
	if len(f.txs) != 4 {
		t.Fatalf("%d transactions, want 4", len(f.txs))
	}
	for i, in := range f.txs[1:] {
		if in == f.txs[i] {
			t.Fatal("a retry reused the input, and with it the SDK's idempotency token")
		}
	}
	if rev, _ := s.TenantRevision(ctx); rev != 1 {
		t.Fatalf("revision %d, want 1", rev)
	}

	m.conflicts = 1 << 30
	err := s.DeleteTenantResource(ctx, r.Tenant, r.Kind, r.Name)
	if !errors.Is(err, domain.ErrConflict) || !strings.Contains(err.Error(), "gave up") {
		t.Fatalf("delete through endless conflicts: %v", err)
	}
	ctx2, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if err := s.PutTenantResource(ctx2, r); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("put after the context ended: %v", err)
	}
}

func TestTenantCancellations(t *testing.T) {
	ctx := context.Background()
	r := storetest.SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	tests := []struct {
		name    string
		reasons []types.CancellationReason
		want    error
	}{
		{"delete of an absent upload", []types.CancellationReason{reason("ConditionalCheckFailed", nil), reason("None", nil)}, domain.ErrNotFound},
		{"validation", []types.CancellationReason{reason("ValidationError", nil), reason("None", nil)}, nil},
		{"revision condition", []types.CancellationReason{reason("None", nil), reason("ConditionalCheckFailed", nil)}, nil},
		{"no reasons", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDynamo{tx: func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
				return nil, canceled(tc.reasons...)
			}}
			s := newFakeStore(t, f)
			err := s.DeleteTenantResource(ctx, r.Tenant, r.Kind, r.Name)
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, err)
			}
			if tc.want == nil && (err == nil || errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrConflict)) {
				t.Fatalf("want a plain error, got %v", err)
			}
			if len(f.txs) != 1 {
				t.Fatalf("%d transactions, want 1", len(f.txs))
			}
		})
	}
	// A put has no condition: a failed one is not ErrNotFound.
	f := &fakeDynamo{tx: func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return nil, canceled(reason("ConditionalCheckFailed", nil), reason("None", nil))
	}}
	if err := newFakeStore(t, f).PutTenantResource(ctx, r); err == nil || errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("put: %v", err)
	}
}

func TestTenantMissingTable(t *testing.T) {
	ctx := context.Background()
	f := missingTable()
	f.put, f.del = nil, nil // the tenant store never calls them: errUnexpected if it does
	s := newFakeStore(t, f)
	r := storetest.SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	_, _, lerr := s.ListTenantResources(ctx)
	_, rerr := s.TenantRevision(ctx)
	for _, err := range []error{
		s.PutTenantResource(ctx, r), s.DeleteTenantResource(ctx, r.Tenant, r.Kind, r.Name), lerr, rerr,
	} {
		if !errors.Is(err, ErrTableNotFound) || !strings.Contains(err.Error(), "agentauth-test") {
			t.Fatalf("want ErrTableNotFound naming the table, got %v", err)
		}
	}
}

// TestTenantCorruptItems: an unreadable item is skipped and reported with
// ErrCorrupt, the readable ones are still listed, and no error holds a
// spec.
func TestTenantCorruptItems(t *testing.T) {
	ctx := context.Background()
	good := storetest.SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	good.Spec = []byte(`{"secret-ish":"` + marker + `"}`)
	tests := []struct {
		name  string
		spoil func(item map[string]types.AttributeValue)
	}{
		{"moved to another tenant's key", func(item map[string]types.AttributeValue) {
			item[PartitionKey] = str(tenantPK("beta", good.Kind, good.Name))
		}},
		{"key without parts", func(item map[string]types.AttributeValue) { item[PartitionKey] = str(tenantResPrefix + "acme") }},
		{"key with a bad name", func(item map[string]types.AttributeValue) {
			item[PartitionKey] = str(tenantResPrefix + "acme#Tool#../x")
		}},
		{"spec not JSON", func(item map[string]types.AttributeValue) { item[attrSpec] = str(`{"x":"` + marker) }},
		{"spec a number", func(item map[string]types.AttributeValue) {
			item[attrSpec] = &types.AttributeValueMemberN{Value: "1"}
		}},
		{"no updatedAt", func(item map[string]types.AttributeValue) { delete(item, attrUpdatedAt) }},
		{"updatedAt not a time", func(item map[string]types.AttributeValue) { item[attrUpdatedAt] = str(marker) }},
		{"name differs from key", func(item map[string]types.AttributeValue) { item[attrName] = str("menu:other") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newTenantTable()
			s := m.store(t, m.api())
			if err := s.PutTenantResource(ctx, good); err != nil {
				t.Fatal(err)
			}
			other := storetest.SampleTenantResource("acme", domain.TenantKindSkill, "refunds")
			if err := s.PutTenantResource(ctx, other); err != nil {
				t.Fatal(err)
			}
			item := m.items[tenantPK(good.Tenant, good.Kind, good.Name)]
			delete(m.items, tenantPK(good.Tenant, good.Kind, good.Name))
			tc.spoil(item)
			m.items[pkOf(item)] = item
			got, bad, err := s.ListTenantResources(ctx)
			if err != nil || len(got) != 1 || got[0].Name != "refunds" {
				t.Fatalf("listed %v, %v: want the readable upload only", got, err)
			}
			if len(bad) != 1 || !errors.Is(bad[0], domain.ErrCorrupt) {
				t.Fatalf("unreadable = %v, want one ErrCorrupt", bad)
			}
			noMarker(t, bad[0])
		})
	}
	m := newTenantTable()
	s := m.store(t, m.api())
	m.items[tenantRevisionPK] = map[string]types.AttributeValue{PartitionKey: str(tenantRevisionPK), attrKind: str(kindTenantRevision), attrRevision: str("7")}
	if _, err := s.TenantRevision(ctx); !errors.Is(err, domain.ErrCorrupt) {
		t.Fatalf("revision not a number: %v", err)
	}
}

// TestTenantRequests pins the requests: one transaction per write over
// the upload and the revision, one consistent GetItem per revision read.
func TestTenantRequests(t *testing.T) {
	ctx := context.Background()
	m := newTenantTable()
	f := m.api()
	s := m.store(t, f)
	r := storetest.SampleTenantResource("acme", domain.TenantKindTool, "menu:list")
	if err := s.PutTenantResource(ctx, r); err != nil {
		t.Fatal(err)
	}
	in := f.txs[0]
	if len(in.TransactItems) != 2 || in.TransactItems[0].Put == nil || in.TransactItems[1].Update == nil {
		t.Fatalf("put transaction %+v", in.TransactItems)
	}
	want := map[string]types.AttributeValue{
		PartitionKey: str("tenantres#acme#Tool#menu:list"), attrKind: str("TenantResource"),
		attrTenant: str("acme"), attrResourceKind: str("Tool"), attrName: str("menu:list"),
		attrSpec: str(string(r.Spec)), attrUpdatedAt: str("2026-01-31T09:10:01.123456789Z"),
	}
	if got := in.TransactItems[0].Put.Item; !reflect.DeepEqual(got, want) {
		t.Fatalf("item %v, want %v", got, want)
	}
	if got := pkOf(in.TransactItems[1].Update.Key); got != "tenantrev" {
		t.Fatalf("revision key %q", got)
	}
}
