package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/domain"
)

// DynamoAPI is the part of *dynamodb.Client the store uses: pass the
// client main builds once; tests wrap it to count or fake calls.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var _ DynamoAPI = (*dynamodb.Client)(nil)

// Table schema: see the package documentation.
const (
	// PartitionKey is the table's only key attribute, a string.
	PartitionKey = "pk"
	// TTLAttribute is the table's TimeToLive attribute (epoch seconds).
	TTLAttribute = "ttl"
	// SessionRetention is how long a session stays after its expiresAt
	// before DynamoDB may remove it (the OAuth manager's cleanup keeps
	// finished sessions as long).
	SessionRetention = 24 * time.Hour
	// LeaseRetention is how long a lease item stays after the lease ends.
	LeaseRetention = time.Hour

	// PendingIndex is the global secondary index of pending sessions by
	// resume target: partition key [PendingForAttribute] (S), sort key
	// [ExpiresAtAttribute] (N), every attribute projected. Sparse: a
	// session carries pendingFor only while it is pending.
	PendingIndex = "pending-by-target"
	// SweepIndex is the global secondary index of sessions by sweep set:
	// partition key [SweepSetAttribute] (S), sort key
	// [ExpiresAtAttribute] (N), keys only (the sweep reads each session it
	// lists).
	SweepIndex = "sweep-by-expiry"
	// PendingForAttribute holds a pending session's resume target,
	// hashed: domain.ResumeTargetKey of its swarm, instance key and agent.
	PendingForAttribute = "pendingFor"
	// SweepSetAttribute holds a session's domain.SweepSet.
	SweepSetAttribute = "sweepSet"
	// ExpiresAtAttribute is a session's expiry (and a lease's end) in Unix
	// milliseconds.
	ExpiresAtAttribute = "expiresAt"

	// ListIndex is the global secondary index of the operator lists by
	// scope: partition key [ListKeyAttribute] (S: a tenant's grants, a
	// tenant's sessions, a swarm's instances), sort key
	// [ListSortAttribute] (S: newest first), keys only.
	ListIndex = "list-by-scope"
	// ListAllIndex is the same over every tenant and swarm: partition key
	// [ListAllAttribute] (S: the kind), sort key [ListSortAttribute],
	// keys only.
	ListAllIndex = "list-all"
	// ListKeyAttribute holds a listed item's scope: "grant#t#<tenant>",
	// "session#t#<tenant>" or "turninst#<swarm>".
	ListKeyAttribute = "listKey"
	// ListAllAttribute holds a listed item's kind: "grant", "session" or
	// "turninst".
	ListAllAttribute = "listAll"
	// ListSortAttribute holds a listed item's domain.ListKey (a grant's
	// after "a#" when active, "r#" when revoked).
	ListSortAttribute = "listSort"
)

// Attribute names and kinds. They are the stored format: never change one.
const (
	attrKind        = "kind"
	attrVersion     = "version"
	attrDoc         = "doc"
	attrStatus      = "status"
	attrCreatedAt   = "createdAt"
	attrCompletedAt = "completedAt"
	attrOwner       = "owner"
	attrExpiresAt   = ExpiresAtAttribute
	attrPendingFor  = PendingForAttribute
	attrSweepSet    = SweepSetAttribute
	attrSessionID   = "sessionId"
	attrReuseUntil  = "reuseUntil"
	attrListKey     = ListKeyAttribute
	attrListAll     = ListAllAttribute
	attrListSort    = ListSortAttribute
	attrInstance    = "instance"

	attrTenant       = "tenant"
	attrResourceKind = "resourceKind" // Skill or Tool: "kind" is the item's
	attrName         = "name"
	attrSpec         = "spec"
	attrUpdatedAt    = "updatedAt"
	attrRevision     = "revision"

	kindGrant          = "OAuthGrantRecord"
	kindSession        = "AuthSessionRecord"
	kindLease          = "Lease"
	kindReusePointer   = "SessionReuse"
	kindTenantResource = "TenantResource"
	kindTenantRevision = "TenantRevision"

	grantPrefix      = "grant#"
	sessionPrefix    = "session#"
	leasePrefix      = "lease#"
	reusePrefix      = "reuse#"
	tenantResPrefix  = "tenantres#"
	tenantRevisionPK = "tenantrev"
)

