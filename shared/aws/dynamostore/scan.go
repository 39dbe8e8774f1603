package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
)

// scanKind calls each for every item of kind, page by page, with
// consistent reads. An item whose key is not a valid id of the kind, or
// that each fails on, is reported in the returned list and skipped: one
// bad item never hides the rest.
func (s *Store) scanKind(ctx context.Context, kind, prefix string, valid func(string) error,
	each func(id string, item map[string]types.AttributeValue) error) ([]error, error) {
	var bad []error
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(s.table),
		ConsistentRead:            aws.Bool(true),
		FilterExpression:          aws.String("#kind = :kind"),
		ExpressionAttributeNames:  map[string]string{"#kind": attrKind},
		ExpressionAttributeValues: map[string]types.AttributeValue{":kind": str(kind)},
	}
	if s.scanLimit > 0 {
		in.Limit = aws.Int32(s.scanLimit)
	}
	for {
		out, err := s.api.Scan(ctx, in)
		if err != nil {
			return nil, s.apiError(err)
		}
		if bad, err = eachRecord(out.Items, kind, prefix, valid, each, bad); err != nil {
			return nil, err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return bad, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// eachRecord calls each for every item whose key is prefix and a valid
// id, and appends to bad an error for every other item and every error of
// each; an errStop from each ends it with its error instead.
func eachRecord(items []map[string]types.AttributeValue, kind, prefix string, valid func(string) error,
	each func(id string, item map[string]types.AttributeValue) error, bad []error) ([]error, error) {
	for _, item := range items {
		pk, _ := getPK(item)
		id, ok := strings.CutPrefix(pk, prefix)
		if !ok {
			bad = append(bad, fmt.Errorf("dynamostore: item of kind %s with key %.80q: %w", kind, pk, domain.ErrCorrupt))
			continue
		}
		if err := valid(id); err != nil {
			bad = append(bad, fmt.Errorf("dynamostore: stray item: %w", err))
			continue
		}
		if err := each(id, item); err != nil {
			var stop errStop
			if errors.As(err, &stop) {
				return nil, stop.err
			}
			bad = append(bad, err)
		}
	}
	return bad, nil
}

// errStop ends eachRecord with its error instead of listing it as one bad
// record (a failed read, not an unreadable record).
type errStop struct{ err error }

func (e errStop) Error() string { return e.err.Error() }
func (e errStop) Unwrap() error { return e.err }

// cancellation returns the reasons of a canceled transaction of n
// members; any other error, or a cancellation with another number of
// reasons, comes back as the error to return.
func (s *Store) cancellation(err error, n int) ([]types.CancellationReason, error) {
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &canceled) {
		return nil, s.apiError(err)
	}
	if len(canceled.CancellationReasons) != n {
		return nil, fmt.Errorf("transaction canceled (%s)", reasonCodes(canceled.CancellationReasons))
	}
	return canceled.CancellationReasons, nil
}

func getPK(item map[string]types.AttributeValue) (string, bool) {
	v, ok := item[PartitionKey].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

func sortByID[T any](recs []T, id func(T) string) {
	slices.SortFunc(recs, func(a, b T) int { return strings.Compare(id(a), id(b)) })
}
