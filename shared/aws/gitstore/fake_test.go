package gitstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	stypes "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/agentauth/agentauth/shared/aws/dynamostore"
)

// The fakes hold state in memory and answer the calls this package makes
// the way S3 and DynamoDB do (conditional writes included), with errors
// shaped as the SDK returns them. A call the package does not make, or an
// expression it does not write, is an error: the fakes check the requests
// too.

// apiError is an SDK error as a call returns it: an operation error around
// an HTTP response error around the service's error, whose message may
// quote the request (it must never reach one of ours).
func apiError(service, op string, status int, code string) error {
	return apiErrorOf(service, op, status, &smithy.GenericAPIError{Code: code, Message: "the request said " + leak})
}

func apiErrorOf(service, op string, status int, inner error) error {
	return &smithy.OperationError{ServiceID: service, OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: inner},
		RequestID:     "req-1",
	}}
}

// leak is text that stands for content: no error of ours may hold it.
const leak = "top-secret-content"

// fakeS3 is a bucket.
type fakeS3 struct {
	mu      sync.Mutex
	objects map[string][]byte
	gets    int
	puts    int
	// putErr, when set, answers a PUT before the bucket does (nil: go on).
	putErr func(attempt int, key string) error
	// getErr, when set, answers a GET before the bucket does (nil: go on).
	getErr func(ctx context.Context, key string) error
}

func newFakeS3() *fakeS3 { return &fakeS3{objects: map[string][]byte{}} }

func (f *fakeS3) PutObject(ctx context.Context, in *s3.PutObjectInput, _ ...func(*s3.Options)) (*s3.PutObjectOutput, error) {
	body, err := io.ReadAll(in.Body)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.puts++
	n, hook := f.puts, f.putErr
	f.mu.Unlock()
	if hook != nil {
		if err := hook(n, aws.ToString(in.Key)); err != nil {
			return nil, err
		}
	}
	if aws.ToInt64(in.ContentLength) != int64(len(body)) {
		return nil, apiError("S3", "PutObject", 400, "IncompleteBody")
	}
	if in.ChecksumSHA256 != nil {
		sum := sha256.Sum256(body)
		if *in.ChecksumSHA256 != base64.StdEncoding.EncodeToString(sum[:]) {
			return nil, apiError("S3", "PutObject", 400, "BadDigest")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := aws.ToString(in.Key)
	if _, ok := f.objects[key]; ok && aws.ToString(in.IfNoneMatch) == "*" {
		return nil, apiError("S3", "PutObject", 412, "PreconditionFailed")
	}
	f.objects[key] = body
	return &s3.PutObjectOutput{}, nil
}

func (f *fakeS3) GetObject(ctx context.Context, in *s3.GetObjectInput, _ ...func(*s3.Options)) (*s3.GetObjectOutput, error) {
	f.mu.Lock()
	f.gets++
	hook := f.getErr
	f.mu.Unlock()
	key := aws.ToString(in.Key)
	if hook != nil {
		if err := hook(ctx, key); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	body, ok := f.objects[key]
	f.mu.Unlock()
	if !ok {
		return nil, apiErrorOf("S3", "GetObject", 404, &stypes.NoSuchKey{Message: aws.String("no " + leak)})
	}
	return &s3.GetObjectOutput{Body: io.NopCloser(bytes.NewReader(body))}, nil
}

// calls is how many GETs and PUTs the bucket answered.
func (f *fakeS3) calls() (gets, puts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gets, f.puts
}

func (f *fakeS3) keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(maps.Keys(f.objects))
}

func (f *fakeS3) body(key string) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.objects[key]
}

func (f *fakeS3) set(key string, body []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[key] = body
}

type item = map[string]dtypes.AttributeValue

// fakeDynamo is the table: items by pk, and SweepIndex.
type fakeDynamo struct {
	mu    sync.Mutex
	table string
	items map[string]item
	// staleIndex, by pk, is an expiresAt the index still holds after the
	// table changed (a global secondary index lags).
	staleIndex map[string]int64
	// pageSize caps a Query page below its Limit (0: no cap).
	pageSize int
	// fail, when set, answers a call before the table does.
	fail func(op string) error

	ops          map[string]int
	inconsistent int // GetItems without ConsistentRead
	puts         []*dynamodb.PutItemInput
}

func newFakeDynamo(table string) *fakeDynamo {
	return &fakeDynamo{table: table, items: map[string]item{}, staleIndex: map[string]int64{}, ops: map[string]int{}}
}

var errFake = errors.New("fake: unsupported request")

func (f *fakeDynamo) begin(op string, table *string) error {
	f.mu.Lock()
	f.ops[op]++
	hook := f.fail
	f.mu.Unlock()
	if hook != nil {
		if err := hook(op); err != nil {
			return err
		}
	}
	if aws.ToString(table) != f.table {
		return apiErrorOf("DynamoDB", op, 400, &dtypes.ResourceNotFoundException{Message: aws.String("no table")})
	}
	return nil
}

func pkOf(it item) string {
	v, _ := it[dynamostore.PartitionKey].(*dtypes.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

func (f *fakeDynamo) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if err := f.begin("GetItem", in.TableName); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !aws.ToBool(in.ConsistentRead) {
		f.inconsistent++
	}
	if len(in.Key) != 1 || in.ProjectionExpression != nil {
		return nil, errFake
	}
	return &dynamodb.GetItemOutput{Item: maps.Clone(f.items[pkOf(in.Key)])}, nil
}

func (f *fakeDynamo) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if err := f.begin("PutItem", in.TableName); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, in)
	pk := pkOf(in.Item)
	if pk == "" {
		return nil, errFake
	}
	old, exists := f.items[pk]
	ok, err := holds(in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, old, exists)
	if err != nil {
		return nil, err
	}
	if !ok {
		ccf := &dtypes.ConditionalCheckFailedException{Message: aws.String("failed")}
		if in.ReturnValuesOnConditionCheckFailure == dtypes.ReturnValuesOnConditionCheckFailureAllOld && exists {
			ccf.Item = maps.Clone(old)
		}
		return nil, apiErrorOf("DynamoDB", "PutItem", 400, ccf)
	}
	f.items[pk] = maps.Clone(in.Item)
	delete(f.staleIndex, pk)
	return &dynamodb.PutItemOutput{}, nil
}

