package dynamostore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// memTable is an in-memory DynamoDB table for the grant, session and lease
// requests of the Store. It evaluates the small expression grammar the
// Store writes (conditions: OR of ANDs of comparisons, IN,
// attribute_exists and attribute_not_exists; updates: SET and REMOVE; key
// conditions: a partition key equality and one sort key comparison) and
// anything else is an error, refuses what DynamoDB refuses that the Store
// could get wrong (an index key attribute of the wrong type, two
// operations on one item in a transaction, a consistent read of a global
// secondary index), and derives its indexes from TableSchema on every
// Query. So the conformance suite checks the Store's own logic (keys,
// conditions, index attributes after every write) without an emulator.
// Its indexes are strongly consistent, DynamoDB's are not; the integration
// tests run the same suite on the emulator.
//
// It counts calls by operation, for the cost tests.
type memTable struct {
	schema *dynamodb.CreateTableInput

	mu    sync.Mutex
	items map[string]map[string]types.AttributeValue
	calls map[string]int
}

var _ DynamoAPI = (*memTable)(nil)

func newMemTable() *memTable {
	return &memTable{schema: TableSchema("agentauth-test"), items: map[string]map[string]types.AttributeValue{}}
}

func (m *memTable) count(op string) {
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[op]++
}

// takeCalls returns the counts so far and starts again.
func (m *memTable) takeCalls() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.calls
	m.calls = nil
	if out == nil {
		out = map[string]int{}
	}
	return out
}

var errValidation = errors.New("memtable: ValidationException")

func (m *memTable) checkTable(name *string) error {
	if aws.ToString(name) != aws.ToString(m.schema.TableName) {
		return fmt.Errorf("%w: table %q", errValidation, aws.ToString(name))
	}
	return nil
}

// checkTypes refuses an item whose key or index key attribute has another
// type than the schema defines, as DynamoDB does.
func (m *memTable) checkTypes(item map[string]types.AttributeValue) error {
	for _, d := range m.schema.AttributeDefinitions {
		av, ok := item[aws.ToString(d.AttributeName)]
		if !ok {
			continue
		}
		if got := avType(av); got != d.AttributeType {
			return fmt.Errorf("%w: attribute %s is %s, the schema says %s", errValidation, aws.ToString(d.AttributeName), got, d.AttributeType)
		}
	}
	return nil
}

func avType(av types.AttributeValue) types.ScalarAttributeType {
	switch av.(type) {
	case *types.AttributeValueMemberS:
		return types.ScalarAttributeTypeS
	case *types.AttributeValueMemberN:
		return types.ScalarAttributeTypeN
	case *types.AttributeValueMemberB:
		return types.ScalarAttributeTypeB
	}
	return "other"
}

func (m *memTable) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count("GetItem")
	if err := m.checkTable(in.TableName); err != nil {
		return nil, err
	}
	if !aws.ToBool(in.ConsistentRead) || in.ProjectionExpression != nil {
		return nil, errUnexpected
	}
	return &dynamodb.GetItemOutput{Item: maps.Clone(m.items[pkOf(in.Key)])}, nil
}

// BatchGetItem reads up to 100 keys of the table, strongly consistent
// only; it never leaves keys unprocessed.
func (m *memTable) BatchGetItem(_ context.Context, in *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count("BatchGetItem")
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	n := 0
	for table, ka := range in.RequestItems {
		if err := m.checkTable(&table); err != nil {
			return nil, err
		}
		if !aws.ToBool(ka.ConsistentRead) || ka.ProjectionExpression != nil {
			return nil, errUnexpected
		}
		seen := map[string]bool{}
		for _, k := range ka.Keys {
			pk := pkOf(k)
			if seen[pk] {
				return nil, fmt.Errorf("%w: duplicate key %s in BatchGetItem", errValidation, pk)
			}
			seen[pk] = true
			n++
			if item, ok := m.items[pk]; ok {
				out.Responses[table] = append(out.Responses[table], maps.Clone(item))
			}
		}
	}
	if n == 0 || n > 100 {
		return nil, fmt.Errorf("%w: BatchGetItem of %d keys", errValidation, n)
	}
	return out, nil
}

