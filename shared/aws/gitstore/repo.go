package gitstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/agentauth/agentauth/shared/aws/awserr"
	"github.com/agentauth/agentauth/shared/aws/dynamostore"
	"github.com/agentauth/agentauth/shared/changeset"
	"github.com/agentauth/agentauth/shared/domain"
)

// DynamoAPI is the part of *dynamodb.Client the head and the records use.
type DynamoAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

var _ DynamoAPI = (*dynamodb.Client)(nil)

// Attribute names and kinds of this package's items. They are the stored
// format: never change one.
const (
	attrKind      = "kind"
	attrCommit    = "commit"
	attrPrevious  = "previous"
	attrUpdatedAt = "updatedAt"
	attrVersion   = "version"
	attrDoc       = "doc"

	kindHead      = "BundleHead"
	kindChangeset = "Changeset"

	headPrefix      = "bundle#"
	headSuffix      = "#head"
	changesetPrefix = "changeset#"
)

// Repo is changeset.Repo on AWS: git objects in S3 (Objects) and the
// active ref as one DynamoDB item, moved by conditional writes. Any number
// of Repos (Lambdas, servers) may share the bucket and the table.
type Repo struct {
	objs  *Objects
	api   DynamoAPI
	table string
	name  string
}

var _ changeset.Repo = (*Repo)(nil)

// NewRepo returns the repository whose objects are objs and whose active
// ref is the item bundle#<name>#head of table (the stack's
// dynamostore table). name says which bundle ("main"): 1 to 64 letters,
// digits, '-', '_' or '.'. It makes no call.
func NewRepo(objs *Objects, api DynamoAPI, table, name string) (*Repo, error) {
	if objs == nil {
		return nil, errors.New("gitstore: nil object database")
	}
	if err := checkTable(api, table); err != nil {
		return nil, err
	}
	if !validName(name) {
		return nil, fmt.Errorf("gitstore: bundle name %.80q: want 1 to 64 letters, digits, '-', '_' or '.'", name)
	}
	return &Repo{objs: objs, api: api, table: table, name: name}, nil
}

func checkTable(api DynamoAPI, table string) error {
	if api == nil {
		return errors.New("gitstore: nil DynamoDB client")
	}
	if table == "" {
		return errors.New("gitstore: a table name is required")
	}
	return nil
}

func validName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// Objects is the object database.
func (r *Repo) Objects() storer.EncodedObjectStorer { return r.objs }

// headKey is the partition key of the active ref's item.
func (r *Repo) headKey() string { return headPrefix + r.name + headSuffix }

// Head reads the active ref with a strongly consistent GetItem.
func (r *Repo) Head(ctx context.Context) (plumbing.Hash, error) {
	out, err := r.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.table), Key: key(r.headKey()), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitstore: read the head of bundle %s: %w", r.name, dynamoError(r.table, err))
	}
	if len(out.Item) == 0 {
		return plumbing.ZeroHash, changeset.ErrNoRevision
	}
	h, err := decodeHead(out.Item)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("gitstore: the head of bundle %s: %w", r.name, err)
	}
	return h, nil
}

func decodeHead(item map[string]types.AttributeValue) (plumbing.Hash, error) {
	if kind, _ := stringAttr(item, attrKind); kind != kindHead {
		return plumbing.ZeroHash, fmt.Errorf("%w: not a %s item", domain.ErrCorrupt, kindHead)
	}
	sha, ok := stringAttr(item, attrCommit)
	if !ok || len(sha) != 40 || !plumbing.IsHash(sha) {
		return plumbing.ZeroHash, fmt.Errorf("%w: attribute %s is not a commit hash", domain.ErrCorrupt, attrCommit)
	}
	h := plumbing.NewHash(sha)
	if h.IsZero() {
		return plumbing.ZeroHash, fmt.Errorf("%w: attribute %s is the zero hash", domain.ErrCorrupt, attrCommit)
	}
	return h, nil
}

// SwapHead moves the active ref from old to new with one conditional
// PutItem: on attribute_not_exists(pk) when old is the zero hash, else on
// commit = old. A failed condition is changeset.ErrHeadMoved.
func (r *Repo) SwapHead(ctx context.Context, old, new plumbing.Hash) error {
	if new.IsZero() {
		return fmt.Errorf("gitstore: move the head of bundle %s to the zero hash", r.name)
	}
	item := map[string]types.AttributeValue{
		dynamostore.PartitionKey: str(r.headKey()),
		attrKind:                 str(kindHead),
		attrCommit:               str(new.String()),
		attrUpdatedAt:            str(time.Now().UTC().Format(time.RFC3339Nano)),
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(r.table), Item: item}
	if old.IsZero() {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk)")
		in.ExpressionAttributeNames = map[string]string{"#pk": dynamostore.PartitionKey}
	} else {
		item[attrPrevious] = str(old.String())
		in.ConditionExpression = aws.String("#commit = :old")
		in.ExpressionAttributeNames = map[string]string{"#commit": attrCommit}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":old": str(old.String())}
	}
	_, err := r.api.PutItem(ctx, in)
	if conditionFailed(err) {
		return changeset.ErrHeadMoved
	}
	if err != nil {
		return fmt.Errorf("gitstore: move the head of bundle %s from %s to %s: %w", r.name, old, new, dynamoError(r.table, err))
	}
	return nil
}

// DynamoDB values and errors.

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{dynamostore.PartitionKey: str(pk)}
}

func stringAttr(item map[string]types.AttributeValue, name string) (string, bool) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", false
	}
	return v.Value, true
}

// conditionFailed reports whether err is a write's failed condition.
func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// dynamoError describes an SDK error by awserr (never its message, which
// can quote the item), a missing table as dynamostore.ErrTableNotFound.
func dynamoError(table string, err error) error {
	var notFound *types.ResourceNotFoundException
	if errors.As(err, &notFound) {
		return fmt.Errorf("table %q: %w (create it as dynamostore.TableSchema describes)", table, dynamostore.ErrTableNotFound)
	}
	return awserr.Safe(err)
}
