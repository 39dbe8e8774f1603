package gitstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/domain"
)

const (
	// Retention is how long a changeset item stays after its Expires
	// before DynamoDB's TimeToLive may remove it: the sweep (Expired) gets
	// the first chance, so the item's removal is seen in one place.
	Retention = time.Hour
	// SweepSet is the value of dynamostore.SweepSetAttribute on changeset
	// items: their partition of dynamostore.SweepIndex, which Expired
	// queries (sessions use the others).
	SweepSet = "changeset"
	// maxDocBytes bounds a record's JSON: DynamoDB takes 400 KB an item.
	// changeset.MaxEdits edits of changeset.MaxPathBytes paths stay under.
	maxDocBytes = 350 << 10
	// maxExpiredPages bounds the index pages one Expired reads.
	maxExpiredPages = 100
)

// Records is changeset.Records on the stack's DynamoDB table: one item
// changeset#<id> per changeset (see the package documentation).
type Records struct {
	api   DynamoAPI
	table string
}

var _ changeset.Records = (*Records)(nil)

// NewRecords returns the records in table (the stack's dynamostore
// table). It makes no call.
func NewRecords(api DynamoAPI, table string) (*Records, error) {
	if err := checkTable(api, table); err != nil {
		return nil, err
	}
	return &Records{api: api, table: table}, nil
}

// validID is the changeset id format (changeset's newID): cs_ and up to
// 64 lower-case letters and digits. An id read from a tool call is checked
// before it names an item.
// recordDoc is the doc attribute: the record's JSON without its version,
// which is the item's version attribute (the fence of Put's condition).
type recordDoc struct {
	changeset.Changeset
	Version *struct{} `json:"version,omitempty"`
}

// item is cs's item, at version v.
func recordItem(cs changeset.Changeset, v int64) (map[string]types.AttributeValue, error) {
	doc, err := json.Marshal(recordDoc{Changeset: cs})
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if len(doc) > maxDocBytes {
		return nil, fmt.Errorf("the record is %d bytes of JSON, over %d", len(doc), maxDocBytes)
	}
	if cs.Expires.IsZero() {
		return nil, fmt.Errorf("the record has no expiry")
	}
	return map[string]types.AttributeValue{
		dynamostore.PartitionKey:       str(changesetPrefix + cs.ID),
		attrKind:                       str(kindChangeset),
		attrVersion:                    num(v),
		attrDoc:                        str(string(doc)),
		dynamostore.SweepSetAttribute:  str(SweepSet),
		dynamostore.ExpiresAtAttribute: num(cs.Expires.UnixMilli()),
		dynamostore.TTLAttribute:       num(epochCeil(cs.Expires.Add(Retention))),
	}, nil
}

// decodeRecord reads a changeset item; errors wrap domain.ErrCorrupt and
// never quote the item.
func decodeRecord(id string, item map[string]types.AttributeValue) (changeset.Changeset, error) {
	if kind, _ := stringAttr(item, attrKind); kind != kindChangeset {
		return changeset.Changeset{}, fmt.Errorf("%w: not a %s item", domain.ErrCorrupt, kindChangeset)
	}
	v, ok := numberAttr(item, attrVersion)
	if !ok || v < 1 {
		return changeset.Changeset{}, fmt.Errorf("%w: attribute %s is not a version", domain.ErrCorrupt, attrVersion)
	}
	doc, ok := stringAttr(item, attrDoc)
	if !ok {
		return changeset.Changeset{}, fmt.Errorf("%w: attribute %s is missing", domain.ErrCorrupt, attrDoc)
	}
	var cs changeset.Changeset
	if err := json.Unmarshal([]byte(doc), &cs); err != nil {
		return changeset.Changeset{}, fmt.Errorf("%w: doc: %s", domain.ErrCorrupt, domain.JSONErrorWithoutContent(err))
	}
	if cs.ID != id {
		return changeset.Changeset{}, fmt.Errorf("%w: doc names another changeset", domain.ErrCorrupt)
	}
	cs.Version = v
	return cs, nil
}

// Create stores cs as version 1, on condition that its id is free.
func (r *Records) Create(ctx context.Context, cs changeset.Changeset) error {
	if !changeset.ValidID(cs.ID) {
		return fmt.Errorf("gitstore: create changeset %.80q: not a changeset id", cs.ID)
	}
	cs.Version = 1
	item, err := recordItem(cs, 1)
	if err != nil {
		return fmt.Errorf("gitstore: create changeset %s: %w", cs.ID, err)
	}
	_, err = r.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(r.table), Item: item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": dynamostore.PartitionKey},
	})
	if conditionFailed(err) {
		return changeset.ErrExists
	}
	if err != nil {
		return fmt.Errorf("gitstore: create changeset %s: %w", cs.ID, dynamoError(r.table, err))
	}
	return nil
}

