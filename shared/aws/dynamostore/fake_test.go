package dynamostore

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// fakeDynamo answers each DynamoAPI call with the function set for it, and
// records the inputs. It proves only error translation: the semantics are
// tested against an emulator (integration tests).
type fakeDynamo struct {
	get   func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)
	put   func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	del   func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error)
	tx    func(n int, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
	scan  func(*dynamodb.ScanInput) (*dynamodb.ScanOutput, error)
	query func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error)
	batch func(*dynamodb.BatchGetItemInput) (*dynamodb.BatchGetItemOutput, error)

	mu  sync.Mutex
	txs []*dynamodb.TransactWriteItemsInput
}

var errUnexpected = errors.New("fake: unexpected call")

func (f *fakeDynamo) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if f.get == nil {
		return nil, errUnexpected
	}
	return f.get(in)
}

func (f *fakeDynamo) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if f.put == nil {
		return nil, errUnexpected
	}
	return f.put(in)
}

func (f *fakeDynamo) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if f.del == nil {
		return nil, errUnexpected
	}
	return f.del(in)
}

func (f *fakeDynamo) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	f.mu.Lock()
	f.txs = append(f.txs, in)
	n := len(f.txs)
	f.mu.Unlock()
	if f.tx == nil {
		return nil, errUnexpected
	}
	return f.tx(n, in)
}

func (f *fakeDynamo) Scan(_ context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	if f.scan == nil {
		return nil, errUnexpected
	}
	return f.scan(in)
}

func (f *fakeDynamo) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	if f.query == nil {
		return nil, errUnexpected
	}
	return f.query(in)
}

func (f *fakeDynamo) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	if f.batch == nil {
		return nil, errUnexpected
	}
	return f.batch(in)
}

// Errors as the SDK returns them.

func ccf(item map[string]types.AttributeValue) error {
	return &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed"), Item: item}
}

func noTable() error {
	return &types.ResourceNotFoundException{Message: aws.String("Requested resource not found")}
}

// missingTable is a fakeDynamo on which every call fails as it does on a
// table that does not exist.
func missingTable() *fakeDynamo {
	return &fakeDynamo{
		get:   func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) { return nil, noTable() },
		put:   func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, noTable() },
		del:   func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) { return nil, noTable() },
		scan:  func(*dynamodb.ScanInput) (*dynamodb.ScanOutput, error) { return nil, noTable() },
		query: func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error) { return nil, noTable() },
		tx: func(int, *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
			return nil, noTable()
		},
	}
}

// canceled builds a TransactionCanceledException; each reason is a code,
// optionally with the old item.
func canceled(reasons ...types.CancellationReason) error {
	return &types.TransactionCanceledException{
		Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons"),
		CancellationReasons: reasons,
	}
}

func reason(code string, item map[string]types.AttributeValue) types.CancellationReason {
	return types.CancellationReason{Code: aws.String(code), Item: item}
}
