package dynamostore

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
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
)

// UpdateItemAPI is the part of *dynamodb.Client the tool limiter uses: one
// operation, so a read can never sneak in.
type UpdateItemAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

var _ UpdateItemAPI = (*dynamodb.Client)(nil)

// Rate-limit items in the store's table (see the package documentation):
// ttl is the latest time at which the bucket can still be partly used (now
// + τ + T at the last allowed call), plus rateTTLSlack; after it the item
// means the same as no item, so DynamoDB may remove it.
const (
	ratePrefix   = "ratelimit#"
	kindRate     = "RateLimit"
	attrTAT      = "tat"
	rateTTLSlack = time.Minute
	// rateMaxAttempts bounds the UpdateItems of one call. Each attempt
	// after the second follows a write that another caller won, so it is
	// reached only under heavy contention on one key.
	rateMaxAttempts = 8
	// rateMaxHints bounds the in-process memory of keys' TATs.
	rateMaxHints = 1 << 14
)

// ErrLimiterContention: a call on one key lost rateMaxAttempts races to
// other callers.
var ErrLimiterContention = errors.New("too much contention on one rate-limit key")

// ToolLimiter is the per-(principal, tool) rate limit of the AWS
// deployment (toolhooks.Limiter): GCRA from shared/tools/ratelimit, with
// one item per key in the store's table, changed only by conditional
// UpdateItems, so the limit holds across every Lambda.
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
type ToolLimiter struct {
	api    UpdateItemAPI
	table  string
	limits ratelimit.Limits
	now    func() time.Time

	mu    sync.Mutex
	hints map[string]int64 // ratelimit.Key → last TAT seen
}

// NewToolLimiter returns a limiter keeping its state in table (the store's
// table, as TableSchema creates it) through api, with limits, reading the
// time from now (time.Now when nil). It makes no call.
func NewToolLimiter(api UpdateItemAPI, table string, limits ratelimit.Limits, now func() time.Time) (*ToolLimiter, error) {
	if api == nil {
		return nil, errors.New("dynamostore: tool limiter: nil DynamoDB client")
	}
	if err := validTableName(table); err != nil {
		return nil, fmt.Errorf("dynamostore: tool limiter: %w", err)
	}
	if err := limits.Validate(); err != nil {
		return nil, fmt.Errorf("dynamostore: tool limiter: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	return &ToolLimiter{api: api, table: table, limits: limits, now: now, hints: map[string]int64{}}, nil
}

// Allow implements toolhooks.Limiter. Its errors never hold the principal
// or the tool: only the first twelve hex digits of their key.
func (d *ToolLimiter) Allow(ctx context.Context, principal, tool string) (bool, time.Duration, error) {
	bucket, err := ratelimit.Key(principal, tool)
	if err != nil {
		return false, 0, err
	}
	g := d.limits.For(tool).GCRA()
	now := d.now().UnixMicro()

	tat, known := d.hint(bucket)
	if !known {
		tat = 0 // a key this process has not seen is most likely idle
	}
	for range rateMaxAttempts {
		_, ok, retry := g.Decide(tat, now)
		if !ok {
			d.setHint(bucket, tat)
			return false, retry, nil
		}
		newTAT, won, current, err := d.update(ctx, bucket, g, now, tat >= now)
		if err != nil {
			return false, 0, fmt.Errorf("dynamostore: rate limit key %.12s: %w", bucket, err)
		}
		if won {
			d.setHint(bucket, newTAT)
			return true, 0, nil
		}
		tat = current
	}
	return false, 0, fmt.Errorf("dynamostore: rate limit key %.12s: %w", bucket, ErrLimiterContention)
}

// update makes one conditional UpdateItem: the busy case when busy, else
// the idle case. It returns the new TAT when the condition held, or the
// TAT the failed condition saw (0 for none).
func (d *ToolLimiter) update(ctx context.Context, bucket string, g ratelimit.GCRA, now int64, busy bool) (newTAT int64, won bool, current int64, err error) {
	ttl := (now+g.Tolerance+g.Interval+999_999)/1_000_000 + int64(rateTTLSlack/time.Second)
	in := &dynamodb.UpdateItemInput{
		TableName:                           aws.String(d.table),
		Key:                                 key(ratePrefix + bucket),
		ExpressionAttributeNames:            map[string]string{"#tat": attrTAT, "#ttl": TTLAttribute, "#kind": attrKind},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	if busy {
		in.UpdateExpression = aws.String("SET #tat = #tat + :t, #ttl = :ttl, #kind = :kind")
		in.ConditionExpression = aws.String("#tat >= :now AND #tat <= :maxtat")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":t": num(g.Interval), ":now": num(now), ":maxtat": num(now + g.Tolerance),
			":ttl": num(ttl), ":kind": str(kindRate),
		}
		in.ReturnValues = types.ReturnValueUpdatedNew
	} else {
		newTAT = now + g.Interval
		in.UpdateExpression = aws.String("SET #tat = :newtat, #ttl = :ttl, #kind = :kind")
		in.ConditionExpression = aws.String("attribute_not_exists(#tat) OR #tat < :now")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":newtat": num(newTAT), ":now": num(now),
			":ttl": num(ttl), ":kind": str(kindRate),
		}
	}
	out, err := d.api.UpdateItem(ctx, in)
	if old, lost := conditionFailed(err); lost {
		current, err := tatOf(old)
		return 0, false, current, err
	}
	if err != nil {
		var notFound *types.ResourceNotFoundException
		if errors.As(err, &notFound) {
			return 0, false, 0, tableNotFoundError{d.table}
		}
		return 0, false, 0, awserr.Safe(err)
	}
	if busy {
		if newTAT, err = tatOf(out.Attributes); err != nil {
			return 0, false, 0, err
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
		return 0, fmt.Errorf("%w: stored tat is not a number", domain.ErrCorrupt)
	}
	tat, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil || tat < 0 {
		return 0, fmt.Errorf("%w: stored tat is not a non-negative integer", domain.ErrCorrupt)
	}
	return tat, nil
}

func (d *ToolLimiter) hint(bucket string) (int64, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	tat, ok := d.hints[bucket]
	return tat, ok
}

func (d *ToolLimiter) setHint(bucket string, tat int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.hints[bucket]; !ok && len(d.hints) >= rateMaxHints {
		clear(d.hints) // hints only save an UpdateItem: start over
	}
	d.hints[bucket] = tat
}
