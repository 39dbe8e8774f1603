package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/agentauth/agentauth/shared/domain"
)

// The session index (domain.SessionIndex): a pointer item per reuse key
// and two global secondary indexes, never a Scan. See the package
// documentation for the access patterns.

// maxReuseAttempts bounds createReusable's transactions: one, plus one to
// replace a stale pointer, plus retries after transaction conflicts.
const maxReuseAttempts = 5

// createReusable writes sess (as item) and its reuse key's pointer in one
// TransactWriteItems. The pointer's condition lets it replace only a
// pointer whose session can no longer be reused: one past its reuseUntil,
// or one this call found to name a session that has left pending or is
// gone (a pointer is not removed when its session changes; a lookup checks
// the session instead). So of concurrent creators with one key exactly
// one writes, and the others get ErrConflict, which sends them to
// FindPendingSession.
func (s *Store) createReusable(ctx context.Context, sess domain.Session, item map[string]types.AttributeValue) error {
	stale := "" // a pointer's session id found not to hold the key
	for attempt := 1; ; attempt++ {
		cond := "attribute_not_exists(#pk) OR #reuseUntil <= :now"
		names := map[string]string{"#pk": PartitionKey, "#reuseUntil": attrReuseUntil}
		values := map[string]types.AttributeValue{":now": num(sess.CreatedAt.UnixMilli())}
		if stale != "" {
			cond += " OR #sessionId = :stale"
			names["#sessionId"] = attrSessionID
			values[":stale"] = str(stale)
		}
		_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName:                aws.String(s.table),
				Item:                     item,
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": PartitionKey},
			}},
			{Put: &types.Put{
				TableName:                           aws.String(s.table),
				Item:                                reusePointerItem(sess),
				ConditionExpression:                 aws.String(cond),
				ExpressionAttributeNames:            names,
				ExpressionAttributeValues:           values,
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			}},
		}})
		if err == nil {
			return nil
		}
		reasons, err := s.cancellation(err, 2)
		if err != nil {
			return err
		}
		busy := false
		for _, r := range reasons {
			switch reasonKindOf(r) {
			case reasonFatal:
				return fmt.Errorf("transaction canceled (%s)", reasonCodes(reasons))
			case reasonBusy:
				busy = true
			}
		}
		if reasonKindOf(reasons[0]) == reasonCondition {
			return fmt.Errorf("already exists: %w", domain.ErrConflict)
		}
		if reasonKindOf(reasons[1]) == reasonCondition {
			holder, _, err := decodeReusePointer(reasons[1].Item)
			if err != nil {
				return fmt.Errorf("reuse pointer %s: %w", sess.ReuseKey, err)
			}
			held, err := s.holdsReuseKey(ctx, holder, sess.ReuseKey, sess.CreatedAt)
			if err != nil {
				return err
			}
			if held {
				return fmt.Errorf("reuse key %s is held by pending session %s: %w", sess.ReuseKey, holder, domain.ErrConflict)
			}
			stale = holder
		}
		if attempt == maxReuseAttempts {
			return fmt.Errorf("the reuse key %s kept changing; gave up after %d transactions: %w", sess.ReuseKey, attempt, domain.ErrConflict)
		}
		if busy {
			if err := sleepCtx(ctx, completeBackoff(attempt)); err != nil {
				return err
			}
		}
	}
}

// holdsReuseKey reads session id and reports whether it holds key and is
// reusable at at. A session that is gone holds nothing.
func (s *Store) holdsReuseKey(ctx context.Context, id, key string, at time.Time) (bool, error) {
	sess, _, err := s.readSession(ctx, id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("session %s: %w", id, err)
	}
	return sess.ReuseKey == key && sess.ReusableAt(at), nil
}

// FindPendingSession reads reuseKey's pointer and the session it names,
// both strongly consistent: two GetItems when a session is found, one
// when there is no pointer or its time is up. The session itself decides,
// so a pointer whose session has left pending never yields it.
func (s *Store) FindPendingSession(ctx context.Context, reuseKey string, at time.Time) (domain.Session, error) {
	if err := domain.ValidateReuseKey(reuseKey); err != nil {
		return domain.Session{}, fmt.Errorf("dynamostore: find pending session: %w", err)
	}
	fail := func(err error) (domain.Session, error) {
		return domain.Session{}, fmt.Errorf("dynamostore: find pending session %s: %w", reuseKey, err)
	}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(reusePrefix + reuseKey),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fail(s.apiError(err))
	}
	if len(out.Item) == 0 {
		return fail(domain.ErrNotFound)
	}
	id, until, err := decodeReusePointer(out.Item)
	if err != nil {
		return fail(err)
	}
	if until <= at.UnixMilli() {
		return fail(domain.ErrNotFound) // its session cannot be reusable: no need to read it
	}
	sess, _, err := s.readSession(ctx, id)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		return fail(domain.ErrNotFound)
	case err != nil:
		return fail(fmt.Errorf("session %s: %w", id, err))
	case sess.ReuseKey != reuseKey || !sess.ReusableAt(at):
		return fail(domain.ErrNotFound)
	}
	return sess, nil
}

