//go:build integration

package dynamostore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// TestTurnStatsConformance runs the TurnStats suite on the emulator, with
// two Stores on one table as two Lambdas.
func TestTurnStatsConformance(t *testing.T) {
	emulatortest.Config(t)
	turnstoretest.RunStats(t, func(t *testing.T) turnstoretest.StatsPair {
		a, api := newEmulatorStore(t, tableOpts{})
		b, err := New(api, a.Table())
		if err != nil {
			t.Fatal(err)
		}
		return turnstoretest.StatsPair{A: a.TurnStats(), B: b.TurnStats()}
	})
}

// TestTurnStatsItems: the hour's counter item and the turn's marker carry
// their kind and a ttl 8 days after the hour starts, and a duplicate
// leaves the counter as it was.
func TestTurnStatsItems(t *testing.T) {
	s, api := newEmulatorStore(t, tableOpts{})
	ctx := context.Background()
	h := time.Now().UTC().Truncate(time.Hour).Add(-3 * time.Hour)
	k := turn.InstanceKey{Swarm: "s", Key: "k", Agent: "a"}
	tr := turnstoretest.EndedTurn(k, "t1", turn.TurnFailed, h.Add(10*time.Minute))
	for range 2 {
		if err := s.TurnStats().RecordTurnEnd(ctx, tr, 4.5); err != nil {
			t.Fatal(err)
		}
	}
	wantTTL := strconv.FormatInt(h.Add(turn.StatsRetention).Unix(), 10)
	for _, c := range []struct{ pk, kind string }{{statsHourPK(h), kindTurnHourStats}, {statsMarkPK(tr), kindTurnStatsMarker}} {
		out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.Table()), Key: key(c.pk), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if out.Item == nil {
			t.Fatalf("no item %s", c.pk)
		}
		if err := checkKind(out.Item, c.kind); err != nil {
			t.Errorf("%s: %v", c.pk, err)
		}
		if ttl, ok := out.Item[TTLAttribute].(*types.AttributeValueMemberN); !ok || ttl.Value != wantTTL {
			t.Errorf("%s: ttl = %#v, want %s", c.pk, out.Item[TTLAttribute], wantTTL)
		}
		if c.kind == kindTurnHourStats {
			if f, _ := needN(out.Item, attrFailed); f != 1 {
				t.Errorf("failed = %d after a duplicate, want 1", f)
			}
			if v := out.Item[attrParkedSeconds].(*types.AttributeValueMemberN).Value; v != "4.5" {
				t.Errorf("parkedSeconds = %s, want 4.5", v)
			}
		}
	}
}
