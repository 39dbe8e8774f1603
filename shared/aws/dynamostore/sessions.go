package dynamostore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
)

// CreateSession writes a new session as given (Version included, normally
// 0); ErrConflict when the id exists. A session with a reuse key is
// written in one transaction with the key's pointer (see createReusable).
func (s *Store) CreateSession(ctx context.Context, sess domain.Session) error {
	if err := domain.ValidateSessionID(sess.ID); err != nil {
		return fmt.Errorf("dynamostore: create session: %w", err)
	}
	if sess.ReuseKey != "" {
		if err := domain.ValidateReuseKey(sess.ReuseKey); err != nil {
			return fmt.Errorf("dynamostore: create session %s: %w", sess.ID, err)
		}
	}
	item, err := sessionItem(sess)
	if err != nil {
		return fmt.Errorf("dynamostore: create session %s: %w", sess.ID, err)
	}
	if sess.ReuseKey != "" {
		if err := s.createReusable(ctx, sess, item); err != nil {
			return fmt.Errorf("dynamostore: create session %s: %w", sess.ID, err)
		}
		s.rememberSession(sess.ID, item)
		return nil
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": PartitionKey},
	})
	if _, lost := conditionFailed(err); lost {
		return fmt.Errorf("dynamostore: create session %s: already exists: %w", sess.ID, domain.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create session %s: %w", sess.ID, s.apiError(err))
	}
	s.rememberSession(sess.ID, item)
	return nil
}

// GetSession reads the session with a strongly consistent read.
func (s *Store) GetSession(ctx context.Context, id string) (domain.Session, error) {
	if err := domain.ValidateSessionID(id); err != nil {
		return domain.Session{}, fmt.Errorf("dynamostore: get session: %w", err)
	}
	sess, _, err := s.readSession(ctx, id)
	if err != nil {
		return domain.Session{}, fmt.Errorf("dynamostore: get session %s: %w", id, err)
	}
	return sess, nil
}

// readSession reads and decodes a session and remembers its state.
func (s *Store) readSession(ctx context.Context, id string) (domain.Session, sessionState, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.table),
		Key:            key(sessionPrefix + id),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return domain.Session{}, sessionState{}, s.apiError(err)
	}
	if len(out.Item) == 0 {
		s.known.dropSession(id)
		return domain.Session{}, sessionState{}, domain.ErrNotFound
	}
	sess, st, err := decodeSession(id, out.Item)
	if err != nil {
		s.known.dropSession(id)
		return domain.Session{}, sessionState{}, err
	}
	s.known.setSession(id, st)
	return sess, st, nil
}

// rememberSession notes the state of an item this Store wrote.
func (s *Store) rememberSession(id string, item map[string]types.AttributeValue) {
	if _, st, err := decodeSession(id, item); err == nil {
		s.known.setSession(id, st)
	}
}

