//go:build integration

package dynamostore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/agentauth/agentauth/shared/domain"
)

// On the emulator's pending-by-target index: swarms that share an
// instance key and an Agent name have their own partitions, and items an
// older version wrote under the key without the swarm (put here as it
// wrote them) are listed for their own swarm only.
func TestPendingPerSwarmOnEmulator(t *testing.T) {
	ctx := context.Background()
	s, api := newEmulatorStore(t, tableOpts{})
	instance := "C" + domain.NewSessionID()[3:11]
	of := func(swarm string) domain.Session {
		sess := futureSession()
		sess.Resume.SwarmRef = domain.ObjectRef{Kind: "Swarm", Name: swarm}
		sess.Resume.InstanceKey, sess.Resume.AgentName = instance, "assistant"
		return sess
	}
	victim, other := of("victim"), of("other")
	must(t, s.CreateSession(ctx, victim), "CreateSession victim")
	must(t, s.CreateSession(ctx, other), "CreateSession other")
	oldVictim, oldOther := of("victim"), of("other")
	for _, sess := range []domain.Session{oldVictim, oldOther} {
		item, err := sessionItem(sess)
		must(t, err, "session item")
		item[attrPendingFor] = str(legacyPendingFor(instance, "assistant"))
		_, err = api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.Table()), Item: item})
		must(t, err, "PutItem as an older version")
	}
	want := map[string][]string{
		"victim": sortedIDs(victim.ID, oldVictim.ID),
		"other":  sortedIDs(other.ID, oldOther.ID),
		"third":  nil,
	}
	// The index follows the table within about a second.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mismatch := ""
		for swarm, ids := range want {
			got, bad, err := s.ListPendingSessions(ctx, of(swarm).Resume.Target(), victim.CreatedAt)
			must(t, err, "ListPendingSessions "+swarm)
			if len(bad) > 0 {
				t.Fatalf("swarm %s: unreadable %v", swarm, bad)
			}
			var gotIDs []string
			for _, sess := range got {
				gotIDs = append(gotIDs, sess.ID)
			}
			slices.Sort(gotIDs)
			for _, id := range gotIDs {
				if !slices.Contains(ids, id) {
					t.Fatalf("swarm %s lists %s, another target's session", swarm, id)
				}
			}
			if !slices.Equal(gotIDs, ids) {
				mismatch = swarm
			}
		}
		if mismatch == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("swarm %s does not list its sessions %v", mismatch, want[mismatch])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sortedIDs(ids ...string) []string {
	slices.Sort(ids)
	return ids
}