func (m *memTable) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count("PutItem")
	if err := m.checkTable(in.TableName); err != nil {
		return nil, err
	}
	if err := m.checkTypes(in.Item); err != nil {
		return nil, err
	}
	if err := checkUsed(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression); err != nil {
		return nil, err
	}
	pk := pkOf(in.Item)
	old := m.items[pk]
	if ok, err := evalCondition(in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, old); err != nil {
		return nil, err
	} else if !ok {
		return nil, ccf(returnOld(in.ReturnValuesOnConditionCheckFailure, old))
	}
	m.items[pk] = maps.Clone(in.Item)
	return &dynamodb.PutItemOutput{}, nil
}

func (m *memTable) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count("DeleteItem")
	if err := m.checkTable(in.TableName); err != nil {
		return nil, err
	}
	if err := checkUsed(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.ConditionExpression); err != nil {
		return nil, err
	}
	pk := pkOf(in.Key)
	old := m.items[pk]
	if ok, err := evalCondition(in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, old); err != nil {
		return nil, err
	} else if !ok {
		return nil, ccf(returnOld(in.ReturnValuesOnConditionCheckFailure, old))
	}
	delete(m.items, pk)
	return &dynamodb.DeleteItemOutput{}, nil
}

func returnOld(rv types.ReturnValuesOnConditionCheckFailure, old map[string]types.AttributeValue) map[string]types.AttributeValue {
	if rv == types.ReturnValuesOnConditionCheckFailureAllOld {
		return maps.Clone(old)
	}
	return nil
}

