package gitstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/domain"
)

var t0 = time.Date(2026, 11, 28, 3, 0, 0, 500_000_000, time.UTC)

func record(id string, expires time.Time) changeset.Changeset {
	return changeset.Changeset{ID: id, Owner: changeset.Owner{Swarm: "s", Instance: "i", Agent: "a"}, Base: commitHash("1").String(),
		Status: changeset.StatusOpen, Created: t0, Updated: t0, Expires: expires,
		Edits: map[string]changeset.Edit{"tools/x.yaml": {Blob: commitHash("blob").String()}}}
}

func nAttr(t *testing.T, it item, name string) int64 {
	t.Helper()
	n, ok := numberAttr(it, name)
	if !ok {
		t.Fatalf("attribute %s missing", name)
	}
	return n
}

// TestRecords: create, get, put and delete, with their conditions.
func TestRecords(t *testing.T) {
	_, recs, _, db := fakeBackends(t)
	ctx := context.Background()
	cs := record("cs_one", t0.Add(time.Hour))
	cs.Version = 7 // Create stores version 1 whatever it is given
	if err := recs.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if err := recs.Create(ctx, cs); err != changeset.ErrExists {
		t.Fatalf("a second create: %v", err)
	}
	got, err := recs.Get(ctx, "cs_one")
	if err != nil || got.Version != 1 || got.Base != cs.Base || !got.Expires.Equal(cs.Expires) || got.Edits["tools/x.yaml"] != cs.Edits["tools/x.yaml"] {
		t.Fatalf("get: %+v %v", got, err)
	}
	it := db.get("changeset#cs_one")
	doc, _ := stringAttr(it, "doc")
	if kind, _ := stringAttr(it, "kind"); kind != "Changeset" || strings.Contains(doc, `"version"`) {
		t.Fatalf("item: kind %q, doc %s", kind, doc)
	}
	if set, _ := stringAttr(it, dynamostore.SweepSetAttribute); set != SweepSet {
		t.Fatalf("sweepSet %q", set)
	}
	if got, want := nAttr(t, it, dynamostore.ExpiresAtAttribute), cs.Expires.UnixMilli(); got != want {
		t.Fatalf("expiresAt %d, want %d", got, want)
	}
	// Expires + 1 h in epoch seconds, rounded up.
	if got, want := nAttr(t, it, dynamostore.TTLAttribute), t0.Add(2*time.Hour).Unix()+1; got != want {
		t.Fatalf("ttl %d, want %d", got, want)
	}

	got.Status = changeset.StatusCommitted
	got.Expires = t0.Add(24 * time.Hour)
	if err := recs.Put(ctx, got, 1); err != nil {
		t.Fatal(err)
	}
	if err := recs.Put(ctx, got, 1); err != changeset.ErrVersion {
		t.Fatalf("a put from a stale version: %v", err)
	}
	again, err := recs.Get(ctx, "cs_one")
	if err != nil || again.Version != 2 || again.Status != changeset.StatusCommitted {
		t.Fatalf("after put: %+v %v", again, err)
	}
	if got := nAttr(t, db.get("changeset#cs_one"), dynamostore.TTLAttribute); got != t0.Add(25*time.Hour).Unix()+1 {
		t.Fatalf("ttl after put %d", got)
	}
	if err := recs.Put(ctx, record("cs_none", t0), 1); err != changeset.ErrNotFound {
		t.Fatalf("a put of a missing record: %v", err)
	}
	if err := recs.Delete(ctx, "cs_one"); err != nil {
		t.Fatal(err)
	}
	if err := recs.Delete(ctx, "cs_one"); err != nil {
		t.Fatalf("deleting a missing record: %v", err)
	}
	if _, err := recs.Get(ctx, "cs_one"); err != changeset.ErrNotFound {
		t.Fatalf("after delete: %v", err)
	}
	if db.inconsistent != 0 {
		t.Fatalf("%d eventually consistent reads", db.inconsistent)
	}
}

