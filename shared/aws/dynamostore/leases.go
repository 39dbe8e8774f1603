package dynamostore

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
)

// AcquireLease takes key for owner until now+ttl with one conditional
// PutItem: it wins when there is no lease, the lease has ended, or owner
// holds it already (which extends it). Otherwise ErrConflict. Expiry is
// judged by this process's clock against the holder's; keep ttl well above
// the clock skew between Lambdas.
func (s *Store) AcquireLease(ctx context.Context, leaseKey, owner string, ttl time.Duration) error {
	if owner == "" {
		return fmt.Errorf("dynamostore: acquire lease: empty owner")
	}
	if ttl <= 0 {
		return fmt.Errorf("dynamostore: acquire lease: ttl %v must be positive", ttl)
	}
	now := s.now()
	until := now.Add(ttl)
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			PartitionKey:  str(leasePK(leaseKey)),
			attrKind:      str(kindLease),
			attrOwner:     str(owner),
			attrExpiresAt: num(until.UnixMilli()),
			TTLAttribute:  num(epochCeil(until.Add(LeaseRetention))),
		},
		ConditionExpression: aws.String("attribute_not_exists(#pk) OR #expiresAt <= :now OR #owner = :owner"),
		ExpressionAttributeNames: map[string]string{
			"#pk": PartitionKey, "#expiresAt": attrExpiresAt, "#owner": attrOwner,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":now":   num(now.UnixMilli()),
			":owner": str(owner),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if old, lost := conditionFailed(err); lost {
		if ms, err := needN(old, attrExpiresAt); err == nil {
			left := time.UnixMilli(ms).Sub(now).Round(time.Millisecond)
			return fmt.Errorf("dynamostore: acquire lease: held by another owner for %v more: %w", left, domain.ErrConflict)
		}
		return fmt.Errorf("dynamostore: acquire lease: held by another owner: %w", domain.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: acquire lease: %w", s.apiError(err))
	}
	return nil
}

// ReleaseLease drops the lease if owner still holds it, with one
// conditional DeleteItem, and otherwise does nothing.
func (s *Store) ReleaseLease(ctx context.Context, leaseKey, owner string) error {
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(leasePK(leaseKey)),
		ConditionExpression:       aws.String("#owner = :owner"),
		ExpressionAttributeNames:  map[string]string{"#owner": attrOwner},
		ExpressionAttributeValues: map[string]types.AttributeValue{":owner": str(owner)},
	})
	if _, lost := conditionFailed(err); lost {
		return nil // not held by owner (or no lease at all): nothing to release
	}
	if err != nil {
		return fmt.Errorf("dynamostore: release lease: %w", s.apiError(err))
	}
	return nil
}