func (m *memTable) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count("TransactWriteItems")
	type write struct {
		pk   string
		item map[string]types.AttributeValue // nil: delete
	}
	var writes []write
	seen := map[string]bool{}
	reasons := make([]types.CancellationReason, len(in.TransactItems))
	failed := false
	for i, op := range in.TransactItems {
		var (
			table, cond, update *string
			names               map[string]string
			values              map[string]types.AttributeValue
			rv                  types.ReturnValuesOnConditionCheckFailure
			pk                  string
			next                func(old map[string]types.AttributeValue) (map[string]types.AttributeValue, error)
		)
		switch {
		case op.Put != nil:
			p := op.Put
			table, cond, names, values, rv, pk = p.TableName, p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues, p.ReturnValuesOnConditionCheckFailure, pkOf(p.Item)
			next = func(map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
				return maps.Clone(p.Item), nil
			}
		case op.Update != nil:
			u := op.Update
			table, cond, names, values, rv, pk = u.TableName, u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues, u.ReturnValuesOnConditionCheckFailure, pkOf(u.Key)
			update = u.UpdateExpression
			next = func(old map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
				item := maps.Clone(old)
				if item == nil {
					item = maps.Clone(u.Key)
				}
				return item, applyUpdate(aws.ToString(u.UpdateExpression), u.ExpressionAttributeNames, u.ExpressionAttributeValues, item)
			}
		case op.Delete != nil:
			d := op.Delete
			table, cond, names, values, rv, pk = d.TableName, d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues, d.ReturnValuesOnConditionCheckFailure, pkOf(d.Key)
			next = func(map[string]types.AttributeValue) (map[string]types.AttributeValue, error) { return nil, nil }
		default:
			return nil, errUnexpected
		}
		if err := m.checkTable(table); err != nil {
			return nil, err
		}
		if err := checkUsed(names, values, cond, update); err != nil {
			return nil, err
		}
		if seen[pk] {
			return nil, fmt.Errorf("%w: two operations on item %s in one transaction", errValidation, pk)
		}
		seen[pk] = true
		old := m.items[pk]
		item, err := next(old)
		if err != nil {
			return nil, err
		}
		if item != nil {
			if err := m.checkTypes(item); err != nil {
				return nil, err
			}
		}
		ok, err := evalCondition(cond, names, values, old)
		if err != nil {
			return nil, err
		}
		reasons[i] = types.CancellationReason{Code: aws.String("None")}
		if !ok {
			failed = true
			reasons[i] = types.CancellationReason{Code: aws.String("ConditionalCheckFailed"), Item: returnOld(rv, old)}
		}
		writes = append(writes, write{pk, item})
	}
	if failed {
		return nil, canceled(reasons...)
	}
	for _, w := range writes {
		if w.item == nil {
			delete(m.items, w.pk)
		} else {
			m.items[w.pk] = w.item
		}
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// Scan examines items in key order, at most Limit a page.
func (m *memTable) Scan(_ context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count("Scan")
	if err := m.checkTable(in.TableName); err != nil {
		return nil, err
	}
	if !aws.ToBool(in.ConsistentRead) {
		return nil, errUnexpected
	}
	if err := checkUsed(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.FilterExpression, in.ProjectionExpression); err != nil {
		return nil, err
	}
	keys := slices.Sorted(maps.Keys(m.items))
	start := 0
	if in.ExclusiveStartKey != nil {
		start, _ = slices.BinarySearch(keys, pkOf(in.ExclusiveStartKey))
		if start < len(keys) && keys[start] == pkOf(in.ExclusiveStartKey) {
			start++
		}
	}
	end := len(keys)
	if in.Limit != nil && start+int(*in.Limit) < end {
		end = start + int(*in.Limit)
	}
	out := &dynamodb.ScanOutput{ScannedCount: int32(end - start)}
	for _, k := range keys[start:end] {
		ok, err := evalCondition(in.FilterExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues, m.items[k])
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		item := maps.Clone(m.items[k])
		if p := aws.ToString(in.ProjectionExpression); p != "" {
			if p != "#pk" {
				return nil, errUnexpected
			}
			item = key(k)
		}
		out.Items = append(out.Items, item)
	}
	if end < len(keys) {
		out.LastEvaluatedKey = key(keys[end-1])
	}
	return out, nil
}

// Query reads a global secondary index of the schema: the items that
// carry both its key attributes, in sort key order (then by pk), as the
// index projects them.
func (m *memTable) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.count("Query")
	if err := m.checkTable(in.TableName); err != nil {
		return nil, err
	}
	if aws.ToBool(in.ConsistentRead) {
		return nil, fmt.Errorf("%w: consistent reads are not supported on global secondary indexes", errValidation)
	}
	if in.FilterExpression != nil || in.ProjectionExpression != nil || (in.ScanIndexForward != nil && !*in.ScanIndexForward) ||
		in.Select != "" && in.Select != types.SelectCount {
		return nil, errUnexpected
	}
	if err := checkUsed(in.ExpressionAttributeNames, in.ExpressionAttributeValues, in.KeyConditionExpression); err != nil {
		return nil, err
	}
	var gsi *types.GlobalSecondaryIndex
	for i := range m.schema.GlobalSecondaryIndexes {
		if aws.ToString(m.schema.GlobalSecondaryIndexes[i].IndexName) == aws.ToString(in.IndexName) {
			gsi = &m.schema.GlobalSecondaryIndexes[i]
		}
	}
	if gsi == nil {
		return nil, fmt.Errorf("%w: no index %q", errValidation, aws.ToString(in.IndexName))
	}
	hash, rng := aws.ToString(gsi.KeySchema[0].AttributeName), aws.ToString(gsi.KeySchema[1].AttributeName)
	// "#s BETWEEN :lo AND :hi" is "#s >= :lo AND #s <= :hi".
	cond := aws.String(between.ReplaceAllString(aws.ToString(in.KeyConditionExpression), "$1 >= $2 AND $1 <= $3"))
	parts := strings.SplitN(aws.ToString(cond), " AND ", 2)
	if len(parts) == 0 || !strings.Contains(parts[0], " = ") {
		return nil, errUnexpected
	}
	if a, _ := parseAtom(parts[0], in.ExpressionAttributeNames); a.name != hash {
		return nil, fmt.Errorf("%w: key condition %q does not name the index's partition key first", errValidation, parts[0])
	}
	if len(parts) == 2 {
		first, _, _ := strings.Cut(parts[1], " AND ")
		if a, _ := parseAtom(first, in.ExpressionAttributeNames); a.name != rng {
			return nil, fmt.Errorf("%w: key condition %q does not name the index's sort key", errValidation, parts[1])
		}
	}
	type entry struct {
		pk   string
		sort types.AttributeValue
	}
	var hits []entry
	for pk, item := range m.items {
		if _, ok := item[hash]; !ok {
			continue
		}
		sv, ok := item[rng]
		if !ok || avType(sv) != m.attrType(rng) {
			continue
		}
		ok, err := evalCondition(cond, in.ExpressionAttributeNames, in.ExpressionAttributeValues, item)
		if err != nil {
			return nil, err
		}
		if ok {
			hits = append(hits, entry{pk, sv})
		}
	}
	slices.SortFunc(hits, func(a, b entry) int {
		c, _ := compareAV(a.sort, b.sort)
		return cmp.Or(c, strings.Compare(a.pk, b.pk))
	})
	start := 0
	if in.ExclusiveStartKey != nil {
		after := pkOf(in.ExclusiveStartKey)
		start = slices.IndexFunc(hits, func(e entry) bool { return e.pk == after }) + 1
	}
	end := len(hits)
	if in.Limit != nil && start+int(*in.Limit) < end {
		end = start + int(*in.Limit)
	}
	out := &dynamodb.QueryOutput{Count: int32(end - start)}
	for _, h := range hits[start:end] {
		if in.Select == types.SelectCount {
			break
		}
		item := m.items[h.pk]
		if gsi.Projection.ProjectionType == types.ProjectionTypeKeysOnly {
			item = map[string]types.AttributeValue{PartitionKey: item[PartitionKey], hash: item[hash], rng: item[rng]}
		}
		out.Items = append(out.Items, maps.Clone(item))
	}
	if end < len(hits) {
		last := m.items[hits[end-1].pk]
		out.LastEvaluatedKey = map[string]types.AttributeValue{PartitionKey: last[PartitionKey], hash: last[hash], rng: last[rng]}
	}
	return out, nil
}

