package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
)

// GetGrant reads the grant with a strongly consistent read, so a token
// another Lambda has just refreshed is never missed.
func (s *Store) GetGrant(ctx context.Context, id string) (domain.Grant, error) {
	if err := domain.ValidateGrantID(id); err != nil {
		return domain.Grant{}, fmt.Errorf("dynamostore: get grant: %w", err)
	}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(grantPrefix + id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return domain.Grant{}, fmt.Errorf("dynamostore: get grant %s: %w", id, s.apiError(err))
	}
	if len(out.Item) == 0 {
		return domain.Grant{}, fmt.Errorf("dynamostore: get grant %s: %w", id, domain.ErrNotFound)
	}
	g, err := decodeGrant(id, out.Item)
	if err != nil {
		return domain.Grant{}, fmt.Errorf("dynamostore: get grant %s: %w", id, err)
	}
	if st, err := grantStateOf(out.Item); err == nil {
		s.known.setGrant(id, st)
	}
	return g, nil
}

// PutGrant writes g when the stored version equals expectVersion (0: the
// grant must not exist), as one conditional PutItem, and returns it with
// version expectVersion+1.
func (s *Store) PutGrant(ctx context.Context, g domain.Grant, expectVersion int64) (domain.Grant, error) {
	if err := domain.ValidateGrantID(g.ID); err != nil {
		return domain.Grant{}, fmt.Errorf("dynamostore: put grant: %w", err)
	}
	fail := func(err error) (domain.Grant, error) {
		return domain.Grant{}, fmt.Errorf("dynamostore: put grant %s: %w", g.ID, err)
	}
	g.Version = expectVersion + 1
	item, err := grantItem(g)
	if err != nil {
		return fail(err)
	}
	in := &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if expectVersion == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames = map[string]string{"#pk": PartitionKey}
	} else {
		in.ConditionExpression = aws.String("#version = :expect")
		in.ExpressionAttributeNames = map[string]string{"#version": attrVersion}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":expect": num(expectVersion)}
	}
	if _, err := s.api.PutItem(ctx, in); err != nil {
		old, lost := conditionFailed(err)
		if !lost {
			return fail(s.apiError(err))
		}
		st, serr := grantStateOf(old)
		if serr != nil {
			return fail(fmt.Errorf("expected version %d: %w", expectVersion, domain.ErrConflict))
		}
		s.known.setGrant(g.ID, st)
		if !st.exists {
			return fail(fmt.Errorf("no stored grant, expected version %d: %w", expectVersion, domain.ErrConflict))
		}
		return fail(fmt.Errorf("stored version %d, expected %d: %w", st.version, expectVersion, domain.ErrConflict))
	}
	written, err := decodeGrant(g.ID, item)
	if err != nil {
		return fail(err)
	}
	st, _ := grantStateOf(item)
	s.known.setGrant(g.ID, st)
	return written, nil
}

// ListGrants returns every readable grant in id order, plus one error per
// item that could not be read. It scans the table with consistent reads.
func (s *Store) ListGrants(ctx context.Context) ([]domain.Grant, []error, error) {
	var out []domain.Grant
	bad, err := s.scanKind(ctx, kindGrant, grantPrefix, domain.ValidateGrantID, func(id string, item map[string]types.AttributeValue) error {
		g, err := decodeGrant(id, item)
		if err != nil {
			return fmt.Errorf("dynamostore: grant %s: %w", id, err)
		}
		out = append(out, g)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dynamostore: list grants: %w", err)
	}
	sortByID(out, func(g domain.Grant) string { return g.ID })
	return out, bad, nil
}
