package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/turn"
)

// Turn statistics items: see the package documentation ("Turn
// statistics").
const (
	kindTurnHourStats   = "TurnHourStats"
	kindTurnStatsMarker = "TurnStatsMarker"

	turnStatsPrefix     = "turnstats#"
	turnStatsMarkPrefix = "turnstatsmark#"
	statsHourLayout     = "2006-01-02T15"

	attrHour          = "hour"
	attrCompleted     = "completed"
	attrFailed        = "failed"
	attrParked        = "parked"
	attrParkedSeconds = "parkedSeconds"

	// maxStatsAttempts bounds the transactions of one record that other
	// records of the same hour cancel (TransactionConflict on its counter).
	maxStatsAttempts = 10
)

// TurnStats returns the turn.TurnStats on the Store's table: a counter
// item per UTC hour and a marker item per turn counted, both expiring
// turn.StatsRetention after the hour starts.
func (s *Store) TurnStats() turn.TurnStats { return turnStats{s: s} }

type turnStats struct{ s *Store }

var _ turn.TurnStats = turnStats{}

func statsHourPK(h time.Time) string { return turnStatsPrefix + h.UTC().Format(statsHourLayout) }

// statsMarkPK names a counted turn by a hash of its instance key and id,
// so no key part reaches the table's keys.
func statsMarkPK(t turn.Turn) string {
	sum := sha256.Sum256([]byte(turn.StatsTurnKey(t)))
	return turnStatsMarkPrefix + hex.EncodeToString(sum[:16])
}

// statsExpired reports whether hour h is past retention at now.
func statsExpired(h, now time.Time) bool { return !h.Add(turn.StatsRetention).After(now) }

// RecordTurnEnd is one TransactWriteItems: Put of the turn's marker on
// condition attribute_not_exists, and Update of the hour's counters with
// ADD. A turn counted already fails the marker's condition, which cancels
// the whole transaction: nothing is added, and that is success. Records
// of one hour at the same moment cancel each other (TransactionConflict):
// tried again after a short random wait.
func (st turnStats) RecordTurnEnd(ctx context.Context, t turn.Turn, parkedSeconds float64) error {
	s := st.s
	h, err := turn.StatsHour(t)
	if err != nil {
		return fmt.Errorf("dynamostore: %w", err)
	}
	if statsExpired(h, s.now()) {
		return nil
	}
	if math.IsNaN(parkedSeconds) || math.IsInf(parkedSeconds, 0) || parkedSeconds < 0 {
		parkedSeconds = 0
	}
	hour := h.Format(statsHourLayout)
	ttl := num(h.Add(turn.StatsRetention).Unix())
	var completed, failed, parked int64
	if turn.StatsCompleted(t) {
		completed = 1
	} else {
		failed = 1
	}
	if parkedSeconds > 0 {
		parked = 1
	}
	mark := types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			PartitionKey: str(statsMarkPK(t)), attrKind: str(kindTurnStatsMarker), attrHour: str(hour), TTLAttribute: ttl,
		},
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": PartitionKey},
	}}
	count := types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table),
		Key:       key(statsHourPK(h)),
		UpdateExpression: aws.String("SET #kind = :kind, #hour = :hour, #ttl = :ttl " +
			"ADD #completed :completed, #failed :failed, #parked :parked, #parkedSeconds :parkedSeconds"),
		ExpressionAttributeNames: map[string]string{"#kind": attrKind, "#hour": attrHour, "#ttl": TTLAttribute,
			"#completed": attrCompleted, "#failed": attrFailed, "#parked": attrParked, "#parkedSeconds": attrParkedSeconds},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":kind": str(kindTurnHourStats), ":hour": str(hour), ":ttl": ttl,
			":completed": num(completed), ":failed": num(failed), ":parked": num(parked),
			":parkedSeconds": &types.AttributeValueMemberN{Value: strconv.FormatFloat(parkedSeconds, 'f', -1, 64)},
		},
	}}
	for attempt := 1; ; attempt++ {
		// A new input each time: the SDK fills in an idempotency token on
		// the input, which must not carry over to a new transaction.
		_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{mark, count},
		})
		if err == nil {
			return nil
		}
		reasons, err := s.cancellation(err, 2)
		if err != nil {
			return fmt.Errorf("dynamostore: record turn end in hour %s: %w", hour, err)
		}
		busy := false
		for i, r := range reasons {
			switch code := aws.ToString(r.Code); {
			case code == "None" || code == "":
			case code == "ConditionalCheckFailed" && i == 0:
				return nil // counted already
			case retryableReason(code):
				busy = true
			default:
				return fmt.Errorf("dynamostore: record turn end in hour %s: transaction canceled (%s)", hour, reasonCodes(reasons))
			}
		}
		if !busy {
			return fmt.Errorf("dynamostore: record turn end in hour %s: transaction canceled (%s)", hour, reasonCodes(reasons))
		}
		if attempt == maxStatsAttempts {
			return fmt.Errorf("dynamostore: record turn end in hour %s: other records kept holding the hour; gave up after %d transactions: %w",
				hour, attempt, domain.ErrConflict)
		}
		d := time.Duration(attempt)*10*time.Millisecond + rand.N(20*time.Millisecond)
		if err := sleepCtx(ctx, d); err != nil {
			return err
		}
	}
}