var between = regexp.MustCompile(`(#\w+) BETWEEN (:\w+) AND (:\w+)`)

// attrType is the schema's type of an attribute ("" when it defines none).
func (m *memTable) attrType(name string) types.ScalarAttributeType {
	for _, d := range m.schema.AttributeDefinitions {
		if aws.ToString(d.AttributeName) == name {
			return d.AttributeType
		}
	}
	return ""
}

// checkUsed refuses names and values that no expression of the request
// uses, as DynamoDB does.
func checkUsed(names map[string]string, values map[string]types.AttributeValue, exprs ...*string) error {
	all := ""
	for _, e := range exprs {
		all += aws.ToString(e) + " "
	}
	used := regexp.MustCompile(`[#:]\w+`).FindAllString(all, -1)
	for n := range names {
		if !slices.Contains(used, n) {
			return fmt.Errorf("%w: name %s is not used in any expression", errValidation, n)
		}
	}
	for v := range values {
		if !slices.Contains(used, v) {
			return fmt.Errorf("%w: value %s is not used in any expression", errValidation, v)
		}
	}
	return nil
}

// The expression grammar.

type atom struct {
	fn     string // attribute_exists, attribute_not_exists, or "" for a comparison
	name   string // attribute name
	op     string // =, <>, <, <=, >, >=, IN
	values []string
}

var (
	fnAtom  = regexp.MustCompile(`^(attribute_exists|attribute_not_exists)\((#\w+)\)$`)
	inAtom  = regexp.MustCompile(`^(#\w+) IN \((:\w+(?:, :\w+)*)\)$`)
	cmpAtom = regexp.MustCompile(`^(#\w+) (=|<>|<=|<|>=|>) (:\w+)$`)
)

