//go:build integration

package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/testkit/emulatortest"
	"github.com/agentauth/agentauth/shared/testkit/storetest"
	"github.com/agentauth/agentauth/shared/testkit/turnstoretest"
	"github.com/agentauth/agentauth/shared/turn"
)

// docs/deploy.md's agentauth admin backfill-list-index, run with a
// deployment's variables on the emulator: the grant, session and instance
// written as versions before the list indexes wrote them (no list
// attributes) are listed afterwards, an unreadable grant is reported by
// its key (exit 1), and a second run sets nothing.
func TestBackfillListIndexCommandEmulator(t *testing.T) {
	ctx := context.Background()
	cfg := emulatortest.Config(t)
	ddb := dynamodb.NewFromConfig(cfg)
	table := emulatortest.DynamoTable(t, ddb, "agentauth-backfill-cli-", dynamostore.TableSchema, dynamostore.TimeToLiveSpec)
	deploymentEnv(t, cfg, table)

	s, err := dynamostore.New(ddb, table)
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.PutGrant(ctx, storetest.SampleGrant(storetest.NewGrantID()), 0)
	if err != nil {
		t.Fatal(err)
	}
	broken, err := s.PutGrant(ctx, storetest.SampleGrant(storetest.NewGrantID()), 0)
	if err != nil {
		t.Fatal(err)
	}
	sess := storetest.SampleSession(storetest.NewSessionID())
	if err := s.CreateSession(ctx, sess); err != nil {
		t.Fatal(err)
	}
	k := turnstoretest.Key(t)
	if err := s.Turns(nil).Commit(ctx, turnstoretest.First(k)); err != nil {
		t.Fatal(err)
	}
	// As versions before the list indexes wrote them.
	if n := stripListAttributes(t, ddb, table); n != 4 {
		t.Fatalf("stripped %d items, want 4 (two grants, a session, an instance)", n)
	}
	if _, err := ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "grant#" + broken.ID}},
		UpdateExpression:          aws.String("SET #d = :d"),
		ExpressionAttributeNames:  map[string]string{"#d": "doc"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":d": &types.AttributeValueMemberS{Value: "{"}},
	}); err != nil {
		t.Fatal(err)
	}
	listed := func() (grants, sessions, instances []string) {
		t.Helper()
		gp, err := s.QueryGrants(ctx, domain.GrantQuery{AnyTenant: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gp.Grants {
			grants = append(grants, g.ID)
		}
		sp, err := s.QuerySessions(ctx, domain.SessionQuery{AnyTenant: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range sp.Sessions {
			sessions = append(sessions, x.ID)
		}
		ip, err := s.Turns(nil).(turn.InstanceQuerier).QueryInstances(ctx, turn.InstanceQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range ip.Instances {
			instances = append(instances, in.Key.Key)
		}
		return grants, sessions, instances
	}
	if a, b, c := listed(); len(a)+len(b)+len(c) != 0 {
		t.Fatalf("listed before the backfill: %q %q %q", a, b, c)
	}

	args := listIndexDocCommands(t)[0]
	out, errOut, err := runCmd(t, args...)
	if err == nil || !strings.Contains(err.Error(), "1 item could not be read") {
		t.Fatalf("%q: err = %v (stdout %q, stderr %q)", args, err, out, errOut)
	}
	// Examined: every item of the table, the turn's too.
	if want := regexp.MustCompile(`^set the list attributes on 3 items \([4-9] examined\)\nunreadable: grant#` + broken.ID + "\n$"); !want.MatchString(out) {
		t.Fatalf("stdout %q, want %s", out, want)
	}
	if a, b, c := listed(); len(a) != 1 || a[0] != g.ID || len(b) != 1 || b[0] != sess.ID || len(c) != 1 || c[0] != k.Key {
		t.Fatalf("listed after the backfill: %q %q %q", a, b, c)
	}

	out, _, err = runCmd(t, args...)
	if err == nil || !strings.HasPrefix(out, "set the list attributes on 0 items") || !strings.Contains(out, "unreadable: grant#"+broken.ID) {
		t.Fatalf("second run: %q, %v", out, err)
	}
	if _, err := ddb.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "grant#" + broken.ID}}}); err != nil {
		t.Fatal(err)
	}
	if out, _, err = runCmd(t, args...); err != nil || !strings.HasPrefix(out, "set the list attributes on 0 items (") || strings.Contains(out, "unreadable") {
		t.Fatalf("after removing the unreadable grant: %q, %v", out, err)
	}
}

// deploymentEnv sets the functions' variables for a deployment on the
// emulator around table: a KMS key, a FIFO queue and a session-keys
// secret of its own, removed when the test ends.
func deploymentEnv(t *testing.T, cfg aws.Config, table string) {
	t.Helper()
	ctx := context.Background()
	kmsc, sqsc, sm := kms.NewFromConfig(cfg), sqs.NewFromConfig(cfg), secretsmanager.NewFromConfig(cfg)
	key, err := kmsc.CreateKey(ctx, &kms.CreateKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = kmsc.ScheduleKeyDeletion(context.Background(), &kms.ScheduleKeyDeletionInput{KeyId: key.KeyMetadata.KeyId, PendingWindowInDays: aws.Int32(7)})
	})
	q, err := sqsc.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(table + ".fifo"), Attributes: map[string]string{"FifoQueue": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = sqsc.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	secret := table + "-session-keys"
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(secret), SecretString: aws.String(strings.Repeat("k", 40))}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = sm.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(secret), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	t.Setenv("AGENTAUTH_HOME", t.TempDir())
	t.Setenv(config.Table, table)
	t.Setenv(config.KMSKeyID, *key.KeyMetadata.Arn)
	t.Setenv(config.QueueURL, *q.QueueUrl)
	t.Setenv(config.SessionKeysSecret, secret)
	t.Setenv(config.TurnBucket, "")
	t.Setenv(config.DeadLetterQueueURL, "")
	t.Setenv(config.BundleRepo, "")
}

// stripListAttributes removes the list attributes (and an instance's
// instance record) from every item that has them, as versions before the
// list indexes wrote their items; it returns how many it changed.
func stripListAttributes(t *testing.T, ddb *dynamodb.Client, table string) int {
	t.Helper()
	ctx := context.Background()
	out, err := ddb.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("pk"), FilterExpression: aws.String("attribute_exists(#ls)"),
		ExpressionAttributeNames: map[string]string{"#ls": dynamostore.ListSortAttribute}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.LastEvaluatedKey) > 0 {
		t.Fatal("more than one page of items")
	}
	for _, item := range out.Items {
		if _, err := ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: item,
			UpdateExpression: aws.String("REMOVE #a, #b, #c, #d"),
			ExpressionAttributeNames: map[string]string{"#a": dynamostore.ListKeyAttribute, "#b": dynamostore.ListAllAttribute,
				"#c": dynamostore.ListSortAttribute, "#d": "instance"},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return len(out.Items)
}
