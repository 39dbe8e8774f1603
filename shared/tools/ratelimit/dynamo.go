package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// DynamoAPI is the part of *dynamodb.Client the limiter uses: one
// operation, so a read can never sneak in.
type DynamoAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ DynamoAPI = (*dynamodb.Client)(nil)

// Item layout in the store's table (dynamostore.TableSchema):
//
//	pk                           kind       other attributes
//	ratelimit#<sha256 hex(key)>  RateLimit  tat N (Unix µs), ttl N (epoch s)
//
// ttl is the latest time at which the bucket can still be partly used
// (now + τ + T at the last allowed call), plus ttlSlack; after it the item
// means the same as no item, so DynamoDB may remove it.
const (
	ratePrefix = "ratelimit#"
	kindRate   = "RateLimit"
	attrTAT    = "tat"
	attrKind   = "kind"
	ttlSlack   = time.Minute
	// maxAttempts bounds the UpdateItems of one call. Each attempt after
	// the second follows a write that another caller won, so it is reached
	// only under heavy contention on one key.
	maxAttempts = 8
	// maxHints bounds the in-process memory of keys' TATs.
	maxHints = 1 << 14
)

// ErrContention: a call on one key lost maxAttempts races to other callers.
var ErrContention = errors.New("ratelimit: too much contention on one key")

// Dynamo is the limiter of the AWS deployment: one item per key in the
// store's table, changed only by conditional UpdateItems.
//
// UpdateExpression has no max(), so max(TAT, now) + T is split in two
// cases, each a single UpdateItem whose condition is GCRA's rule:
//
//   - idle (TAT < now, or no item): SET tat = :now + T,
//     if attribute_not_exists(tat) OR tat < :now;
//   - busy (now ≤ TAT ≤ now + τ): SET tat = tat + T,
//     if tat >= :now AND tat <= :now + τ.
//
// A hint of each key's last TAT seen by this process picks the case to try
// first. When its condition fails, ReturnValuesOnConditionCheckFailure
// returns the current TAT, which says whether the other case applies (one
// more UpdateItem) or the call is denied (with Retry-After from it). So an
// allowed call is one UpdateItem when the hint is right and two when it is
// wrong, a denied call one or two, and there is never a read: nothing can
// change between what a decision is based on and the write it makes.
//
// TATs only grow, so a hint is a lower bound of the stored TAT: when the
// hint alone already denies the call, Allow denies it with no request, and
// its Retry-After may then be short of the true wait (a retry too early is
// denied again).
type Dynamo struct {
	api    DynamoAPI
	table  string
	limits Limits
	now    func() time.Time

	mu    sync.Mutex
	hints map[string]int64 // keyHash → last TAT seen
}

var _ toolhooks.Limiter = (*Dynamo)(nil)

// NewDynamo returns a limiter keeping its state in table (the store's
// table, as dynamostore.TableSchema creates it) through api, with limits,
// reading the time from now (time.Now when nil). It makes no call.
func NewDynamo(api DynamoAPI, table string, limits Limits, now func() time.Time) (*Dynamo, error) {
	if api == nil {
		return nil, errors.New("ratelimit: nil DynamoDB client")
	}
	if table == "" {
		return nil, errors.New("ratelimit: empty table name")
	}
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("ratelimit: %w", err)
	}
	return &Dynamo{api: api, table: table, limits: limits, now: clock(now), hints: map[string]int64{}}, nil
}

// Allow implements toolhooks.Limiter.
func (d *Dynamo) Allow(ctx context.Context, principal, tool string) (bool, time.Duration, error) {
	if err := checkKey(principal, tool); err != nil {
		return false, 0, err
	}
	g := d.limits.For(tool).gcra()
	key := keyHash(principal, tool)
	now := d.now().UnixMicro()

	tat, known := d.hint(key)
	if !known {
		tat = 0 // a key this process has not seen is most likely idle
	}
	for range maxAttempts {
		_, ok, retry := g.decide(tat, now)
		if !ok {
			d.setHint(key, tat)
			return false, retry, nil
		}
		newTAT, won, current, err := d.update(ctx, key, g, now, tat >= now)
		if err != nil {
			return false, 0, err
		}
		if won {
			d.setHint(key, newTAT)
			return true, 0, nil
		}
		tat = current
	}
	return false, 0, ErrContention
}

// update makes one conditional UpdateItem: the busy case when busy, else
// the idle case. It returns the new TAT when the condition held, or the
// TAT the failed condition saw (0 for none).
func (d *Dynamo) update(ctx context.Context, key string, g gcra, now int64, busy bool) (newTAT int64, won bool, current int64, err error) {
	ttl := (now+g.tolerance+g.interval+999_999)/1_000_000 + int64(ttlSlack/time.Second)
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(d.table),
		Key:                                 map[string]types.AttributeValue{dynamostore.PartitionKey: str(ratePrefix + key)},
		ExpressionAttributeNames:            map[string]string{"#tat": attrTAT, "#ttl": dynamostore.TTLAttribute, "#kind": attrKind},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if busy {
		in.UpdateExpression = aws.String("SET #tat = #tat + :t, #ttl = :ttl, #kind = :kind")
		in.ConditionExpression = aws.String("#tat >= :now AND #tat <= :maxtat")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":t": num(g.interval), ":now": num(now), ":maxtat": num(now + g.tolerance),
			":ttl": num(ttl), ":kind": str(kindRate),
		}
		in.ReturnValues = types.ReturnValueUpdatedNew
	} else {
		newTAT = now + g.interval
		in.UpdateExpression = aws.String("SET #tat = :newtat, #ttl = :ttl, #kind = :kind")
		in.ConditionExpression = aws.String("attribute_not_exists(#tat) OR #tat < :now")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":newtat": num(newTAT), ":now": num(now),
			":ttl": num(ttl), ":kind": str(kindRate),
		}
	}
	out, err := d.api.UpdateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		current, err := tatOf(ccf.Item)
		if err != nil {
			return 0, false, 0, fmt.Errorf("ratelimit: key %.12s: %w", key, err)
		}
		return 0, false, current, nil
	case err != nil:
		return 0, false, 0, d.apiError(err)
	}
	if busy {
		if newTAT, err = tatOf(out.Attributes); err != nil {
			return 0, false, 0, fmt.Errorf("ratelimit: key %.12s: %w", key, err)
		}
	}
	return newTAT, true, 0, nil
}

// tatOf reads tat from an item: 0 when the item or the attribute is absent.
func tatOf(item map[string]types.AttributeValue) (int64, error) {
	v, ok := item[attrTAT]
	if !ok {
		return 0, nil
	}
	n, isNum := v.(*types.AttributeValueMemberN)
	if !isNum {
		return 0, errors.New("stored tat is not a number")
	}
	tat, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil || tat < 0 {
		return 0, errors.New("stored tat is not a non-negative integer")
	}
	return tat, nil
}

// apiError translates an SDK error: a missing table, or else its safe
// description (awserr), which never holds the error's message.
func (d *Dynamo) apiError(err error) error {
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return fmt.Errorf("ratelimit: table %q: %w", d.table, dynamostore.ErrTableNotFound)
	}
	return fmt.Errorf("ratelimit: dynamodb update: %w", awserr.Safe(err))
}

func (d *Dynamo) hint(key string) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	tat, ok := d.hints[key]
	return tat, ok
}

func (d *Dynamo) setHint(key string, tat int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.hints[key]; !ok && len(d.hints) >= maxHints {
		clear(d.hints) // hints only save an UpdateItem: start over
	}
	d.hints[key] = tat
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
