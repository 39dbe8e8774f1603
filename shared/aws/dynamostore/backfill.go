package dynamostore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
)

// BackfillListIndex gives the grant, session and instance items written
// before the list indexes existed their list attributes (and an instance
// item its instance record), so that the console lists them now rather
// than at their next write (a grant that is never refreshed would never
// show). It is an operator command, like Reseal: one Scan of the table for
// those items that lack listSort, then one conditional write per item (a
// TransactWriteItems of one Update, on condition that the version is the
// one read and listSort still absent: an item written meanwhile has it
// already, and is left alone). It never rewrites doc. blobs reads the
// instance docs kept in S3 (nil: such an instance is reported unreadable).
// It returns how many items it updated and one error per item it could
// not read.
func (s *Store) BackfillListIndex(ctx context.Context, blobs Blobs) (int, []error, error) {
	return s.BackfillListIndexProgress(ctx, blobs, nil)
}

// BackfillProgress is how far a BackfillListIndex run has got.
type BackfillProgress struct {
	// Examined counts the items the scan has read (its ScannedCount),
	// those that needed nothing too: on a large table it is what moves.
	Examined int
	// Set counts the items given their list attributes.
	Set int
	// Unreadable holds the keys (pk) of the items that could not be read,
	// as found; the errors BackfillListIndex returns say why.
	Unreadable []string
}

// BackfillListIndexProgress is BackfillListIndex, calling progress (unless
// nil) with the counts so far after each page the scan reads and after
// each item it sets or cannot read. progress runs on the calling
// goroutine, between two calls to DynamoDB: a slow progress slows the
// backfill.
func (s *Store) BackfillListIndexProgress(ctx context.Context, blobs Blobs, progress func(BackfillProgress)) (int, []error, error) {
	var p BackfillProgress
	report := func() {
		if progress != nil {
			progress(BackfillProgress{Examined: p.Examined, Set: p.Set, Unreadable: slices.Clone(p.Unreadable)})
		}
	}
	t := turnStore{s: s, blobs: blobs}
	in := &dynamodb.ScanInput{
		TableName:                aws.String(s.table),
		ConsistentRead:           aws.Bool(true),
		FilterExpression:         aws.String("#kind IN (:grant, :session, :inst) AND attribute_not_exists(#ls)"),
		ExpressionAttributeNames: map[string]string{"#kind": attrKind, "#ls": attrListSort},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":grant": str(kindGrant), ":session": str(kindSession), ":inst": str(kindTurnInstance),
		},
	}
	if s.scanLimit > 0 {
		in.Limit = aws.Int32(s.scanLimit)
	}
	n := 0
	var bad []error
	for {
		out, err := s.api.Scan(ctx, in)
		if err != nil {
			return n, bad, fmt.Errorf("dynamostore: backfill list index: %w", s.apiError(err))
		}
		p.Examined += int(out.ScannedCount)
		report()
		for _, item := range out.Items {
			attrs, err := t.listAttrsOf(ctx, item)
			if err != nil {
				pk, _ := getPK(item)
				bad = append(bad, fmt.Errorf("dynamostore: backfill list index: item %.80q: %w", pk, err))
				p.Unreadable = append(p.Unreadable, pk)
				report()
				continue
			}
			ok, err := s.setListAttrs(ctx, item, attrs)
			if err != nil {
				return n, bad, fmt.Errorf("dynamostore: backfill list index: %w", err)
			}
			if ok {
				n++
				p.Set = n
				report()
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return n, bad, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// listAttrsOf decodes a grant, session or instance item and returns the
// list attributes its writes would give it.
func (t turnStore) listAttrsOf(ctx context.Context, item map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	pk, _ := getPK(item)
	kind, _, _ := getS(item, attrKind)
	switch kind {
	case kindGrant:
		id := strings.TrimPrefix(pk, grantPrefix)
		if err := domain.ValidateGrantID(id); err != nil {
			return nil, err
		}
		g, err := decodeGrant(id, item)
		if err != nil {
			return nil, err
		}
		return grantListAttrs(g), nil
	case kindSession:
		id := strings.TrimPrefix(pk, sessionPrefix)
		if err := domain.ValidateSessionID(id); err != nil {
			return nil, err
		}
		sess, _, err := decodeSession(id, item)
		if err != nil {
			return nil, err
		}
		return sessionListAttrs(sess), nil
	case kindTurnInstance:
		h, ok := strings.CutPrefix(pk, turnInstPrefix)
		if !ok {
			return nil, fmt.Errorf("%w: not an instance key", domain.ErrCorrupt)
		}
		in, err := t.listedInstance(ctx, h, item)
		if err != nil {
			return nil, err
		}
		return instanceListAttrs(h, in)
	}
	return nil, fmt.Errorf("%w: kind %.40q", domain.ErrCorrupt, kind)
}

// setListAttrs sets attrs on item's record while its version is item's and
// it has no listSort; false when that condition failed.
func (s *Store) setListAttrs(ctx context.Context, item, attrs map[string]types.AttributeValue) (bool, error) {
	pk, _ := getPK(item)
	names := map[string]string{"#v": attrVersion, "#ls": attrListSort}
	values := map[string]types.AttributeValue{":v": item[attrVersion]}
	var set []string
	for i, name := range sortedKeys(attrs) {
		names[fmt.Sprintf("#a%d", i)] = name
		values[fmt.Sprintf(":a%d", i)] = attrs[name]
		set = append(set, fmt.Sprintf("#a%d = :a%d", i, i))
	}
	if values[":v"] == nil {
		return false, fmt.Errorf("item %.80q: %w: attribute %s is missing", pk, domain.ErrCorrupt, attrVersion)
	}
	_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
		TableName:                 aws.String(s.table),
		Key:                       key(pk),
		UpdateExpression:          aws.String("SET " + strings.Join(set, ", ")),
		ConditionExpression:       aws.String("#v = :v AND attribute_not_exists(#ls)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	}}}})
	if err == nil {
		return true, nil
	}
	reasons, err := s.cancellation(err, 1)
	if err != nil {
		return false, fmt.Errorf("item %.80q: %w", pk, err)
	}
	if reasonKindOf(reasons[0]) == reasonCondition {
		return false, nil // written (or deleted) meanwhile
	}
	return false, fmt.Errorf("item %.80q: transaction canceled (%s)", pk, reasonCodes(reasons))
}

func sortedKeys(m map[string]types.AttributeValue) []string { return slices.Sorted(maps.Keys(m)) }