// Get reads changeset id with a strongly consistent GetItem. An item
// DynamoDB has not yet removed after its ttl is returned as stored: the
// Manager treats a record past Expires as gone.
func (r *Records) Get(ctx context.Context, id string) (changeset.Changeset, error) {
	if !changeset.ValidID(id) {
		return changeset.Changeset{}, changeset.ErrNotFound
	}
	out, err := r.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.table), Key: key(changesetPrefix + id), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return changeset.Changeset{}, fmt.Errorf("gitstore: get changeset %s: %w", id, dynamoError(r.table, err))
	}
	if len(out.Item) == 0 {
		return changeset.Changeset{}, changeset.ErrNotFound
	}
	cs, err := decodeRecord(id, out.Item)
	if err != nil {
		return changeset.Changeset{}, fmt.Errorf("gitstore: changeset %s: %w", id, err)
	}
	return cs, nil
}

// Put replaces changeset cs.ID with one PutItem on condition that its
// version is expect. When the condition fails, the old item DynamoDB
// returns with the failure tells ErrVersion (it exists) from ErrNotFound.
func (r *Records) Put(ctx context.Context, cs changeset.Changeset, expect int64) error {
	if !changeset.ValidID(cs.ID) {
		return changeset.ErrNotFound
	}
	cs.Version = expect + 1
	item, err := recordItem(cs, expect+1)
	if err != nil {
		return fmt.Errorf("gitstore: put changeset %s: %w", cs.ID, err)
	}
	_, err = r.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(r.table), Item: item,
		ConditionExpression:                 aws.String("#version = :expect"),
		ExpressionAttributeNames:            map[string]string{"#version": attrVersion},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":expect": num(expect)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		if len(ccf.Item) == 0 {
			return changeset.ErrNotFound
		}
		return changeset.ErrVersion
	}
	if err != nil {
		return fmt.Errorf("gitstore: put changeset %s: %w", cs.ID, dynamoError(r.table, err))
	}
	return nil
}

// Delete removes changeset id; a missing one is no error.
func (r *Records) Delete(ctx context.Context, id string) error {
	if !changeset.ValidID(id) {
		return nil
	}
	_, err := r.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.table), Key: key(changesetPrefix + id)})
	if err != nil {
		return fmt.Errorf("gitstore: delete changeset %s: %w", id, dynamoError(r.table, err))
	}
	return nil
}

// Expired lists up to limit changesets whose Expires is before t, oldest
// first: a Query of dynamostore.SweepIndex in the changeset partition
// (SweepSet) up to t, then a strongly consistent GetItem of each listed
// item, since the index lags the table (an edit a moment ago may have
// extended it). A record that does not decode is left to its ttl. No
// Scan.
func (r *Records) Expired(ctx context.Context, t time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	in := &dynamodb.QueryInput{
		TableName:                aws.String(r.table),
		IndexName:                aws.String(dynamostore.SweepIndex),
		KeyConditionExpression:   aws.String("#set = :set AND #exp <= :t"),
		ExpressionAttributeNames: map[string]string{"#set": dynamostore.SweepSetAttribute, "#exp": dynamostore.ExpiresAtAttribute},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":set": str(SweepSet), ":t": num(t.UnixMilli()),
		},
		Limit: aws.Int32(int32(min(limit, 100))),
	}
	var out []string
	for range maxExpiredPages {
		page, err := r.api.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("gitstore: list expired changesets: %w", dynamoError(r.table, err))
		}
		for _, item := range page.Items {
			pk, _ := stringAttr(item, dynamostore.PartitionKey)
			id, ok := strings.CutPrefix(pk, changesetPrefix)
			if !ok || !changeset.ValidID(id) {
				continue // not ours: the sweep must never delete it
			}
			cs, err := r.Get(ctx, id)
			if errors.Is(err, changeset.ErrNotFound) || errors.Is(err, domain.ErrCorrupt) {
				// Gone, or unreadable: the sweep never deletes what it
				// cannot read (its ttl will), nor lets it block the rest.
				continue
			}
			if err != nil {
				return nil, err
			}
			if cs.Expires.Before(t) {
				out = append(out, id)
				if len(out) == limit {
					return out, nil
				}
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
	return out, nil
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func numberAttr(item map[string]types.AttributeValue, name string) (int64, bool) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	return n, err == nil
}

// epochCeil is t in whole epoch seconds, rounded up.
func epochCeil(t time.Time) int64 {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return sec
}
