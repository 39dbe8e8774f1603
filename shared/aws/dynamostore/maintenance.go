package dynamostore

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
)

// HasRecords reports whether the table holds any grant or session,
// readable or not (callers use it to refuse a new key over existing
// records). It scans until it finds one, reading keys only.
func (s *Store) HasRecords(ctx context.Context) (bool, error) {
	in := &dynamodb.ScanInput{
		TableName:                aws.String(s.table),
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#pk"),
		FilterExpression:         aws.String("#kind = :grant OR #kind = :session"),
		ExpressionAttributeNames: map[string]string{"#pk": PartitionKey, "#kind": attrKind},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":grant": str(kindGrant), ":session": str(kindSession),
		},
	}
	if s.scanLimit > 0 {
		in.Limit = aws.Int32(s.scanLimit)
	}
	for {
		out, err := s.api.Scan(ctx, in)
		if err != nil {
			return false, fmt.Errorf("dynamostore: has records: %w", s.apiError(err))
		}
		if len(out.Items) > 0 {
			return true, nil
		}
		if len(out.LastEvaluatedKey) == 0 {
			return false, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// KeyIDs maps each key id found on a sealed value to the ids of the records
// using it (see domain.KeyIDs).
func (s *Store) KeyIDs(ctx context.Context) (map[string][]string, error) {
	return domain.KeyIDs(ctx, s)
}

// maxResealAttempts bounds how often Reseal rereads a record that a
// concurrent writer keeps changing.
const maxResealAttempts = 5

// Reseal opens every sealed value of every grant and session and seals it
// again with sealer (so under its current key), one record at a time, each
// written with a version condition so a concurrent writer is never
// overwritten: when one wins, the record is read again and resealed from
// what it wrote. It returns how many values were resealed. It refuses to
// start while any record is unreadable, and stops at the first error,
// naming the record and field; records done before it are complete, the
// failing record is unchanged. Plaintexts live only in memory, briefly.
func (s *Store) Reseal(ctx context.Context, sealer domain.Sealer) (int, error) {
	grants, bad, err := s.ListGrants(ctx)
	if err != nil {
		return 0, fmt.Errorf("dynamostore: reseal: %w", err)
	}
	sessions, badSessions, err := s.ListSessions(ctx)
	if err != nil {
		return 0, fmt.Errorf("dynamostore: reseal: %w", err)
	}
	if bad = append(bad, badSessions...); len(bad) > 0 {
		return 0, fmt.Errorf("dynamostore: reseal: %d unreadable records, the first: %w", len(bad), bad[0])
	}
	n := 0
	for _, g := range grants {
		c, err := resealRecord(ctx, sealer, g, grantRecord(s))
		n += c
		if err != nil {
			return n, fmt.Errorf("dynamostore: reseal grant %s: %w", g.ID, err)
		}
	}
	for _, sess := range sessions {
		c, err := resealRecord(ctx, sealer, sess, sessionRecord(s))
		n += c
		if err != nil {
			return n, fmt.Errorf("dynamostore: reseal session %s: %w", sess.ID, err)
		}
	}
	return n, nil
}

// resealable is what Reseal needs to know of one kind of record.
type resealable[T any] struct {
	id     func(T) string
	fields func(*T) []domain.SealedField
	bind   func(rec T, field string) domain.Binding
	get    func(ctx context.Context, id string) (T, error)
	// write stores rec on condition that the stored version is rec's.
	write func(ctx context.Context, rec T) error
}

func grantRecord(s *Store) resealable[domain.Grant] {
	return resealable[domain.Grant]{
		id:     func(g domain.Grant) string { return g.ID },
		fields: (*domain.Grant).SealedFields,
		bind:   domain.GrantBinding,
		get:    s.GetGrant,
		write: func(ctx context.Context, g domain.Grant) error {
			_, err := s.PutGrant(ctx, g, g.Version)
			return err
		},
	}
}

func sessionRecord(s *Store) resealable[domain.Session] {
	return resealable[domain.Session]{
		id:     func(sess domain.Session) string { return sess.ID },
		fields: (*domain.Session).SealedFields,
		bind:   domain.SessionBinding,
		get:    s.GetSession,
		write: func(ctx context.Context, sess domain.Session) error {
			_, err := s.UpdateSession(ctx, sess)
			return err
		},
	}
}

// resealRecord reseals rec (a value of its own, as listed) and writes it.
func resealRecord[T any](ctx context.Context, sealer domain.Sealer, rec T, r resealable[T]) (int, error) {
	for attempt := 1; ; attempt++ {
		fields := r.fields(&rec)
		if len(fields) == 0 {
			return 0, nil
		}
		if err := domain.Reseal(ctx, sealer, fields, func(field string) domain.Binding { return r.bind(rec, field) }); err != nil {
			return 0, err
		}
		err := r.write(ctx, rec)
		if err == nil {
			return len(fields), nil
		}
		if !errors.Is(err, domain.ErrConflict) || attempt == maxResealAttempts {
			return 0, err
		}
		// A concurrent writer won: reseal what it wrote.
		rec, err = r.get(ctx, r.id(rec))
		if errors.Is(err, domain.ErrNotFound) {
			return 0, nil // deleted meanwhile (a finished session)
		}
		if err != nil {
			return 0, err
		}
	}
}