// Hours reads the hour items with strongly consistent BatchGetItem (one
// request for up to 100 hours, two for a week). An hour past retention
// reads as zero whether or not DynamoDB has removed its item yet.
func (st turnStats) Hours(ctx context.Context, from, to time.Time) ([]turn.HourStats, error) {
	s := st.s
	hs, err := turn.StatsHours(from, to)
	if err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	now := s.now()
	pks := make([]string, 0, len(hs))
	for _, h := range hs {
		if !statsExpired(h, now) {
			pks = append(pks, statsHourPK(h))
		}
	}
	items := map[string]map[string]types.AttributeValue{}
	if len(pks) > 0 {
		if items, err = s.batchGet(ctx, pks); err != nil {
			return nil, fmt.Errorf("dynamostore: read turn stats: %w", err)
		}
	}
	out := make([]turn.HourStats, 0, len(hs))
	for _, h := range hs {
		one := turn.HourStats{Hour: h}
		if item, ok := items[statsHourPK(h)]; ok {
			if one, err = decodeHourStats(h, item); err != nil {
				return nil, fmt.Errorf("dynamostore: turn stats of hour %s: %w", h.Format(statsHourLayout), err)
			}
		}
		out = append(out, one)
	}
	return out, nil
}

func decodeHourStats(h time.Time, item map[string]types.AttributeValue) (turn.HourStats, error) {
	if err := checkKind(item, kindTurnHourStats); err != nil {
		return turn.HourStats{}, err
	}
	hs := turn.HourStats{Hour: h}
	for _, f := range []struct {
		name string
		to   *int
	}{{attrCompleted, &hs.Completed}, {attrFailed, &hs.Failed}, {attrParked, &hs.Parked}} {
		n, err := needN(item, f.name)
		if err != nil {
			return turn.HourStats{}, err
		}
		*f.to = int(n)
	}
	v, ok := item[attrParkedSeconds].(*types.AttributeValueMemberN)
	if !ok {
		return turn.HourStats{}, fmt.Errorf("%w: attribute %s is missing or not a number", domain.ErrCorrupt, attrParkedSeconds)
	}
	sec, err := strconv.ParseFloat(v.Value, 64)
	if err != nil {
		return turn.HourStats{}, fmt.Errorf("%w: attribute %s is not a number", domain.ErrCorrupt, attrParkedSeconds)
	}
	hs.ParkedSeconds = sec
	return hs, nil
}