func parseAtom(s string, names map[string]string) (atom, error) {
	resolve := func(n string) (string, error) {
		v, ok := names[n]
		if !ok {
			return "", fmt.Errorf("%w: name %s is not defined", errValidation, n)
		}
		return v, nil
	}
	var a atom
	var err error
	switch {
	case fnAtom.MatchString(s):
		m := fnAtom.FindStringSubmatch(s)
		a.fn = m[1]
		a.name, err = resolve(m[2])
	case inAtom.MatchString(s):
		m := inAtom.FindStringSubmatch(s)
		a.op, a.values = "IN", strings.Split(m[2], ", ")
		a.name, err = resolve(m[1])
	case cmpAtom.MatchString(s):
		m := cmpAtom.FindStringSubmatch(s)
		a.op, a.values = m[2], []string{m[3]}
		a.name, err = resolve(m[1])
	default:
		return atom{}, fmt.Errorf("%w: expression %q", errUnexpected, s)
	}
	return a, err
}

// evalCondition evaluates an OR of ANDs of atoms on item (nil: absent).
// A nil expression holds.
func evalCondition(expr *string, names map[string]string, values map[string]types.AttributeValue, item map[string]types.AttributeValue) (bool, error) {
	if expr == nil {
		return true, nil
	}
	anyOK := false
	for _, conj := range strings.Split(*expr, " OR ") {
		all := true
		for _, s := range strings.Split(conj, " AND ") {
			a, err := parseAtom(s, names)
			if err != nil {
				return false, err
			}
			ok, err := a.eval(values, item)
			if err != nil {
				return false, err
			}
			all = all && ok
		}
		anyOK = anyOK || all
	}
	return anyOK, nil
}

func (a atom) eval(values map[string]types.AttributeValue, item map[string]types.AttributeValue) (bool, error) {
	got, exists := item[a.name]
	switch a.fn {
	case "attribute_exists":
		return exists, nil
	case "attribute_not_exists":
		return !exists, nil
	}
	for _, v := range a.values {
		want, ok := values[v]
		if !ok {
			return false, fmt.Errorf("%w: value %s is not defined", errValidation, v)
		}
		if !exists {
			continue
		}
		c, comparable := compareAV(got, want)
		if !comparable {
			continue
		}
		switch a.op {
		case "=", "IN":
			if c == 0 {
				return true, nil
			}
		case "<>":
			return c != 0, nil
		case "<":
			return c < 0, nil
		case "<=":
			return c <= 0, nil
		case ">":
			return c > 0, nil
		case ">=":
			return c >= 0, nil
		}
	}
	return false, nil
}

// compareAV compares two values of one scalar type.
func compareAV(a, b types.AttributeValue) (int, bool) {
	switch a := a.(type) {
	case *types.AttributeValueMemberS:
		if b, ok := b.(*types.AttributeValueMemberS); ok {
			return strings.Compare(a.Value, b.Value), true
		}
	case *types.AttributeValueMemberN:
		if b, ok := b.(*types.AttributeValueMemberN); ok {
			x, err1 := strconv.ParseInt(a.Value, 10, 64)
			y, err2 := strconv.ParseInt(b.Value, 10, 64)
			if err1 == nil && err2 == nil {
				return cmp.Compare(x, y), true
			}
		}
	default:
		return 0, reflect.DeepEqual(a, b)
	}
	return 0, false
}

var setClause = regexp.MustCompile(`^(#\w+) = (:\w+)$`)

// applyUpdate applies "SET #a = :a, … [REMOVE #b, …]" to item.
func applyUpdate(expr string, names map[string]string, values map[string]types.AttributeValue, item map[string]types.AttributeValue) error {
	set, remove, _ := strings.Cut(strings.TrimPrefix(expr, "SET "), " REMOVE ")
	if !strings.HasPrefix(expr, "SET ") {
		return fmt.Errorf("%w: update %q", errUnexpected, expr)
	}
	for _, c := range strings.Split(set, ", ") {
		m := setClause.FindStringSubmatch(c)
		if m == nil {
			return fmt.Errorf("%w: update clause %q", errUnexpected, c)
		}
		name, ok1 := names[m[1]]
		v, ok2 := values[m[2]]
		if !ok1 || !ok2 {
			return fmt.Errorf("%w: update clause %q", errValidation, c)
		}
		item[name] = v
	}
	if remove != "" {
		for _, n := range strings.Split(remove, ", ") {
			name, ok := names[n]
			if !ok {
				return fmt.Errorf("%w: update REMOVE %q", errValidation, n)
			}
			delete(item, name)
		}
	}
	return nil
}