// UpdateSession writes sess when the stored version equals sess.Version, as
// one conditional PutItem, and returns it with the version bumped;
// ErrNotFound when it does not exist.
func (s *Store) UpdateSession(ctx context.Context, sess domain.Session) (domain.Session, error) {
	if err := domain.ValidateSessionID(sess.ID); err != nil {
		return domain.Session{}, fmt.Errorf("dynamostore: update session: %w", err)
	}
	fail := func(err error) (domain.Session, error) {
		return domain.Session{}, fmt.Errorf("dynamostore: update session %s: %w", sess.ID, err)
	}
	expect := sess.Version
	sess.Version++
	item, err := sessionItem(sess)
	if err != nil {
		return fail(err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           aws.String(s.table),
		Item:                                item,
		ConditionExpression:                 aws.String("#version = :expect"),
		ExpressionAttributeNames:            map[string]string{"#version": attrVersion},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":expect": num(expect)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if old, lost := conditionFailed(err); lost {
		if len(old) == 0 {
			s.known.dropSession(sess.ID)
			return fail(domain.ErrNotFound)
		}
		s.rememberSession(sess.ID, old)
		if v, verr := needN(old, attrVersion); verr == nil {
			return fail(fmt.Errorf("stored version %d, expected %d: %w", v, expect, domain.ErrConflict))
		}
		return fail(fmt.Errorf("expected version %d: %w", expect, domain.ErrConflict))
	}
	if err != nil {
		return fail(s.apiError(err))
	}
	written, st, err := decodeSession(sess.ID, item)
	if err != nil {
		return fail(err)
	}
	s.known.setSession(sess.ID, st)
	return written, nil
}

// maxCompleteAttempts bounds CompleteSession's transactions: one, plus a
// retry for each stale guess or transaction conflict.
const maxCompleteAttempts = 6

// CompleteSession moves a pending session to completed and upserts g in one
// TransactWriteItems, and reads nothing when this Store has seen the
// session (the callback has just read it with GetSession):
//
//  1. the session item: SET status, completedAt and version+1, and its
//     index attributes (sweepSet and expiresAt SET, pendingFor REMOVEd),
//     on condition that version, status (pending or exchanging) and doc
//     are what this Store last saw; the doc is not rewritten, so what
//     CompleteSession returns is exactly what is stored;
//  2. the grant item: a Put of g with version+1 and the stored createdAt,
//     on condition that the version is the one this Store last saw (or
//     that there is no grant, when it has seen none).
//
// Both members ask for the old item when their condition fails. A session
// that is missing or no longer pending ends it (ErrNotFound, ErrConflict);
// any other failure means a guess was stale, and the transaction is tried
// again with the item DynamoDB returned, still without a read. A grant
// this Store has not seen costs one extra transaction when it exists
// (re-consent from a Lambda that never read it). Only a session this Store
// has never seen is read first, once.
func (s *Store) CompleteSession(ctx context.Context, sessionID string, at time.Time, g domain.Grant) (domain.Session, domain.Grant, error) {
	fail := func(err error) (domain.Session, domain.Grant, error) {
		return domain.Session{}, domain.Grant{}, fmt.Errorf("dynamostore: complete session %s: %w", sessionID, err)
	}
	if err := domain.ValidateSessionID(sessionID); err != nil {
		return fail(err)
	}
	if err := domain.ValidateGrantID(g.ID); err != nil {
		return fail(err)
	}
	atText, err := timeText(at)
	if err != nil {
		return fail(err)
	}
	var guess completionGuess
	if guess.sess, err = s.knownSession(ctx, sessionID); err != nil {
		return fail(err)
	}
	guess.grant = s.known.grant(g.ID)
	for attempt := 1; ; attempt++ {
		in, done, written, err := s.completion(sessionID, guess.sess, atText, g, guess.grant)
		if err != nil {
			return fail(err)
		}
		_, err = s.api.TransactWriteItems(ctx, in)
		if err == nil {
			sess, grant, err := s.completed(sessionID, g.ID, done, written)
			if err != nil {
				return fail(err)
			}
			return sess, grant, nil
		}
		var canceled *types.TransactionCanceledException
		if !errors.As(err, &canceled) {
			return fail(s.apiError(err))
		}
		var busy bool
		if guess, busy, err = s.nextGuess(sessionID, g.ID, canceled.CancellationReasons, guess); err != nil {
			return fail(err)
		}
		if attempt == maxCompleteAttempts {
			return fail(fmt.Errorf("the session or grant kept changing; gave up after %d transactions: %w", attempt, domain.ErrConflict))
		}
		if busy {
			if err := sleepCtx(ctx, completeBackoff(attempt)); err != nil {
				return fail(err)
			}
		}
	}
}

// completionGuess is what CompleteSession's next transaction assumes the
// session and grant items hold; its conditions fail when a guess is stale.
type completionGuess struct {
	sess  sessionState
	grant grantState
}

// knownSession is the state this Store last saw of the session, read once
// when it has seen none.
func (s *Store) knownSession(ctx context.Context, id string) (sessionState, error) {
	if st, ok := s.known.session(id); ok {
		return st, nil
	}
	_, st, err := s.readSession(ctx, id)
	return st, err
}

// completed remembers the two items a successful completion wrote and
// returns them decoded.
func (s *Store) completed(sessionID, grantID string, done, written map[string]types.AttributeValue) (domain.Session, domain.Grant, error) {
	s.rememberSession(sessionID, done)
	st, _ := grantStateOf(written)
	s.known.setGrant(grantID, st)
	sess, _, err := decodeSession(sessionID, done)
	if err != nil {
		return domain.Session{}, domain.Grant{}, err
	}
	grant, err := decodeGrant(grantID, written)
	if err != nil {
		return domain.Session{}, domain.Grant{}, err
	}
	return sess, grant, nil
}

// reasonKind sorts the cancellation reason of one transaction member.
type reasonKind int

const (
	reasonNone      reasonKind = iota // the member did not cancel the transaction
	reasonCondition                   // its condition failed; the reason holds the stored item
	reasonBusy                        // transient (conflict, throttling): try again after a pause
	reasonFatal                       // anything else: trying again would fail again
)

func reasonKindOf(r types.CancellationReason) reasonKind {
	switch code := aws.ToString(r.Code); {
	case code == "None" || code == "":
		return reasonNone
	case code == "ConditionalCheckFailed":
		return reasonCondition
	case retryableReason(code):
		return reasonBusy
	}
	return reasonFatal
}

// nextGuess reads a canceled completion's reasons (session first, then
// grant) and returns the guess for the next attempt, and whether to pause
// before it. A session that is missing or no longer pending, and a reason
// that is not transient, end CompleteSession with an error.
func (s *Store) nextGuess(sessionID, grantID string, reasons []types.CancellationReason, guess completionGuess) (completionGuess, bool, error) {
	if len(reasons) != 2 {
		return guess, false, fmt.Errorf("transaction canceled (%s)", reasonCodes(reasons))
	}
	busy := false
	switch reasonKindOf(reasons[0]) {
	case reasonCondition:
		cur, err := s.pendingSessionFrom(sessionID, reasons[0].Item)
		if err != nil {
			return guess, false, err
		}
		guess.sess = cur
	case reasonBusy:
		busy = true
	case reasonFatal:
		return guess, false, fmt.Errorf("transaction canceled (%s)", reasonCodes(reasons))
	}
	switch reasonKindOf(reasons[1]) {
	case reasonCondition:
		cur, err := grantStateOf(reasons[1].Item)
		if err != nil {
			return guess, false, fmt.Errorf("grant %s: %w", grantID, err)
		}
		s.known.setGrant(grantID, cur)
		guess.grant = cur
	case reasonBusy:
		busy = true
	case reasonFatal:
		return guess, false, fmt.Errorf("transaction canceled (%s)", reasonCodes(reasons))
	}
	return guess, busy, nil
}

// pendingSessionFrom reads the session item a failed condition returned:
// ErrNotFound when there is none, ErrConflict when it is no longer pending,
// else its state, which this Store remembers.
func (s *Store) pendingSessionFrom(id string, item map[string]types.AttributeValue) (sessionState, error) {
	if len(item) == 0 {
		s.known.dropSession(id)
		return sessionState{}, domain.ErrNotFound
	}
	_, cur, err := decodeSession(id, item)
	if err != nil {
		return sessionState{}, err
	}
	s.known.setSession(id, cur)
	if !domain.Completable(cur.status) {
		return sessionState{}, fmt.Errorf("status is %s, not pending or exchanging: %w", cur.status, domain.ErrConflict)
	}
	return cur, nil
}

// completeBackoff is the pause before the next attempt when another
// transaction held an item: longer with each attempt, with jitter so that
// racing callers spread out.
func completeBackoff(attempt int) time.Duration {
	return time.Duration(attempt)*20*time.Millisecond + rand.N(20*time.Millisecond)
}

// completion builds CompleteSession's transaction from what is known of
// the two items, and returns it with the session and grant items as they
// will be after it.
func (s *Store) completion(sessionID string, sess sessionState, atText string, g domain.Grant, grant grantState) (
	in *dynamodb.TransactWriteItemsInput, done, written map[string]types.AttributeValue, err error) {
	g.Version = grant.version + 1
	if grant.exists {
		if err := g.CreatedAt.UnmarshalText([]byte(grant.createdAt)); err != nil {
			return nil, nil, nil, fmt.Errorf("grant %s: %w: createdAt", g.ID, domain.ErrCorrupt)
		}
	}
	written, err = grantItem(g)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("grant %s: %w", g.ID, err)
	}
	put := &types.Put{
		TableName:                           aws.String(s.table),
		Item:                                written,
		ExpressionAttributeNames:            map[string]string{"#pk": PartitionKey},
		ConditionExpression:                 aws.String("attribute_not_exists(#pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if grant.exists {
		put.ExpressionAttributeNames = map[string]string{"#version": attrVersion}
		put.ConditionExpression = aws.String("#version = :v")
		put.ExpressionAttributeValues = map[string]types.AttributeValue{":v": num(grant.version)}
	}

	// The completed session leaves PendingIndex and moves in SweepIndex:
	// its index attributes follow from the doc the condition pins.
	var completed domain.Session
	if err := json.Unmarshal([]byte(sess.doc), &completed); err != nil {
		return nil, nil, nil, fmt.Errorf("session %s: %w: doc: %s", sessionID, domain.ErrCorrupt, domain.JSONErrorWithoutContent(err))
	}
	completed.Status = domain.SessionCompleted
	index := sessionIndexAttrs(completed)
	done = map[string]types.AttributeValue{
		PartitionKey:    str(sessionPrefix + sessionID),
		attrKind:        str(kindSession),
		attrVersion:     num(sess.version + 1),
		attrStatus:      str(string(domain.SessionCompleted)),
		attrCompletedAt: str(atText),
		attrDoc:         str(sess.doc),
	}
	maps.Copy(done, index)
	update := &types.Update{
		TableName: aws.String(s.table),
		Key:       key(sessionPrefix + sessionID),
		UpdateExpression: aws.String("SET #status = :completed, #completedAt = :at, #version = :next, " +
			"#sweepSet = :sweepSet, #expiresAt = :expiresAt REMOVE #pendingFor"),
		ConditionExpression: aws.String("#version = :v AND #status IN (:pending, :exchanging) AND #doc = :doc"),
		ExpressionAttributeNames: map[string]string{
			"#status": attrStatus, "#completedAt": attrCompletedAt, "#version": attrVersion, "#doc": attrDoc,
			"#sweepSet": attrSweepSet, "#expiresAt": attrExpiresAt, "#pendingFor": attrPendingFor,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":completed":  str(string(domain.SessionCompleted)),
			":pending":    str(string(domain.SessionPending)),
			":exchanging": str(string(domain.SessionExchanging)),
			":at":         str(atText),
			":v":          num(sess.version),
			":next":       num(sess.version + 1),
			":doc":        str(sess.doc),
			":sweepSet":   index[attrSweepSet],
			":expiresAt":  index[attrExpiresAt],
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	// The session comes first: its cancellation reason is read first.
	in = &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: update}, {Put: put}}}
	return in, done, written, nil
}

// retryableReason reports whether a cancellation reason is transient.
func retryableReason(code string) bool {
	switch code {
	case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
		return true
	}
	return false
}

// reasonCodes lists the codes of cancellation reasons, in order. It never
// includes a reason's message or item.
func reasonCodes(reasons []types.CancellationReason) string {
	if len(reasons) == 0 {
		return "no reasons given"
	}
	codes := make([]string, len(reasons))
	for i, r := range reasons {
		codes[i] = fmt.Sprintf("%.40s", aws.ToString(r.Code))
	}
	return strings.Join(codes, ", ")
}

// ListSessions returns every readable session in id order, plus one error
// per item that could not be read.
func (s *Store) ListSessions(ctx context.Context) ([]domain.Session, []error, error) {
	var out []domain.Session
	bad, err := s.scanKind(ctx, kindSession, sessionPrefix, domain.ValidateSessionID, func(id string, item map[string]types.AttributeValue) error {
		sess, _, err := decodeSession(id, item)
		if err != nil {
			return fmt.Errorf("dynamostore: session %s: %w", id, err)
		}
		out = append(out, sess)
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("dynamostore: list sessions: %w", err)
	}
	sortByID(out, func(s domain.Session) string { return s.ID })
	return out, bad, nil
}

// DeleteSession removes the session; ErrNotFound when absent. An
// unreadable session can be deleted too (that is how an operator clears
// it).
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	if err := domain.ValidateSessionID(id); err != nil {
		return fmt.Errorf("dynamostore: delete session: %w", err)
	}
	s.known.dropSession(id)
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.table),
		Key:                      key(sessionPrefix + id),
		ConditionExpression:      aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": PartitionKey},
	})
	if _, lost := conditionFailed(err); lost {
		return fmt.Errorf("dynamostore: delete session %s: %w", id, domain.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("dynamostore: delete session %s: %w", id, s.apiError(err))
	}
	return nil
}
