package gitstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/domain"
)

func commitHash(s string) plumbing.Hash {
	return plumbing.ComputeHash(plumbing.CommitObject, []byte(s))
}

// TestHeadSwap: the head item's compare-and-swap, as SwapHead's
// documentation says it.
func TestHeadSwap(t *testing.T) {
	r, _, _, db := fakeBackends(t)
	ctx := context.Background()
	c1, c2, c3 := commitHash("1"), commitHash("2"), commitHash("3")
	if _, err := r.Head(ctx); err != changeset.ErrNoRevision {
		t.Fatalf("no head item: %v", err)
	}
	if err := r.SwapHead(ctx, c1, c2); err != changeset.ErrHeadMoved {
		t.Fatalf("a swap from a commit when there is none: %v", err)
	}
	if err := r.SwapHead(ctx, plumbing.ZeroHash, c1); err != nil {
		t.Fatal(err)
	}
	if h, err := r.Head(ctx); err != nil || h != c1 {
		t.Fatalf("head %s %v", h, err)
	}
	for _, tc := range []struct {
		name     string
		old, new plumbing.Hash
	}{{"from none when there is one", plumbing.ZeroHash, c2}, {"from a stale commit", c3, c2}} {
		if err := r.SwapHead(ctx, tc.old, tc.new); err != changeset.ErrHeadMoved {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	if err := r.SwapHead(ctx, c1, c2); err != nil {
		t.Fatal(err)
	}
	if h, err := r.Head(ctx); err != nil || h != c2 {
		t.Fatalf("head %s %v", h, err)
	}
	if err := r.SwapHead(ctx, c2, plumbing.ZeroHash); err == nil {
		t.Fatal("a swap to the zero hash")
	}
	it := db.get("bundle#main#head")
	for name, want := range map[string]string{"kind": "BundleHead", "commit": c2.String(), "previous": c1.String()} {
		if got, _ := stringAttr(it, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, ok := stringAttr(it, "updatedAt"); !ok {
		t.Error("no updatedAt")
	}
	if db.inconsistent != 0 {
		t.Fatalf("%d eventually consistent reads", db.inconsistent)
	}
	// Another bundle's head is another item.
	other, err := NewRepo(r.objs, db, testTable, "staging")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Head(ctx); err != changeset.ErrNoRevision {
		t.Fatalf("another bundle's head: %v", err)
	}
}

// TestHeadErrors: a missing table, a failed call and a corrupt item are
// errors that say so, without the item or the SDK's message.
func TestHeadErrors(t *testing.T) {
	r, _, _, db := fakeBackends(t)
	ctx := context.Background()
	noTable, err := NewRepo(r.objs, db, "other-table", "main")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noTable.Head(ctx); !errors.Is(err, dynamostore.ErrTableNotFound) || !strings.Contains(err.Error(), "other-table") {
		t.Fatalf("head on a missing table: %v", err)
	}
	if err := noTable.SwapHead(ctx, plumbing.ZeroHash, commitHash("1")); !errors.Is(err, dynamostore.ErrTableNotFound) {
		t.Fatalf("swap on a missing table: %v", err)
	}
	db.fail = func(string) error { return apiError("DynamoDB", "GetItem", 500, "InternalServerError") }
	_, err = r.Head(ctx)
	if err == nil || strings.Contains(err.Error(), leak) || !strings.Contains(err.Error(), "InternalServerError") {
		t.Fatalf("a failed read: %v", err)
	}
	db.fail = nil
	for name, it := range map[string]item{
		"not a hash":   {"commit": &dtypes.AttributeValueMemberS{Value: leak}},
		"zero hash":    {"commit": &dtypes.AttributeValueMemberS{Value: plumbing.ZeroHash.String()}},
		"a number":     {"commit": &dtypes.AttributeValueMemberN{Value: "1"}},
		"another kind": {"kind": &dtypes.AttributeValueMemberS{Value: "Changeset"}, "commit": &dtypes.AttributeValueMemberS{Value: commitHash("1").String()}},
	} {
		if _, ok := it["kind"]; !ok {
			it["kind"] = &dtypes.AttributeValueMemberS{Value: "BundleHead"}
		}
		it[dynamostore.PartitionKey] = &dtypes.AttributeValueMemberS{Value: "bundle#main#head"}
		db.set(it)
		if _, err := r.Head(ctx); !errors.Is(err, domain.ErrCorrupt) || strings.Contains(err.Error(), leak) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestSwapConditions: the writes are the conditional PutItems the
// documentation names.
func TestSwapConditions(t *testing.T) {
	r, _, _, db := fakeBackends(t)
	ctx := context.Background()
	r.SwapHead(ctx, plumbing.ZeroHash, commitHash("1"))
	r.SwapHead(ctx, commitHash("1"), commitHash("2"))
	if len(db.puts) != 2 {
		t.Fatalf("%d puts", len(db.puts))
	}
	if c := aws.ToString(db.puts[0].ConditionExpression); c != "attribute_not_exists(#pk)" {
		t.Errorf("first swap: %s", c)
	}
	if c := aws.ToString(db.puts[1].ConditionExpression); c != "#commit = :old" || db.puts[1].ExpressionAttributeNames["#commit"] != "commit" {
		t.Errorf("second swap: %s", c)
	}
}

func TestNewRepo(t *testing.T) {
	objs := newObjects(t, newFakeS3())
	db := newFakeDynamo(testTable)
	for _, name := range []string{"", "a#b", "a b", strings.Repeat("a", 65), "ü"} {
		if _, err := NewRepo(objs, db, testTable, name); err == nil {
			t.Errorf("name %q taken", name)
		}
	}
	if _, err := NewRepo(nil, db, testTable, "main"); err == nil {
		t.Error("nil objects")
	}
	if _, err := NewRepo(objs, nil, testTable, "main"); err == nil {
		t.Error("nil client")
	}
	if _, err := NewRepo(objs, db, "", "main"); err == nil {
		t.Error("no table")
	}
	if _, err := NewRecords(db, ""); err == nil {
		t.Error("records without a table")
	}
}