// holds evaluates the conditions this package writes, and no other.
func holds(cond *string, names map[string]string, values map[string]dtypes.AttributeValue, old item, exists bool) (bool, error) {
	if cond == nil {
		if len(names) > 0 || len(values) > 0 {
			return false, errFake
		}
		return true, nil
	}
	sv := func(av dtypes.AttributeValue) string {
		switch v := av.(type) {
		case *dtypes.AttributeValueMemberS:
			return "S:" + v.Value
		case *dtypes.AttributeValueMemberN:
			return "N:" + v.Value
		}
		return "?"
	}
	switch *cond {
	case "attribute_not_exists(#pk)":
		if names["#pk"] != dynamostore.PartitionKey || len(names) != 1 || len(values) != 0 {
			return false, errFake
		}
		return !exists, nil
	case "#commit = :old", "#version = :expect":
		parts := strings.Split(*cond, " = ")
		attr, ok := names[parts[0]]
		want, vok := values[parts[1]]
		if !ok || !vok || len(names) != 1 || len(values) != 1 {
			return false, errFake
		}
		got, has := old[attr]
		return exists && has && sv(got) == sv(want), nil
	}
	return false, fmt.Errorf("%w: condition %q", errFake, *cond)
}

func (f *fakeDynamo) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if err := f.begin("DeleteItem", in.TableName); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.ConditionExpression != nil {
		return nil, errFake
	}
	delete(f.items, pkOf(in.Key))
	return &dynamodb.DeleteItemOutput{}, nil
}

// Query answers the one query Expired makes, keys only, as SweepIndex
// holds them (staleIndex first).
func (f *fakeDynamo) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if err := f.begin("Query", in.TableName); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if aws.ToString(in.IndexName) != dynamostore.SweepIndex || aws.ToString(in.KeyConditionExpression) != "#set = :set AND #exp <= :t" ||
		in.FilterExpression != nil || aws.ToBool(in.ConsistentRead) ||
		in.ExpressionAttributeNames["#set"] != dynamostore.SweepSetAttribute || in.ExpressionAttributeNames["#exp"] != dynamostore.ExpiresAtAttribute {
		return nil, errFake
	}
	set := in.ExpressionAttributeValues[":set"].(*dtypes.AttributeValueMemberS).Value
	until, _ := strconv.ParseInt(in.ExpressionAttributeValues[":t"].(*dtypes.AttributeValueMemberN).Value, 10, 64)
	type entry struct {
		pk  string
		exp int64
	}
	var idx []entry
	for pk, it := range f.items {
		s, _ := it[dynamostore.SweepSetAttribute].(*dtypes.AttributeValueMemberS)
		n, _ := it[dynamostore.ExpiresAtAttribute].(*dtypes.AttributeValueMemberN)
		if s == nil || n == nil || s.Value != set {
			continue
		}
		exp, _ := strconv.ParseInt(n.Value, 10, 64)
		if stale, ok := f.staleIndex[pk]; ok {
			exp = stale
		}
		if exp <= until {
			idx = append(idx, entry{pk, exp})
		}
	}
	slices.SortFunc(idx, func(a, b entry) int {
		if a.exp != b.exp {
			return int(a.exp - b.exp)
		}
		return strings.Compare(a.pk, b.pk)
	})
	if start := pkOf(in.ExclusiveStartKey); start != "" {
		i := slices.IndexFunc(idx, func(e entry) bool { return e.pk == start })
		if i < 0 {
			return nil, errFake
		}
		idx = idx[i+1:]
	}
	limit := len(idx)
	if in.Limit != nil {
		limit = min(limit, int(*in.Limit))
	}
	if f.pageSize > 0 {
		limit = min(limit, f.pageSize)
	}
	out := &dynamodb.QueryOutput{}
	for _, e := range idx[:limit] {
		out.Items = append(out.Items, item{
			dynamostore.PartitionKey:       &dtypes.AttributeValueMemberS{Value: e.pk},
			dynamostore.SweepSetAttribute:  &dtypes.AttributeValueMemberS{Value: set},
			dynamostore.ExpiresAtAttribute: num(e.exp),
		})
	}
	if limit < len(idx) {
		out.LastEvaluatedKey = key(idx[limit-1].pk)
	}
	return out, nil
}

func (f *fakeDynamo) get(pk string) item {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.items[pk])
}

func (f *fakeDynamo) set(it item) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.items[pkOf(it)] = it
}

func (f *fakeDynamo) count(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops[op]
}
