package dynamostore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/agentauth/agentauth/shared/testkit/limitertest"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

var _ toolhooks.Limiter = (*ToolLimiter)(nil)

// fakeUpdater is DynamoDB's UpdateItem for exactly the two updates the
// tool limiter makes (idle and busy); any other expression is an error, so
// a change to them fails here until the fake learns it. The emulator runs
// the real thing (ratelimit_integration_test.go).
type fakeUpdater struct {
	mu    sync.Mutex
	tat   map[string]int64 // by pk
	calls int
	err   error // every call fails with it when set
}

const (
	idleUpdate = "SET #tat = :newtat, #ttl = :ttl, #kind = :kind"
	busyUpdate = "SET #tat = #tat + :t, #ttl = :ttl, #kind = :kind"
)

func (f *fakeUpdater) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	n := func(name string) int64 {
		v, _ := strconv.ParseInt(in.ExpressionAttributeValues[name].(*types.AttributeValueMemberN).Value, 10, 64)
		return v
	}
	pk := in.Key[PartitionKey].(*types.AttributeValueMemberS).Value
	tat, exists := f.tat[pk]
	lost := func() (*dynamodb.UpdateItemOutput, error) {
		var item map[string]types.AttributeValue
		if exists {
			item = map[string]types.AttributeValue{attrTAT: num(tat)}
		}
		return nil, &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed"), Item: item}
	}
	switch aws.ToString(in.UpdateExpression) {
	case idleUpdate:
		if exists && tat >= n(":now") {
			return lost()
		}
		f.tat[pk] = n(":newtat")
		return &dynamodb.UpdateItemOutput{}, nil
	case busyUpdate:
		if !exists || tat < n(":now") || tat > n(":maxtat") {
			return lost()
		}
		f.tat[pk] = tat + n(":t")
		return &dynamodb.UpdateItemOutput{Attributes: map[string]types.AttributeValue{attrTAT: num(f.tat[pk])}}, nil
	}
	return nil, errors.New("fakeUpdater: unknown update " + aws.ToString(in.UpdateExpression))
}

func TestToolLimiterConformanceOnFake(t *testing.T) {
	api := &fakeUpdater{tat: map[string]int64{}} // shared, as a table is
	limitertest.Run(t, func(t *testing.T, limits ratelimit.Limits, now func() time.Time) (toolhooks.Limiter, error) {
		return NewToolLimiter(api, "agentauth-test", limits, now)
	})
}

// Two limiters on one table, as two Lambdas: the burst holds across them.
func TestToolLimiterAcrossLimitersOnFake(t *testing.T) {
	api := &fakeUpdater{tat: map[string]int64{}}
	limits := ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 7}}
	var total int64
	for range 2 {
		l, err := NewToolLimiter(api, "agentauth-test", limits, limitertest.Frozen)
		if err != nil {
			t.Fatal(err)
		}
		total += limitertest.Hammer(t, l, "alice", "search", 4, 4)
	}
	if total != 7 {
		t.Fatalf("%d calls allowed across two limiters, want the burst 7", total)
	}
}

func TestToolLimiterErrors(t *testing.T) {
	const principal = "alice-canary"
	limits := ratelimit.Limits{Default: ratelimit.Limit{Rate: 1, Burst: 1}}
	for _, tc := range []struct {
		name string
		err  error
		is   error
		want string
	}{
		{"missing table", &types.ResourceNotFoundException{Message: aws.String("Requested resource not found: " + principal)}, ErrTableNotFound, `table "agentauth-test" does not exist`},
		{"echoed message", &smithy.GenericAPIError{Code: "ValidationException", Message: "bad value " + principal}, nil, "api error ValidationException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := NewToolLimiter(&fakeUpdater{err: tc.err}, "agentauth-test", limits, nil)
			if err != nil {
				t.Fatal(err)
			}
			ok, _, err := l.Allow(context.Background(), principal, "search")
			if ok || err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "canary") {
				t.Fatalf("Allow = %v, %v", ok, err)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("%v does not wrap %v", err, tc.is)
			}
		})
	}
	t.Run("bad key makes no call", func(t *testing.T) {
		api := &fakeUpdater{tat: map[string]int64{}}
		l, err := NewToolLimiter(api, "agentauth-test", limits, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ok, _, err := l.Allow(context.Background(), "", "search"); ok || err == nil || api.calls != 0 {
			t.Fatalf("Allow = %v, %v after %d calls", ok, err, api.calls)
		}
	})
	t.Run("constructor", func(t *testing.T) {
		for name, build := range map[string]func() (*ToolLimiter, error){
			"nil client": func() (*ToolLimiter, error) { return NewToolLimiter(nil, "agentauth-test", limits, nil) },
			"bad table":  func() (*ToolLimiter, error) { return NewToolLimiter(&fakeUpdater{}, "x", limits, nil) },
			"bad limits": func() (*ToolLimiter, error) {
				return NewToolLimiter(&fakeUpdater{}, "agentauth-test", ratelimit.Limits{}, nil)
			},
		} {
			if l, err := build(); err == nil || l != nil {
				t.Errorf("%s: built %v", name, l)
			}
		}
	})
}
