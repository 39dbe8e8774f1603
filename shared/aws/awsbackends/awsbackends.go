// Package awsbackends opens agentauth's AWS backends from their Settings:
// the DynamoDB store, the KMS envelope sealer for grants, the session
// keyring from Secrets Manager, the SQS FIFO event queue and its dead
// letters, the Secrets
// Manager resolver for the bundle, the turn bucket and, for a git bundle,
// its repository (gitstore: objects in S3, ref and changeset records on
// the table). The Lambda functions and the admin CLI
// (`agentauth keys rewrap`) share it.
//
// Errors name the missing setting or secret, never a value.
package awsbackends

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/agentauth/agentauth/shared/aws/awsconfig"
	"github.com/agentauth/agentauth/shared/aws/awscount"
	"github.com/agentauth/agentauth/shared/aws/awssecrets"
	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/aws/gitstore"
	"github.com/agentauth/agentauth/shared/aws/kmsseal"
	"github.com/agentauth/agentauth/shared/aws/s3blobs"
	"github.com/agentauth/agentauth/shared/aws/sqsqueue"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/local/aesseal"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
	"github.com/agentauth/agentauth/shared/turn"
)

// Settings name the deployment's resources (shared/config reads them from
// the environment and reports missing ones by variable name).
type Settings struct {
	Table    string
	KMSKeyID string
	QueueURL string
	// DeadLetterQueueURL is QueueURL's dead-letter queue, listed and
	// redriven by DeadLetters ("": none).
	DeadLetterQueueURL string
	// SessionKeysSecret holds comma-separated random strings (≥ 32 chars),
	// the first current.
	SessionKeysSecret string
	// SecretPrefix maps bundle Secret/<name> to <prefix><name> (default
	// "agentauth/").
	SecretPrefix string
	// TurnBucket keeps the turn store's large items ("": none).
	TurnBucket string
	// BundleBucket and BundlePrefix hold the git bundle's objects (""
	// bucket: no git bundle); its active ref and changeset records are
	// items of Table.
	BundleBucket, BundlePrefix string
}

// BundleName names the deployment's one bundle: its active ref is the
// item bundle#main#head (gitstore).
const BundleName = "main"

// Backends are the opened AWS backends.
type Backends struct {
	Config        aws.Config
	Store         *dynamostore.Store
	GrantSealer   *kmsseal.Sealer
	SessionSealer *aesseal.Keyring
	Queue         *sqsqueue.Queue
	// DeadLetters lists and redrives the events queue's dead letters
	// (nil without DeadLetterQueueURL).
	DeadLetters domain.DeadLetters
	Secrets     *awssecrets.Resolver
	KMS         *kms.Client
	DynamoDB    *dynamodb.Client
	Table       string
	// Blobs is the turn bucket (nil without TurnBucket).
	Blobs *s3blobs.Store
	// BundleRepo and BundleRecords are the git bundle's history and its
	// changeset records (nil without BundleBucket).
	BundleRepo    *gitstore.Repo
	BundleRecords *gitstore.Records
	// BundleWhere says where the git bundle is, for the start line.
	BundleWhere string
}

// TurnStore is the turn store on the table, with the turn bucket for
// large items when there is one.
func (b *Backends) TurnStore() turn.Store {
	if b.Blobs == nil {
		return b.Store.Turns(nil)
	}
	return b.Store.Turns(b.Blobs)
}

// ToolLimiter is the tools' rate limiter on the table: one conditional
// UpdateItem per allowed call, across every Lambda.
func (b *Backends) ToolLimiter(limits ratelimit.Limits) (toolhooks.Limiter, error) {
	return dynamostore.NewToolLimiter(b.DynamoDB, b.Table, limits, nil)
}

// StateKeys are the state-signing keys (derived from the session keys).
func (b *Backends) StateKeys() [][]byte { return b.SessionSealer.DerivedKeys("state") }