// TableSchema is the CreateTable request for the store's table: pk (S) as
// the only key, the global secondary indexes [PendingIndex], [SweepIndex],
// [ListIndex] and [ListAllIndex], on-demand billing. Enable TimeToLive with TimeToLiveSpec
// once the table is active. infra/stack creates the same table.
func TableSchema(table string) *dynamodb.CreateTableInput {
	attr := func(name string, t types.ScalarAttributeType) types.AttributeDefinition {
		return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: t}
	}
	keys := func(hash, sort string) []types.KeySchemaElement {
		return []types.KeySchemaElement{
			{AttributeName: aws.String(hash), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(sort), KeyType: types.KeyTypeRange},
		}
	}
	return &dynamodb.CreateTableInput{
		TableName: aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{
			attr(PartitionKey, types.ScalarAttributeTypeS),
			attr(PendingForAttribute, types.ScalarAttributeTypeS),
			attr(SweepSetAttribute, types.ScalarAttributeTypeS),
			attr(ExpiresAtAttribute, types.ScalarAttributeTypeN),
			attr(ListKeyAttribute, types.ScalarAttributeTypeS),
			attr(ListAllAttribute, types.ScalarAttributeTypeS),
			attr(ListSortAttribute, types.ScalarAttributeTypeS),
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{
				IndexName:  aws.String(PendingIndex),
				KeySchema:  keys(PendingForAttribute, ExpiresAtAttribute),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
			},
			{
				IndexName:  aws.String(SweepIndex),
				KeySchema:  keys(SweepSetAttribute, ExpiresAtAttribute),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
			},
			{
				IndexName:  aws.String(ListIndex),
				KeySchema:  keys(ListKeyAttribute, ListSortAttribute),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
			},
			{
				IndexName:  aws.String(ListAllIndex),
				KeySchema:  keys(ListAllAttribute, ListSortAttribute),
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
			},
		},
		BillingMode: types.BillingModePayPerRequest,
	}
}

// TimeToLiveSpec is the UpdateTimeToLive request that lets DynamoDB remove
// finished sessions and stale leases.
func TimeToLiveSpec(table string) *dynamodb.UpdateTimeToLiveInput {
	return &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	}
}

// ErrTableNotFound: the store's table does not exist in the account and
// region the client talks to. Errors wrapping it name the table.
var ErrTableNotFound = errors.New("table does not exist")

type tableNotFoundError struct{ table string }

func (e tableNotFoundError) Error() string {
	return fmt.Sprintf("table %q does not exist (create it as dynamostore.TableSchema describes)", e.table)
}

func (e tableNotFoundError) Is(target error) bool { return target == ErrTableNotFound }

// Store is domain.Store on one DynamoDB table. It is safe for concurrent
// use, and any number of Stores (Lambdas) may share the table.
type Store struct {
	api   DynamoAPI
	table string
	now   func() time.Time
	// scanLimit caps the items one Scan or Query page examines; 0 leaves
	// DynamoDB's 1 MB page. Tests lower it to exercise pagination.
	scanLimit int32
	// known remembers records this Store has read or written, so that
	// CompleteSession can write without reading first (see sessions.go).
	known known
	// blobCache keeps the S3 objects of large turn items (turns.go).
	blobCache blobCache
}

var _ domain.Store = (*Store)(nil)

// New returns the store on table, talking to DynamoDB through api (a
// *dynamodb.Client built once in main). It makes no call: a missing table
// shows up as an error wrapping ErrTableNotFound on first use.
func New(api DynamoAPI, table string) (*Store, error) {
	if api == nil {
		return nil, errors.New("dynamostore: nil DynamoDB client")
	}
	if err := validTableName(table); err != nil {
		return nil, fmt.Errorf("dynamostore: %w", err)
	}
	return &Store{api: api, table: table, now: time.Now}, nil
}