// ListPendingSessions queries PendingIndex for target's key
// (pendingFor), from at's millisecond on: one Query page per 1 MB of
// that target's pending sessions, which the index holds in full. The
// index follows the table within about a second (global secondary
// indexes are eventually consistent); each item is the session as the
// index has it, and is listed only when it says it is pending, unexpired
// and for exactly target.
//
// A second Query, run alongside, reads the key versions before issue 17
// wrote (legacyPendingFor: the instance key and agent name, no swarm),
// so that sessions pending across an upgrade stay listed; what it finds
// for another swarm is dropped like any other target's. It finds nothing
// once every such session has expired (a session lifetime after the
// upgrade), and can go in a later version.
func (s *Store) ListPendingSessions(ctx context.Context, target domain.ResumeTarget, at time.Time) ([]domain.Session, []error, error) {
	if err := target.Validate(); err != nil {
		return nil, nil, fmt.Errorf("dynamostore: list pending sessions: %w", err)
	}
	keys := []string{pendingFor(target), legacyPendingFor(target.InstanceKey, target.AgentName)}
	found := make([][]domain.Session, len(keys))
	bad := make([][]error, len(keys))
	g, gctx := errgroup.WithContext(ctx)
	for i, key := range keys {
		g.Go(func() error {
			var err error
			bad[i], err = s.queryIndex(gctx, &dynamodb.QueryInput{
				IndexName:                aws.String(PendingIndex),
				KeyConditionExpression:   aws.String("#pendingFor = :pendingFor AND #expiresAt >= :at"),
				ExpressionAttributeNames: map[string]string{"#pendingFor": attrPendingFor, "#expiresAt": attrExpiresAt},
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":pendingFor": str(key),
					":at":         num(at.UnixMilli()),
				},
			}, func(id string, item map[string]types.AttributeValue) error {
				sess, _, err := decodeSession(id, item)
				if err != nil {
					return fmt.Errorf("dynamostore: session %s: %w", id, err)
				}
				// The key is a hash and at a millisecond: check what they
				// stand for.
				if sess.Status == domain.SessionPending && sess.ExpiresAt.After(at) && sess.Resume.Target() == target {
					found[i] = append(found[i], sess)
				}
				return nil
			})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, fmt.Errorf("dynamostore: list pending sessions: %w", err)
	}
	// A session rewritten between the two queries may be in both.
	out := found[0]
	for _, sess := range found[1] {
		if !slices.ContainsFunc(out, func(o domain.Session) bool { return o.ID == sess.ID }) {
			out = append(out, sess)
		}
	}
	return out, append(bad[0], bad[1]...), nil
}

// ListSweepSessions queries SweepIndex for set (up to expiredBy's
// millisecond) and reads each session it lists with a strongly consistent
// GetItem: one Query page per 1 MB of keys, plus one GetItem per session.
// A session the index still lists after it left set (or expired later
// than expiredBy) is skipped, one deleted meanwhile too.
func (s *Store) ListSweepSessions(ctx context.Context, set domain.SweepSet, expiredBy time.Time) ([]domain.Session, []error, error) {
	in := &dynamodb.QueryInput{
		IndexName:                 aws.String(SweepIndex),
		KeyConditionExpression:    aws.String("#sweepSet = :sweepSet"),
		ExpressionAttributeNames:  map[string]string{"#sweepSet": attrSweepSet},
		ExpressionAttributeValues: map[string]types.AttributeValue{":sweepSet": str(string(set))},
	}
	if !expiredBy.IsZero() {
		in.KeyConditionExpression = aws.String("#sweepSet = :sweepSet AND #expiresAt <= :expiredBy")
		in.ExpressionAttributeNames["#expiresAt"] = attrExpiresAt
		in.ExpressionAttributeValues[":expiredBy"] = num(expiredBy.UnixMilli())
	}
	var out []domain.Session
	bad, err := s.queryIndex(ctx, in, func(id string, _ map[string]types.AttributeValue) error {
		sess, _, err := s.readSession(ctx, id)
		switch {
		case errors.Is(err, domain.ErrNotFound):
			return nil
		case errors.Is(err, domain.ErrCorrupt):
			return fmt.Errorf("dynamostore: session %s: %w", id, err)
		case err != nil:
			return errStop{fmt.Errorf("session %s: %w", id, err)}
		}
		if domain.SweepSetOf(sess) == set && (expiredBy.IsZero() || !sess.ExpiresAt.After(expiredBy)) {
			out = append(out, sess)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dynamostore: list %s sessions: %w", set, err)
	}
	return out, bad, nil
}

// queryIndex runs in (an index query of the session items) page by page,
// in index order, and calls each for every item, as scanKind does.
func (s *Store) queryIndex(ctx context.Context, in *dynamodb.QueryInput,
	each func(id string, item map[string]types.AttributeValue) error) ([]error, error) {
	in.TableName = aws.String(s.table)
	if s.scanLimit > 0 {
		in.Limit = aws.Int32(s.scanLimit)
	}
	var bad []error
	for {
		out, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, s.apiError(err)
		}
		if bad, err = eachRecord(out.Items, kindSession, sessionPrefix, domain.ValidateSessionID, each, bad); err != nil {
			return nil, err
		}
		if len(out.LastEvaluatedKey) == 0 {
			return bad, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}