// TestRecordIDs: an id that is not one of ours names no item and makes
// no call.
func TestRecordIDs(t *testing.T) {
	_, recs, _, db := fakeBackends(t)
	ctx := context.Background()
	for _, id := range []string{"", "cs_", "../../etc/passwd", "cs_ABC", "cs_a#b", "changeset#cs_a", "cs_" + strings.Repeat("a", 65)} {
		if _, err := recs.Get(ctx, id); err != changeset.ErrNotFound {
			t.Errorf("get %q: %v", id, err)
		}
		if err := recs.Put(ctx, record(id, t0), 1); err != changeset.ErrNotFound {
			t.Errorf("put %q: %v", id, err)
		}
		if err := recs.Delete(ctx, id); err != nil {
			t.Errorf("delete %q: %v", id, err)
		}
		if err := recs.Create(ctx, record(id, t0)); err == nil {
			t.Errorf("create %q", id)
		}
	}
	for _, op := range []string{"GetItem", "PutItem", "DeleteItem"} {
		if n := db.count(op); n != 0 {
			t.Errorf("%d %s calls", n, op)
		}
	}
}

// TestRecordErrors: a missing table, a failed call and a corrupt item say
// so, never with the record's content or the SDK's message.
func TestRecordErrors(t *testing.T) {
	_, recs, _, db := fakeBackends(t)
	ctx := context.Background()
	noTable, err := NewRecords(db, "other-table")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noTable.Get(ctx, "cs_one"); !errors.Is(err, dynamostore.ErrTableNotFound) {
		t.Fatalf("get: %v", err)
	}
	if _, err := noTable.Expired(ctx, t0, 10); !errors.Is(err, dynamostore.ErrTableNotFound) {
		t.Fatalf("expired: %v", err)
	}
	db.fail = func(op string) error { return apiError("DynamoDB", op, 400, "ValidationException") }
	for name, err := range map[string]error{
		"create": recs.Create(ctx, record("cs_one", t0)),
		"put":    recs.Put(ctx, record("cs_one", t0), 1),
		"delete": recs.Delete(ctx, "cs_one"),
	} {
		if err == nil || strings.Contains(err.Error(), leak) || !strings.Contains(err.Error(), "ValidationException") || !strings.Contains(err.Error(), "cs_one") {
			t.Errorf("%s: %v", name, err)
		}
	}
	db.fail = nil
	if err := recs.Create(ctx, record("cs_one", time.Time{})); err == nil {
		t.Error("a record without an expiry")
	}
	big := record("cs_big", t0)
	for i := range 2000 {
		big.Edits[fmt.Sprintf("tools/%0200d.yaml", i)] = changeset.Edit{Deleted: true}
	}
	if err := recs.Create(ctx, big); err == nil || !strings.Contains(err.Error(), "over") {
		t.Errorf("a record over the item size: %v", err)
	}
	good := func() item {
		it, err := recordItem(record("cs_one", t0), 3)
		if err != nil {
			t.Fatal(err)
		}
		return it
	}
	for name, change := range map[string]func(item){
		"doc not JSON":      func(it item) { it["doc"] = &dtypes.AttributeValueMemberS{Value: "{" + leak} },
		"doc of another id": func(it item) { it["doc"] = &dtypes.AttributeValueMemberS{Value: `{"id":"cs_two"}`} },
		"no version":        func(it item) { delete(it, "version") },
		"version a string":  func(it item) { it["version"] = &dtypes.AttributeValueMemberS{Value: "3"} },
		"another kind":      func(it item) { it["kind"] = &dtypes.AttributeValueMemberS{Value: "BundleHead"} },
		"no doc":            func(it item) { delete(it, "doc") },
	} {
		it := good()
		change(it)
		db.set(it)
		if _, err := recs.Get(ctx, "cs_one"); !errors.Is(err, domain.ErrCorrupt) || strings.Contains(err.Error(), leak) {
			t.Errorf("%s: %v", name, err)
		}
	}
	db.set(good())
	if got, err := recs.Get(ctx, "cs_one"); err != nil || got.Version != 3 {
		t.Fatalf("the sound item: %+v %v", got, err)
	}
}