// Table is the name of the store's table.
func (s *Store) Table() string { return s.table }

// validTableName checks DynamoDB's rule: 3 to 255 of [a-zA-Z0-9_.-].
func validTableName(name string) error {
	ok := len(name) >= 3 && len(name) <= 255
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
	}
	if !ok {
		return fmt.Errorf("table name %.80q: want 3 to 255 letters, digits, '_', '.' or '-'", name)
	}
	return nil
}

// apiError translates an SDK error that has no meaning of its own for the
// operation at hand; any other is described by awserr, without its message. Conditional failures are handled by each operation
// (they carry the old item, which must never reach an error), so one that
// gets here only says that a write lost.
func (s *Store) apiError(err error) error {
	var (
		notFound *types.ResourceNotFoundException
		ccf      *types.ConditionalCheckFailedException
		canceled *types.TransactionCanceledException
		txc      *types.TransactionConflictException
	)
	switch {
	case errors.As(err, &notFound):
		return tableNotFoundError{s.table}
	case errors.As(err, &ccf):
		return fmt.Errorf("condition failed: %w", domain.ErrConflict)
	case errors.As(err, &canceled):
		return fmt.Errorf("transaction canceled (%s)", reasonCodes(canceled.CancellationReasons))
	case errors.As(err, &txc):
		// Another transaction holds the item; the write did not happen.
		return fmt.Errorf("the record is part of a transaction in progress: %w", domain.ErrConflict)
	}
	return awserr.Safe(err)
}

// conditionFailed returns the item a failed condition saw (nil when
// absent or not asked for) and whether err is a failed condition.
func conditionFailed(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

// Values for attributes and expressions.

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func timeText(t time.Time) (string, error) {
	b, err := t.MarshalText()
	return string(b), err
}

// epochCeil is t in whole epoch seconds, rounded up.
func epochCeil(t time.Time) int64 {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return sec
}

// Reading attributes. Errors wrap domain.ErrCorrupt and name the attribute,
// never its value.

func getS(item map[string]types.AttributeValue, name string) (string, bool, error) {
	av, ok := item[name]
	if !ok {
		return "", false, nil
	}
	v, ok := av.(*types.AttributeValueMemberS)
	if !ok {
		return "", true, fmt.Errorf("%w: attribute %s is not a string", domain.ErrCorrupt, name)
	}
	return v.Value, true, nil
}

func needS(item map[string]types.AttributeValue, name string) (string, error) {
	v, ok, err := getS(item, name)
	if err == nil && !ok {
		err = fmt.Errorf("%w: attribute %s is missing", domain.ErrCorrupt, name)
	}
	return v, err
}

func needN(item map[string]types.AttributeValue, name string) (int64, error) {
	av, ok := item[name]
	if !ok {
		return 0, fmt.Errorf("%w: attribute %s is missing", domain.ErrCorrupt, name)
	}
	v, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%w: attribute %s is not a number", domain.ErrCorrupt, name)
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: attribute %s is not an integer", domain.ErrCorrupt, name)
	}
	return n, nil
}

func needTime(item map[string]types.AttributeValue, name string) (time.Time, error) {
	v, err := needS(item, name)
	if err != nil {
		return time.Time{}, err
	}
	var t time.Time
	if t.UnmarshalText([]byte(v)) != nil {
		return time.Time{}, fmt.Errorf("%w: attribute %s is not an RFC 3339 time", domain.ErrCorrupt, name)
	}
	return t, nil
}

func checkKind(item map[string]types.AttributeValue, want string) error {
	kind, err := needS(item, attrKind)
	if err != nil {
		return err
	}
	if kind != want {
		return fmt.Errorf("%w: kind %.40q, want %s", domain.ErrCorrupt, kind, want)
	}
	return nil
}

// key is the primary key of the item with partition key pk.
func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{PartitionKey: str(pk)}
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