// Open opens the backends s names; counter, when set, counts every AWS
// call.
func Open(ctx context.Context, s Settings, counter *awscount.Counter) (*Backends, error) {
	var missing []string
	for name, v := range map[string]string{"table": s.Table, "KMS key": s.KMSKeyID, "queue URL": s.QueueURL, "session keys secret": s.SessionKeysSecret} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("awsbackends: no %s", strings.Join(missing, ", "))
	}
	cfg, err := awsconfig.Load(ctx, counter)
	if err != nil {
		return nil, err
	}
	b := &Backends{Config: cfg, KMS: kms.NewFromConfig(cfg), DynamoDB: dynamodb.NewFromConfig(cfg), Table: s.Table}
	if b.Store, err = dynamostore.New(b.DynamoDB, b.Table); err != nil {
		return nil, err
	}
	if b.GrantSealer, err = kmsseal.New(b.KMS, s.KMSKeyID, kmsseal.Options{}); err != nil {
		return nil, err
	}
	sqsAPI := sqs.NewFromConfig(cfg)
	if b.Queue, err = sqsqueue.New(sqsAPI, s.QueueURL, sqsqueue.Options{}); err != nil {
		return nil, err
	}
	if s.DeadLetterQueueURL != "" {
		if b.DeadLetters, err = sqsqueue.NewDeadLetters(sqsAPI, s.DeadLetterQueueURL, b.Queue); err != nil {
			return nil, err
		}
	}
	var s3api *s3.Client
	if s.TurnBucket != "" || s.BundleBucket != "" {
		// Path-style addressing behind an endpoint override (an emulator
		// on 127.0.0.1 has no per-bucket host names).
		s3api = s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = cfg.BaseEndpoint != nil })
	}
	if s.TurnBucket != "" {
		if b.Blobs, err = s3blobs.New(s3api, s.TurnBucket); err != nil {
			return nil, err
		}
	}
	if s.BundleBucket != "" {
		if err := b.openBundle(s3api, s); err != nil {
			return nil, err
		}
	}
	prefix := s.SecretPrefix
	if prefix == "" {
		prefix = "agentauth/"
	}
	b.Secrets = awssecrets.New(secretsmanager.NewFromConfig(cfg), prefix)
	raw, err := b.Secrets.String(s.SessionKeysSecret)
	if err != nil {
		return nil, fmt.Errorf("session keys secret: %w", err)
	}
	keys, err := SessionKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("session keys secret: %w", err)
	}
	if b.SessionSealer, err = aesseal.New(keys[0], keys[1:]...); err != nil {
		return nil, err
	}
	return b, nil
}

// openBundle opens the git bundle: objects under the bundle folder, the
// active ref and the changeset records on the table. It makes no call.
func (b *Backends) openBundle(api gitstore.S3API, s Settings) error {
	objs, err := gitstore.NewObjects(api, s.BundleBucket, s.BundlePrefix)
	if err != nil {
		return err
	}
	if b.BundleRepo, err = gitstore.NewRepo(objs, b.DynamoDB, b.Table, BundleName); err != nil {
		return err
	}
	if b.BundleRecords, err = gitstore.NewRecords(b.DynamoDB, b.Table); err != nil {
		return err
	}
	b.BundleWhere = "git s3://" + s.BundleBucket + "/" + s.BundlePrefix
	return nil
}

// SessionKeys turns the session-keys secret — comma-separated random
// strings of at least 32 characters, the first current — into AES keys
// (SHA-256 of each), so Secrets Manager's generated passwords work as is
// and a rotation prepends a new string.
func SessionKeys(s domain.Secret) ([][]byte, error) {
	var keys [][]byte
	for i, part := range strings.Split(s.Reveal(), ",") {
		part = strings.TrimSpace(part)
		if len(part) < 32 {
			return nil, fmt.Errorf("key %d is shorter than 32 characters", i+1)
		}
		sum := sha256.Sum256([]byte(part))
		keys = append(keys, sum[:])
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	return keys, nil
}

// Routed seals grants with Grants and sessions with Sessions, as the
// OAuth core does; maintenance (rewrap) uses it over a whole table.
type Routed struct{ Grants, Sessions domain.Sealer }

func (r Routed) pick(b domain.Binding) domain.Sealer {
	if b.Record == "session" {
		return r.Sessions
	}
	return r.Grants
}

// Seal seals with the sealer for b's record kind.
func (r Routed) Seal(ctx context.Context, p []byte, b domain.Binding) (domain.EncryptedValue, error) {
	return r.pick(b).Seal(ctx, p, b)
}

// Open opens with the sealer for b's record kind.
func (r Routed) Open(ctx context.Context, v domain.EncryptedValue, b domain.Binding) ([]byte, error) {
	return r.pick(b).Open(ctx, v, b)
}

var _ domain.Sealer = Routed{}

// Rewrap moves every grant to the KMS key toKey: each sealed value is
// opened (with whichever key sealed it) and sealed again under toKey, under
// the record's version condition, so a concurrent refresh is never lost.
// Sessions keep their session-key sealing. It returns how many values were
// resealed.
func (b *Backends) Rewrap(ctx context.Context, toKey string) (int, error) {
	target, err := kmsseal.New(b.KMS, toKey, kmsseal.Options{})
	if err != nil {
		return 0, err
	}
	return b.Store.Reseal(ctx, Routed{Grants: target, Sessions: b.SessionSealer})
}