// TestExpired: a query of the sweep index, each listed item read again;
// what the index lists but the table has extended, and what is not a
// changeset item, are left out; at most limit, across pages.
func TestExpired(t *testing.T) {
	_, recs, _, db := fakeBackends(t)
	ctx := context.Background()
	for i := range 12 {
		if err := recs.Create(ctx, record(fmt.Sprintf("cs_old%02d", i), t0.Add(time.Duration(i)*time.Minute))); err != nil {
			t.Fatal(err)
		}
	}
	if err := recs.Create(ctx, record("cs_live", t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	// cs_old03 was just extended; the index still has its old expiry.
	ext, _ := recs.Get(ctx, "cs_old03")
	ext.Expires = t0.Add(2 * time.Hour)
	if err := recs.Put(ctx, ext, ext.Version); err != nil {
		t.Fatal(err)
	}
	db.staleIndex["changeset#cs_old03"] = t0.Add(3 * time.Minute).UnixMilli()
	// An item in the partition that is not a changeset's.
	db.set(item{dynamostore.PartitionKey: str("session#x"), dynamostore.SweepSetAttribute: str(SweepSet), dynamostore.ExpiresAtAttribute: num(0)})
	// A changeset item that does not decode: left to its ttl.
	db.set(item{dynamostore.PartitionKey: str("changeset#cs_bad"), "kind": str("Changeset"), "version": num(1), "doc": str("{" + leak),
		dynamostore.SweepSetAttribute: str(SweepSet), dynamostore.ExpiresAtAttribute: num(0)})
	// cs_old11 expires exactly at t: not before it.
	at := t0.Add(11 * time.Minute)
	db.pageSize = 3

	all, err := recs.Expired(ctx, at, 100)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"cs_old00", "cs_old01", "cs_old02", "cs_old04", "cs_old05", "cs_old06", "cs_old07", "cs_old08", "cs_old09", "cs_old10"}
	if !slices.Equal(all, want) {
		t.Fatalf("expired %v, want %v", all, want)
	}
	some, err := recs.Expired(ctx, at, 4)
	if err != nil || !slices.Equal(some, want[:4]) {
		t.Fatalf("limit 4: %v %v", some, err)
	}
	if none, err := recs.Expired(ctx, at, 0); err != nil || len(none) != 0 {
		t.Fatalf("limit 0: %v %v", none, err)
	}
	if none, err := recs.Expired(ctx, t0, 10); err != nil || len(none) != 0 {
		t.Fatalf("nothing before t0: %v %v", none, err)
	}
	if db.inconsistent != 0 {
		t.Fatalf("%d eventually consistent reads", db.inconsistent)
	}

	// The Manager's sweep removes what Expired lists.
	m := &changeset.Manager{Records: recs, Now: func() time.Time { return at }}
	n, err := m.Sweep(ctx, 100)
	if err != nil || n != len(want) {
		t.Fatalf("sweep: %d %v", n, err)
	}
	for _, id := range []string{"cs_old03", "cs_old11", "cs_live"} {
		if _, err := recs.Get(ctx, id); err != nil {
			t.Fatalf("%s after the sweep: %v", id, err)
		}
	}
	if db.get("session#x") == nil || db.get("changeset#cs_bad") == nil {
		t.Fatal("the sweep removed an item that is not a changeset's")
	}
}

func TestEpochCeil(t *testing.T) {
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{{time.Unix(100, 0), 100}, {time.Unix(100, 1), 101}, {time.Unix(100, 999_999_999), 101}} {
		if got := epochCeil(tc.t); got != tc.want {
			t.Errorf("epochCeil(%s) = %d, want %s", tc.t, got, strconv.FormatInt(tc.want, 10))
		}
	}
}
