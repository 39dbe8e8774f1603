package stack_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentauth/agentauth/infra/stack"
)

// assetDir holds dummy function packages: synth only hashes and copies
// them, it never runs or builds them.
var assetDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentauth-infra-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, fn := range []string{stack.GetToken, stack.Callback, stack.Tools, stack.Turn} {
		err := os.MkdirAll(filepath.Join(dir, fn, "bundle"), 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, fn, "bootstrap"), []byte("#!/bin/sh\necho "+fn+"\n"), 0o755)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	assetDir = dir
	code := m.Run()
	jsii.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixture is one synthesized stack: its Template for CDK assertions, its
// raw JSON for structural checks, and the logical ids of its resources.
type fixture struct {
	stack *stack.Stack
	tpl   assertions.Template
	// ann is read at synth: the cloud assembly lives in the creating
	// test's temporary directory, gone when a shared fixture is reused.
	ann       assertions.Annotations
	resources map[string]map[string]any
	id        map[string]string
}

// testProps are the props every test starts from.
func testProps() stack.Props { return stack.Props{Prefix: "aa-test", AssetDir: assetDir} }

// newStack constructs a stack from p in an app of its own, writing to the
// test's temporary directory.
func newStack(t *testing.T, id string, p stack.Props) (*stack.Stack, error) {
	t.Helper()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	return stack.New(app, id, p)
}

func synth(t *testing.T, edit func(*stack.Props)) *fixture {
	t.Helper()
	p := testProps()
	if edit != nil {
		edit(&p)
	}
	s, err := newStack(t, "AgentAuthTest", p)
	if err != nil {
		t.Fatalf("stack.New: %v", err)
	}
	f := &fixture{stack: s, tpl: assertions.Template_FromStack(s.Stack, nil), ann: assertions.Annotations_FromStack(s.Stack), id: map[string]string{}}
	raw := *f.tpl.ToJSON()
	f.resources = map[string]map[string]any{}
	for k, v := range raw["Resources"].(map[string]any) {
		f.resources[k] = v.(map[string]any)
	}
	byName := func(key, typ, prop, name string) {
		for lid, r := range f.resources {
			if r["Type"] == typ && props(r)[prop] == name {
				f.id[key] = lid
				return
			}
		}
		t.Fatalf("no %s with %s=%s", typ, prop, name)
	}
	byName("table", "AWS::DynamoDB::Table", "TableName", "aa-test-records")
	byName("queue", "AWS::SQS::Queue", "QueueName", "aa-test-events.fifo")
	byName("dlq", "AWS::SQS::Queue", "QueueName", "aa-test-events-dlq.fifo")
	byName("api", "AWS::ApiGatewayV2::Api", "Name", "aa-test-http")
	byName("sessionKeys", "AWS::SecretsManager::Secret", "Name", "aa-test-session-keys")
	byName(stack.GetToken, "AWS::Lambda::Function", "FunctionName", "aa-test-gettoken")
	byName(stack.Callback, "AWS::Lambda::Function", "FunctionName", "aa-test-callback")
	byName(stack.GetToken+"Logs", "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/aa-test-gettoken")
	byName(stack.Callback+"Logs", "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/aa-test-callback")
	fns := []string{stack.GetToken, stack.Callback}
	if p.Tools.Enabled() {
		byName(stack.Tools, "AWS::Lambda::Function", "FunctionName", "aa-test-tools")
		byName(stack.Tools+"Logs", "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/aa-test-tools")
		fns = append(fns, stack.Tools)
	}
	if p.Turns.Enabled {
		byName(stack.Turn, "AWS::Lambda::Function", "FunctionName", "aa-test-turn")
		byName(stack.Turn+"Logs", "AWS::Logs::LogGroup", "LogGroupName", "/aws/lambda/aa-test-turn")
		fns = append(fns, stack.Turn)
	}
	f.id["key"] = *f.tpl.GetResourceId(jsii.String("AWS::KMS::Key"), nil)
	for _, fn := range fns {
		role := props(f.resources[f.id[fn]])["Role"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		f.id[fn+"Role"] = role
		for lid, r := range f.resources {
			if r["Type"] == "AWS::IAM::Policy" && slices.ContainsFunc(props(r)["Roles"].([]any), func(x any) bool {
				return x.(map[string]any)["Ref"] == role
			}) {
				f.id[fn+"Policy"] = lid
			}
		}
	}
	return f
}

// sharedFixture is a stack synthesized once, by the first test that asks
// for it, and read by every other.
type sharedFixture struct {
	name string
	edit func(*stack.Props)
	once sync.Once
	fix  *fixture
}

func (s *sharedFixture) get(t *testing.T) *fixture {
	t.Helper()
	s.once.Do(func() { s.fix = synth(t, s.edit) })
	if s.fix == nil {
		t.Fatal(s.name + " synth failed")
	}
	return s.fix
}

var (
	defaultStack = &sharedFixture{name: "default"}
	toolsStack   = &sharedFixture{name: "tools", edit: toolsProps}
)

// defaults is the stack with default props, synthesized once.
func defaults(t *testing.T) *fixture {
	t.Helper()
	return defaultStack.get(t)
}

// withTools is the stack with the tools function (seam off), synthesized once.
func withTools(t *testing.T) *fixture {
	t.Helper()
	return toolsStack.get(t)
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

func getAtt(id, attr string) map[string]any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }
func ref(id string) map[string]any          { return map[string]any{"Ref": id} }

// check runs a CDK assertion, which panics through jsii on mismatch.
func check(t *testing.T, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%v", r)
		}
	}()
	f()
}

type assertion struct {
	name string
	run  func(t *testing.T, f *fixture)
}

func runAll(t *testing.T, f *fixture, as []assertion) {
	t.Helper()
	for _, a := range as {
		t.Run(a.name, func(t *testing.T) { a.run(t, f) })
	}
}

func TestTable(t *testing.T) {
	runAll(t, defaults(t), []assertion{
		{"one table", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(1)) })
		}},
		{"partition key pk (S) only", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
					"KeySchema":             assertions.Match_ArrayEquals(&[]any{map[string]any{"AttributeName": "pk", "KeyType": "HASH"}}),
					"LocalSecondaryIndexes": assertions.Match_Absent(),
				})
			})
		}},
		// As shared/aws/dynamostore.TableSchema declares them: the names,
		// keys and projections are the store's stored format.
		{"session indexes, exactly", func(t *testing.T, f *fixture) {
			key := func(hash string) []any {
				return []any{map[string]any{"AttributeName": hash, "KeyType": "HASH"}, map[string]any{"AttributeName": "expiresAt", "KeyType": "RANGE"}}
			}
			listKeys := func(hash string) []any {
				return []any{map[string]any{"AttributeName": hash, "KeyType": "HASH"}, map[string]any{"AttributeName": "listSort", "KeyType": "RANGE"}}
			}
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
					"AttributeDefinitions": assertions.Match_ArrayEquals(&[]any{
						map[string]any{"AttributeName": "pk", "AttributeType": "S"},
						map[string]any{"AttributeName": "pendingFor", "AttributeType": "S"},
						map[string]any{"AttributeName": "expiresAt", "AttributeType": "N"},
						map[string]any{"AttributeName": "sweepSet", "AttributeType": "S"},
						map[string]any{"AttributeName": "listKey", "AttributeType": "S"},
						map[string]any{"AttributeName": "listSort", "AttributeType": "S"},
						map[string]any{"AttributeName": "listAll", "AttributeType": "S"},
					}),
					"GlobalSecondaryIndexes": assertions.Match_ArrayEquals(&[]any{
						map[string]any{"IndexName": "pending-by-target", "KeySchema": key("pendingFor"), "Projection": map[string]any{"ProjectionType": "ALL"}},
						map[string]any{"IndexName": "sweep-by-expiry", "KeySchema": key("sweepSet"), "Projection": map[string]any{"ProjectionType": "KEYS_ONLY"}},
						map[string]any{"IndexName": "list-by-scope", "KeySchema": listKeys("listKey"), "Projection": map[string]any{"ProjectionType": "KEYS_ONLY"}},
						map[string]any{"IndexName": "list-all", "KeySchema": listKeys("listAll"), "Projection": map[string]any{"ProjectionType": "KEYS_ONLY"}},
					}),
				})
			})
		}},
		{"on demand", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
					"BillingMode": "PAY_PER_REQUEST", "ProvisionedThroughput": assertions.Match_Absent(),
				})
			})
		}},
		{"TTL on attribute ttl", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
					"TimeToLiveSpecification": map[string]any{"AttributeName": "ttl", "Enabled": true},
				})
			})
		}},
		{"point-in-time recovery", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
					"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
				})
			})
		}},
		{"SSE with the customer-managed key", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
					"SSESpecification": map[string]any{"SSEEnabled": true, "SSEType": "KMS", "KMSMasterKeyId": getAtt(f.id["key"], "Arn")},
				})
			})
		}},
		{"retained and deletion-protected", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
					"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
					"Properties": assertions.Match_ObjectLike(&map[string]any{"DeletionProtectionEnabled": true}),
				})
			})
		}},
	})
}

// Each step of adding the indexes to an older table adds exactly one
// (CloudFormation refuses two in one update): TableIndexes = n gives the
// table the first n of TableIndexOrder, and gettoken may query exactly
// those.
func TestTableIndexes(t *testing.T) {
	order := []string{"pending-by-target", "sweep-by-expiry", "list-by-scope", "list-all"}
	if !slices.Equal(stack.TableIndexOrder, order) {
		t.Fatalf("TableIndexOrder %q, want %q", stack.TableIndexOrder, order)
	}
	for n := 1; n <= len(order); n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			f := synth(t, func(p *stack.Props) { p.TableIndexes = n })
			if got := tableIndexNames(t, f); !slices.Equal(got, order[:n]) {
				t.Errorf("indexes %q, want %q", got, order[:n])
			}
			if got, want := queriedIndexes(t, f), order[:n]; !slices.Equal(got, want) {
				t.Errorf("gettoken may query %q, want %q", got, want)
			}
		})
	}
	for _, n := range []int{-1, 5} {
		p := testProps()
		p.TableIndexes = n
		if _, err := newStack(t, "AgentAuthTest", p); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("table indexes %d: want 1 to 4", n)) {
			t.Errorf("TableIndexes %d: err = %v", n, err)
		}
	}
}

// tableIndexNames are the names of the record table's indexes, in order.
func tableIndexNames(t *testing.T, f *fixture) []string {
	t.Helper()
	var names []string
	gsis, _ := props(f.resources[f.id["table"]])["GlobalSecondaryIndexes"].([]any)
	for _, g := range gsis {
		names = append(names, g.(map[string]any)["IndexName"].(string))
	}
	return names
}

// queriedIndexes are the indexes gettoken's SessionIndexes statement
// names, in order.
func queriedIndexes(t *testing.T, f *fixture) []string {
	t.Helper()
	var names []string
	doc := props(f.resources[f.id[stack.GetToken+"Policy"]])["PolicyDocument"].(map[string]any)
	for _, st := range doc["Statement"].([]any) {
		st := st.(map[string]any)
		if st["Sid"] != "SessionIndexes" {
			continue
		}
		res, ok := st["Resource"].([]any)
		if !ok {
			res = []any{st["Resource"]} // one resource is not a list
		}
		for _, r := range res {
			parts := r.(map[string]any)["Fn::Join"].([]any)[1].([]any)
			names = append(names, strings.TrimPrefix(parts[len(parts)-1].(string), "/index/"))
		}
	}
	return names
}

func TestKey(t *testing.T) {
	runAll(t, defaults(t), []assertion{
		{"one customer-managed key, rotation on, retained", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::KMS::Key"), jsii.Number(1)) })
			check(t, func() {
				f.tpl.HasResource(jsii.String("AWS::KMS::Key"), map[string]any{
					"DeletionPolicy": "Retain",
					"Properties":     assertions.Match_ObjectLike(&map[string]any{"EnableKeyRotation": true}),
				})
			})
		}},
		{"alias", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::KMS::Alias"), map[string]any{
					"AliasName": "alias/aa-test-sealing", "TargetKeyId": getAtt(f.id["key"], "Arn"),
				})
			})
		}},
		{"each function: GenerateDataKey and Decrypt for grant and session contexts", func(t *testing.T, f *fixture) {
			for _, fn := range []string{stack.GetToken, stack.Callback} {
				check(t, func() {
					f.tpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
						"KeyPolicy": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
							"Effect":    "Allow",
							"Principal": map[string]any{"AWS": getAtt(f.id[fn+"Role"], "Arn")},
							"Action":    assertions.Match_ArrayEquals(&[]any{"kms:GenerateDataKey", "kms:Decrypt"}),
							"Resource":  "*",
							"Condition": assertions.Match_ObjectEquals(&map[string]any{"StringEquals": map[string]any{
								"kms:EncryptionContext:agentauth:record": []any{"grant"},
							}}),
						})})},
					})
				})
			}
		}},
		{"table SSE use only through DynamoDB in this account", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
					"KeyPolicy": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
						"Principal": map[string]any{"AWS": []any{getAtt(f.id[stack.GetToken+"Role"], "Arn"), getAtt(f.id[stack.Callback+"Role"], "Arn")}},
						"Condition": map[string]any{"StringEquals": map[string]any{
							"kms:CallerAccount": ref("AWS::AccountId"),
							"kms:ViaService":    map[string]any{"Fn::Join": []any{"", []any{"dynamodb.", ref("AWS::Region"), ".amazonaws.com"}}},
						}},
					})})},
				})
			})
		}},
		{"every function statement is conditioned; none grants kms:* or a wildcard action", func(t *testing.T, f *fixture) {
			roles := []string{f.id[stack.GetToken+"Role"], f.id[stack.Callback+"Role"]}
			stmts := keyStatements(t, f)
			if len(stmts) != 4 {
				t.Errorf("key policy has %d statements, want 4 (root, gettoken, callback, DynamoDB)", len(stmts))
			}
			for _, s := range stmts {
				principals := fmt.Sprint(s["Principal"])
				forFunction := slices.ContainsFunc(roles, func(r string) bool { return strings.Contains(principals, r) })
				if !forFunction {
					continue
				}
				for _, a := range strs(s["Action"]) {
					if a == "kms:*" || (strings.HasSuffix(a, "*") && !slices.Contains([]string{"kms:GenerateDataKey*", "kms:ReEncrypt*"}, a)) {
						t.Errorf("statement %v grants %s to a function", s["Sid"], a)
					}
				}
				cond := fmt.Sprint(s["Condition"])
				if !strings.Contains(cond, "kms:EncryptionContext:agentauth:record") && !strings.Contains(cond, "kms:ViaService") {
					t.Errorf("statement %v gives a function the key without an encryption-context or via-service condition", s["Sid"])
				}
				if strings.Contains(fmt.Sprint(s["Action"]), "kms:GenerateDataKey*") && !strings.Contains(cond, "kms:ViaService") {
					t.Errorf("statement %v: GenerateDataKey* outside DynamoDB", s["Sid"])
				}
			}
		}},
		{"administration and rewrap only to the account root", func(t *testing.T, f *fixture) {
			admin := []string{"kms:Create*", "kms:Put*", "kms:Update*", "kms:Enable*", "kms:Disable*", "kms:Delete*", "kms:Revoke*",
				"kms:TagResource", "kms:UntagResource", "kms:ScheduleKeyDeletion", "kms:CancelKeyDeletion"}
			rewrap := []string{"kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:ReEncrypt*", "kms:Encrypt"}
			var rootActions []string
			for _, s := range keyStatements(t, f) {
				isRoot := strings.Contains(fmt.Sprint(s["Principal"]), ":root")
				throughDynamoDB := strings.Contains(fmt.Sprint(s["Condition"]), "kms:ViaService")
				for _, a := range strs(s["Action"]) {
					switch {
					case a == "kms:*":
						t.Errorf("statement %v grants kms:*", s["Sid"])
					case isRoot:
						rootActions = append(rootActions, a)
					case slices.Contains(admin, a):
						t.Errorf("statement %v grants %s to a non-root principal", s["Sid"], a)
					case slices.Contains(rewrap, a) && !throughDynamoDB:
						t.Errorf("statement %v grants %s to a non-root principal outside DynamoDB", s["Sid"], a)
					}
				}
			}
			for _, a := range append(admin, "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:Decrypt", "kms:GenerateDataKey") {
				if !slices.Contains(rootActions, a) {
					t.Errorf("account root lacks %s", a)
				}
			}
		}},
		{"no IAM policy names KMS (the key policy alone decides)", func(t *testing.T, f *fixture) {
			for lid, r := range f.resources {
				if r["Type"] != "AWS::IAM::Policy" && r["Type"] != "AWS::IAM::Role" {
					continue
				}
				if s := fmt.Sprint(props(r)); strings.Contains(s, "kms:") {
					t.Errorf("%s mentions KMS: %s", lid, s)
				}
			}
		}},
	})
}

func keyStatements(t *testing.T, f *fixture) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, s := range props(f.resources[f.id["key"]])["KeyPolicy"].(map[string]any)["Statement"].([]any) {
		out = append(out, s.(map[string]any))
	}
	return out
}

func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	return nil
}

// bundleSecretsARN is the resource of the BundleSecrets grant: every
// secret named <prefix>…, in the stack's own partition, region and account.
func bundleSecretsARN(prefix string) map[string]any {
	return map[string]any{"Fn::Join": []any{"", []any{
		"arn:", ref("AWS::Partition"), ":secretsmanager:", ref("AWS::Region"), ":", ref("AWS::AccountId"), ":secret:" + prefix + "*",
	}}}
}

// functionEnv is the environment every function of a stack with default
// props gets; each function adds its own.
func functionEnv(f *fixture) map[string]any {
	return map[string]any{
		stack.EnvTable:     ref(f.id["table"]),
		stack.EnvKMSKeyID:  getAtt(f.id["key"], "Arn"),
		stack.EnvQueueURL:  ref(f.id["queue"]),
		stack.EnvBundle:    "/var/task/bundle",
		stack.EnvPublicURL: getAtt(f.id["api"], "ApiEndpoint"),
		// Ref of a secret is its ARN.
		stack.EnvSessionKeysSecret: ref(f.id["sessionKeys"]),
		stack.EnvSecretPrefix:      "aa-test/",
	}
}

// lambdaTrust is the trust policy of a function role: Lambda only.
func lambdaTrust() map[string]any {
	return map[string]any{"Statement": []any{map[string]any{
		"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": map[string]any{"Service": "lambda.amazonaws.com"},
	}}}
}

// recordActions is what function fn may do to the records table: tools
// also scans it (tenant uploads); gettoken (the turn routes) and turn also
// read an instance's items in batches and list instances and uploads.
func recordActions(fn string) []any {
	actions := []any{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:TransactWriteItems", "dynamodb:ConditionCheckItem"}
	switch fn {
	case stack.Tools:
		actions = append(actions, "dynamodb:Scan")
	case stack.GetToken, stack.Turn:
		actions = append(actions, "dynamodb:BatchGetItem", "dynamodb:Scan")
	}
	return actions
}

// functionPolicy is the exact policy document of function fn's role, whose
// records statement allows actions.
// gettoken alone queries, and only the session and list indexes.
func functionPolicy(f *fixture, fn string, actions []any) map[string]any {
	statements := []any{
		map[string]any{"Effect": "Allow", "Action": []any{"logs:CreateLogStream", "logs:PutLogEvents"}, "Resource": getAtt(f.id[fn+"Logs"], "Arn")},
		map[string]any{"Effect": "Allow", "Sid": "Records", "Action": actions, "Resource": getAtt(f.id["table"], "Arn")},
	}
	if fn == stack.GetToken {
		index := func(name string) map[string]any {
			return map[string]any{"Fn::Join": []any{"", []any{getAtt(f.id["table"], "Arn"), "/index/" + name}}}
		}
		statements = append(statements, map[string]any{"Effect": "Allow", "Sid": "SessionIndexes", "Action": "dynamodb:Query",
			"Resource": []any{index("pending-by-target"), index("sweep-by-expiry"), index("list-by-scope"), index("list-all")}})
	}
	statements = append(statements,
		map[string]any{"Effect": "Allow", "Sid": "Events", "Action": "sqs:SendMessage", "Resource": getAtt(f.id["queue"], "Arn")},
		map[string]any{"Effect": "Allow", "Sid": "SessionKeys", "Action": "secretsmanager:GetSecretValue", "Resource": ref(f.id["sessionKeys"])},
		map[string]any{"Effect": "Allow", "Sid": "BundleSecrets", "Action": "secretsmanager:GetSecretValue", "Resource": bundleSecretsARN("aa-test/")},
	)
	if fn == stack.GetToken {
		// Listing and redriving the dead letters (the redrive's send is Events).
		statements = append(statements, map[string]any{"Effect": "Allow", "Sid": "DeadLetters",
			"Action":   []any{"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes"},
			"Resource": getAtt(f.id["dlq"], "Arn")})
	}
	return map[string]any{"Statement": assertions.Match_ArrayEquals(&statements)}
}

// assertSessionKeyReaders checks that the IAM policies naming the
// session-keys secret are exactly those of the functions fns.
func assertSessionKeyReaders(t *testing.T, f *fixture, fns ...string) {
	t.Helper()
	var readers []string
	for lid, r := range f.resources {
		if r["Type"] == "AWS::IAM::Policy" && strings.Contains(fmt.Sprint(props(r)), fmt.Sprint(ref(f.id["sessionKeys"]))) {
			readers = append(readers, lid)
		}
	}
	var want []string
	for _, fn := range fns {
		want = append(want, f.id[fn+"Policy"])
	}
	sort.Strings(readers)
	sort.Strings(want)
	if !slices.Equal(readers, want) {
		t.Errorf("policies naming the session-keys secret: %v, want %v", readers, want)
	}
}

func TestSessionKeysSecret(t *testing.T) {
	runAll(t, defaults(t), []assertion{
		{"one secret: generated 64 letters and digits, retained", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::SecretsManager::Secret"), jsii.Number(1)) })
			check(t, func() {
				f.tpl.HasResource(jsii.String("AWS::SecretsManager::Secret"), map[string]any{
					"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
					"Properties": assertions.Match_ObjectLike(&map[string]any{
						"Name": "aa-test-session-keys",
						"GenerateSecretString": assertions.Match_ObjectEquals(&map[string]any{
							"PasswordLength": stack.SessionKeyLength, "ExcludePunctuation": true, "IncludeSpace": false,
						}),
						// Generated by Secrets Manager: the value is never in the template.
						"SecretString": assertions.Match_Absent(),
					}),
				})
			})
			if stack.SessionKeyLength < 48 {
				t.Errorf("session key length %d < 48", stack.SessionKeyLength)
			}
		}},
		{"only the two function roles may read it", func(t *testing.T, f *fixture) {
			assertSessionKeyReaders(t, f, stack.GetToken, stack.Callback)
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::SecretsManager::ResourcePolicy"), jsii.Number(0)) })
		}},
		{"the session-keys secret is outside the bundle secret prefix", func(t *testing.T, f *fixture) {
			if strings.HasPrefix("aa-test-session-keys", "aa-test/") {
				t.Error("the bundle secret grant would cover the session keys")
			}
		}},
	})
}

func TestSessionSweep(t *testing.T) {
	runAll(t, defaults(t), []assertion{
		{"a 5-minute schedule targets gettoken", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::Events::Rule"), jsii.Number(1)) })
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]any{
					"ScheduleExpression": "rate(5 minutes)",
					"State":              "ENABLED",
					"Targets":            []any{assertions.Match_ObjectLike(&map[string]any{"Arn": getAtt(f.id[stack.GetToken], "Arn")})},
				})
			})
		}},
		{"only EventBridge may invoke gettoken on that schedule", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Permission"), map[string]any{
					"Action":       "lambda:InvokeFunction",
					"Principal":    "events.amazonaws.com",
					"FunctionName": getAtt(f.id[stack.GetToken], "Arn"),
				})
			})
		}},
	})
}

func TestQueues(t *testing.T) {
	runAll(t, defaults(t), []assertion{
		{"two queues", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(2)) })
		}},
		{"events queue: FIFO, no content dedup, SQS-managed SSE, redrive to DLQ after 5", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
					"QueueName":                 "aa-test-events.fifo",
					"FifoQueue":                 true,
					"ContentBasedDeduplication": false,
					"SqsManagedSseEnabled":      true,
					"RedrivePolicy":             map[string]any{"deadLetterTargetArn": getAtt(f.id["dlq"], "Arn"), "maxReceiveCount": 5},
				})
			})
		}},
		{"DLQ: FIFO, no content dedup, SQS-managed SSE, 14 days, no redrive", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
					"QueueName":                 "aa-test-events-dlq.fifo",
					"FifoQueue":                 true,
					"ContentBasedDeduplication": false,
					"SqsManagedSseEnabled":      true,
					"MessageRetentionPeriod":    1209600,
					"RedrivePolicy":             assertions.Match_Absent(),
				})
			})
		}},
		{"both queues refuse non-TLS requests", func(t *testing.T, f *fixture) {
			for _, q := range []string{"queue", "dlq"} {
				check(t, func() {
					f.tpl.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), map[string]any{
						"Queues": []any{ref(f.id[q])},
						"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
							"Effect": "Deny", "Principal": map[string]any{"AWS": "*"}, "Action": "sqs:*",
							"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
						})})},
					})
				})
			}
		}},
		{"alarm on DLQ ApproximateNumberOfMessagesVisible > 0", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(1)) })
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
					"Namespace":          "AWS/SQS",
					"MetricName":         "ApproximateNumberOfMessagesVisible",
					"Dimensions":         []any{map[string]any{"Name": "QueueName", "Value": getAtt(f.id["dlq"], "QueueName")}},
					"ComparisonOperator": "GreaterThanThreshold",
					"Threshold":          0,
					"EvaluationPeriods":  1,
					"AlarmActions":       assertions.Match_Absent(),
				})
			})
		}},
	})
}

func TestFunctions(t *testing.T) {
	runAll(t, defaults(t), []assertion{
		{"two functions", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(2)) })
		}},
		{"provided.al2023, bootstrap, arm64 by default, 256 MB", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), map[string]any{
					"Runtime": "provided.al2023", "Handler": "bootstrap", "Architectures": []any{"arm64"}, "MemorySize": 256,
				}, jsii.Number(2))
			})
		}},
		{"timeouts: gettoken 30 s (the HTTP API limit), callback 20 s", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{"FunctionName": "aa-test-gettoken", "Timeout": 30})
			})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{"FunctionName": "aa-test-callback", "Timeout": 20})
			})
			if stack.MaxWaitSeconds >= stack.GetTokenTimeoutSeconds {
				t.Errorf("session wait cap %d s is not below the function timeout %d s", stack.MaxWaitSeconds, stack.GetTokenTimeoutSeconds)
			}
		}},
		{"environment", func(t *testing.T, f *fixture) {
			for _, fn := range []string{stack.GetToken, stack.Callback} {
				vars := functionEnv(f)
				if fn == stack.GetToken {
					vars[stack.EnvMaxWaitSeconds] = "25"
					vars[stack.EnvDeadLetterQueueURL] = ref(f.id["dlq"])
				}
				check(t, func() {
					f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
						"FunctionName": "aa-test-" + fn,
						"Environment":  map[string]any{"Variables": assertions.Match_ObjectEquals(&vars)},
					})
				})
			}
		}},
		{"explicit log groups, one month, used by the functions", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Logs::LogGroup"), map[string]any{"RetentionInDays": 30}, jsii.Number(2))
			})
			for _, fn := range []string{stack.GetToken, stack.Callback} {
				check(t, func() {
					f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
						"FunctionName": "aa-test-" + fn, "LoggingConfig": map[string]any{"LogGroup": ref(f.id[fn+"Logs"])},
					})
				})
			}
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("Custom::LogRetention"), jsii.Number(0)) })
		}},
		{"roles: Lambda only, no managed policies", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::IAM::Role"), map[string]any{
					"AssumeRolePolicyDocument": lambdaTrust(),
					"ManagedPolicyArns":        assertions.Match_Absent(),
					"Policies":                 assertions.Match_Absent(),
				}, jsii.Number(2))
			})
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::IAM::Role"), jsii.Number(2)) })
		}},
		{"least privilege: exact statements per role", func(t *testing.T, f *fixture) {
			for _, fn := range []string{stack.GetToken, stack.Callback} {
				check(t, func() {
					f.tpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
						"Roles":          []any{ref(f.id[fn+"Role"])},
						"PolicyDocument": functionPolicy(f, fn, recordActions(fn)),
					})
				})
			}
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::IAM::Policy"), jsii.Number(2)) })
		}},
		{"no wildcard resource or action in any IAM policy, but the bundle secret prefix", func(t *testing.T, f *fixture) {
			prefixGrant := fmt.Sprint(bundleSecretsARN("aa-test/"))
			for lid, r := range f.resources {
				if r["Type"] != "AWS::IAM::Policy" {
					continue
				}
				for _, s := range props(r)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
					st := s.(map[string]any)
					for _, a := range strs(st["Action"]) {
						if strings.Contains(a, "*") {
							t.Errorf("%s: wildcard action %s", lid, a)
						}
					}
					for _, res := range strs(st["Resource"]) {
						// The one allowed: GetSecretValue on names under
						// the secret prefix (see grantData for why).
						if res == prefixGrant && st["Sid"] == "BundleSecrets" && fmt.Sprint(st["Action"]) == "secretsmanager:GetSecretValue" {
							continue
						}
						if strings.Contains(res, "*") {
							t.Errorf("%s: wildcard resource %s", lid, res)
						}
					}
				}
			}
		}},
	})
}

func TestHTTPAPI(t *testing.T) {
	runAll(t, defaults(t), []assertion{
		{"one HTTP API with an auto-deployed default stage", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::ApiGatewayV2::Api"), map[string]any{"ProtocolType": "HTTP"}, jsii.Number(1))
			})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), map[string]any{
					"ApiId": ref(f.id["api"]), "StageName": "$default", "AutoDeploy": true,
				})
			})
		}},
		{"integrations: Lambda proxy, payload 2.0, one per function", func(t *testing.T, f *fixture) {
			for _, fn := range []string{stack.GetToken, stack.Callback} {
				check(t, func() {
					f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::ApiGatewayV2::Integration"), map[string]any{
						"IntegrationType": "AWS_PROXY", "PayloadFormatVersion": "2.0", "IntegrationUri": getAtt(f.id[fn], "Arn"),
					}, jsii.Number(1))
				})
			}
		}},
		{"routes and their authorization", func(t *testing.T, f *fixture) {
			assertRoutes(t, f, runtimeRoutesWant("/oauth/callback/{app}"))
		}},
		{"API Gateway may invoke each function only from this API", func(t *testing.T, f *fixture) {
			for _, fn := range []string{stack.GetToken, stack.Callback} {
				perms := f.tpl.FindResources(jsii.String("AWS::Lambda::Permission"), map[string]any{"Properties": map[string]any{
					"Action": "lambda:InvokeFunction", "Principal": "apigateway.amazonaws.com", "FunctionName": getAtt(f.id[fn], "Arn"),
				}})
				if len(*perms) == 0 {
					t.Errorf("no invoke permission for %s", fn)
				}
				for lid, p := range *perms {
					if src := fmt.Sprint((*p)["Properties"].(map[string]any)["SourceArn"]); !strings.Contains(src, f.id["api"]) {
						t.Errorf("%s: source %s is not this API", lid, src)
					}
				}
			}
		}},
	})
}

type routeWant struct{ fn, auth string }

// runtimeRoutesWant is every route of a stack without the tools function:
// public health and callback routes, and the runtime routes behind IAM.
func runtimeRoutesWant(callbackPaths ...string) map[string]routeWant {
	want := map[string]routeWant{"GET /healthz": {stack.GetToken, "NONE"}}
	for _, p := range callbackPaths {
		want["GET "+p] = routeWant{stack.Callback, "NONE"}
	}
	for _, r := range append(append([]stack.Route(nil), stack.RuntimeRoutes...), stack.TurnRoutes...) {
		want[r.Method+" "+r.Path] = routeWant{stack.GetToken, "AWS_IAM"}
	}
	return want
}

func assertRoutes(t *testing.T, f *fixture, want map[string]routeWant) {
	t.Helper()
	check(t, func() {
		f.tpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Route"), jsii.Number(float64(len(want))))
	})
	integrationOf := map[string]string{}
	for lid, r := range f.resources {
		if r["Type"] == "AWS::ApiGatewayV2::Integration" {
			integrationOf[lid] = props(r)["IntegrationUri"].(map[string]any)["Fn::GetAtt"].([]any)[0].(string)
		}
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		w := want[key]
		check(t, func() {
			f.tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{
				"ApiId": ref(f.id["api"]), "RouteKey": key, "AuthorizationType": w.auth,
			})
		})
		routes := f.tpl.FindResources(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{"Properties": map[string]any{"RouteKey": key}})
		for lid, r := range *routes {
			target := (*r)["Properties"].(map[string]any)["Target"].(map[string]any)["Fn::Join"].([]any)[1].([]any)[1].(map[string]any)["Ref"].(string)
			if got := integrationOf[target]; got != f.id[w.fn] {
				t.Errorf("%s (%s) reaches %s, want the %s function %s", key, lid, got, w.fn, f.id[w.fn])
			}
		}
	}
}

func TestOutputs(t *testing.T) {
	f := defaults(t)
	outputs := map[string]any{
		"ApiUrl":               getAtt(f.id["api"], "ApiEndpoint"),
		"PublicUrl":            getAtt(f.id["api"], "ApiEndpoint"),
		"TableName":            ref(f.id["table"]),
		"KeyArn":               getAtt(f.id["key"], "Arn"),
		"QueueUrl":             ref(f.id["queue"]),
		"DlqUrl":               ref(f.id["dlq"]),
		"GetTokenFunctionName": ref(f.id[stack.GetToken]),
		"CallbackFunctionName": ref(f.id[stack.Callback]),
		"SessionKeysSecretArn": ref(f.id["sessionKeys"]),
		"SecretPrefix":         "aa-test/",
	}
	for name, v := range outputs {
		t.Run(name, func(t *testing.T) {
			check(t, func() { f.tpl.HasOutput(jsii.String(name), map[string]any{"Value": v}) })
		})
	}
}

// TestNoDependencyCycle walks every Ref, GetAtt and DependsOn: the
// functions read the API endpoint, the API's routes reach the functions,
// and CloudFormation must still find an order.
func TestNoDependencyCycle(t *testing.T) {
	t.Run("default", func(t *testing.T) { assertNoCycle(t, defaults(t)) })
	t.Run("with tools", func(t *testing.T) { assertNoCycle(t, withTools(t)) })
}

func assertNoCycle(t *testing.T, f *fixture) {
	t.Helper()
	deps := map[string][]string{}
	var walk func(from string, v any)
	walk = func(from string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch k {
				case "Ref":
					if s, ok := x.(string); ok && f.resources[s] != nil {
						deps[from] = append(deps[from], s)
					}
				case "Fn::GetAtt":
					if a, ok := x.([]any); ok && f.resources[a[0].(string)] != nil {
						deps[from] = append(deps[from], a[0].(string))
					}
				}
				walk(from, x)
			}
		case []any:
			for _, x := range v {
				walk(from, x)
			}
		}
	}
	for lid, r := range f.resources {
		walk(lid, r["Properties"])
		deps[lid] = append(deps[lid], strs(r["DependsOn"])...)
	}
	const (
		unseen = iota
		active
		done
	)
	state := map[string]int{}
	var visit func(n string, path []string)
	visit = func(n string, path []string) {
		switch state[n] {
		case active:
			t.Fatalf("dependency cycle: %s -> %s", strings.Join(path, " -> "), n)
		case done:
			return
		}
		state[n] = active
		for _, d := range deps[n] {
			visit(d, append(path, n))
		}
		state[n] = done
	}
	for lid := range f.resources {
		visit(lid, nil)
	}
	// The property that makes it work: the API does not depend on a function.
	for _, d := range deps[f.id["api"]] {
		t.Errorf("the API depends on %s", d)
	}
	if !slices.Contains(deps[f.id[stack.GetToken]], f.id["api"]) {
		t.Errorf("gettoken does not read the API endpoint")
	}
	if tools := f.id[stack.Tools]; tools != "" && !slices.Contains(deps[tools], f.id["api"]) {
		t.Errorf("tools does not read the API endpoint")
	}
}

func TestArchitectureX86(t *testing.T) {
	f := synth(t, func(p *stack.Props) { p.Architecture = awslambda.Architecture_X86_64() })
	check(t, func() {
		f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), map[string]any{"Architectures": []any{"x86_64"}}, jsii.Number(2))
	})
}

func TestCustomProps(t *testing.T) {
	topic := "arn:aws:sns:eu-west-1:111122223333:ops"
	f := synth(t, func(p *stack.Props) {
		p.PublicURL = "https://auth.example.com"
		p.CallbackPaths = []string{"/oauth/callback/slack-bot", "/oauth/callback/github"}
		p.LogRetention = awslogs.RetentionDays_ONE_WEEK
		p.BundlePath = "/opt/bundle"
		p.SecretPrefix = "team-a/agentauth/"
		p.AlarmTopicARN = topic
	})
	runAll(t, f, []assertion{
		{"public URL from props", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), map[string]any{
					"Environment": map[string]any{"Variables": map[string]any{stack.EnvPublicURL: "https://auth.example.com", stack.EnvBundle: "/opt/bundle"}},
				}, jsii.Number(2))
			})
			check(t, func() { f.tpl.HasOutput(jsii.String("PublicUrl"), map[string]any{"Value": "https://auth.example.com"}) })
		}},
		{"one public route per callback path, no catch-all", func(t *testing.T, f *fixture) {
			assertRoutes(t, f, runtimeRoutesWant("/oauth/callback/slack-bot", "/oauth/callback/github"))
		}},
		{"log retention from props", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Logs::LogGroup"), map[string]any{"RetentionInDays": 7}, jsii.Number(2))
			})
		}},
		{"each function reads the secrets under the prefix from props, and is told the prefix", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::IAM::Policy"), map[string]any{
					"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{map[string]any{
						"Effect": "Allow", "Sid": "BundleSecrets", "Action": "secretsmanager:GetSecretValue", "Resource": bundleSecretsARN("team-a/agentauth/"),
					}})},
				}, jsii.Number(2))
			})
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), map[string]any{
					"Environment": map[string]any{"Variables": map[string]any{stack.EnvSecretPrefix: "team-a/agentauth/"}},
				}, jsii.Number(2))
			})
			check(t, func() { f.tpl.HasOutput(jsii.String("SecretPrefix"), map[string]any{"Value": "team-a/agentauth/"}) })
		}},
		{"DLQ alarm notifies the topic", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{"AlarmActions": []any{topic}})
			})
		}},
	})
}

func TestPropsRejected(t *testing.T) {
	noBootstrap := t.TempDir()
	if err := os.MkdirAll(filepath.Join(noBootstrap, stack.GetToken), 0o755); err != nil {
		t.Fatal(err)
	}
	notExecutable := fakeFunctions(t, 0o644, stack.GetToken, stack.Callback)
	assertRejected(t, []rejection{
		{"bad prefix", func(p *stack.Props) { p.Prefix = "Agent_Auth" }, "prefix"},
		{"no asset dir", func(p *stack.Props) { p.AssetDir = "" }, "asset directory"},
		{"missing bootstrap", func(p *stack.Props) { p.AssetDir = noBootstrap }, "function gettoken"},
		{"bootstrap not executable", func(p *stack.Props) { p.AssetDir = notExecutable }, "not an executable file"},
		{"relative callback path", func(p *stack.Props) { p.CallbackPaths = []string{"oauth/cb"} }, "must start with '/'"},
		{"callback path on a runtime route", func(p *stack.Props) { p.CallbackPaths = []string{"/v1/oauth/token"} }, "collides"},
		{"duplicate callback path", func(p *stack.Props) { p.CallbackPaths = []string{"/cb/a", "/cb/a"} }, "listed twice"},
		{"secret prefix without a closing '/'", func(p *stack.Props) { p.SecretPrefix = "aa-test" }, "secret prefix"},
		{"secret prefix with a wildcard", func(p *stack.Props) { p.SecretPrefix = "aa-*/" }, "secret prefix"},
		{"secret prefix '/' (every secret)", func(p *stack.Props) { p.SecretPrefix = "/" }, "secret prefix"},
	})
}

// rejection is props stack.New must refuse: edit turns the test props into
// them, and the error must contain want.
type rejection struct {
	name string
	edit func(*stack.Props)
	want string
}

func assertRejected(t *testing.T, cases []rejection) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := testProps()
			tc.edit(&p)
			_, err := newStack(t, "Rejected", p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// fakeFunctions is an asset directory with a bootstrap of the given mode
// for each of fns, and nothing else.
func fakeFunctions(t *testing.T, mode os.FileMode, fns ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, fn := range fns {
		if err := os.MkdirAll(filepath.Join(dir, fn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fn, "bootstrap"), []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// toolsProps turns the tools function on, as -c jwksUrl=… -c jwtIssuer=…
// -c jwtAudience=… -c toolRateLimit=60/m would.
func toolsProps(p *stack.Props) {
	p.Tools = stack.ToolsProps{
		JWKSURL:     "https://idp.example.com/.well-known/jwks.json",
		JWTIssuer:   "https://idp.example.com/",
		JWTAudience: "agentauth-tools",
		RateLimit:   "60/m",
	}
}

const noToolsWarning = "no tools function and no tool routes: context jwksUrl is not set"

// toolRoutesWant is every route of a stack with the tools function and the
// default callback path.
func toolRoutesWant(seam bool) map[string]routeWant {
	want := runtimeRoutesWant("/oauth/callback/{app}")
	for _, r := range stack.ToolRoutes {
		want[r.Method+" "+r.Path] = routeWant{stack.Tools, "NONE"}
	}
	if seam {
		for _, r := range stack.SeamRoutes {
			want[r.Method+" "+r.Path] = routeWant{stack.Tools, "NONE"}
		}
	}
	return want
}

func TestNoToolsFunctionWithoutJWKSURL(t *testing.T) {
	runAll(t, defaults(t), []assertion{
		{"no tools function, log group or output", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), map[string]any{"FunctionName": "aa-test-tools"}, jsii.Number(0))
			})
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Logs::LogGroup"), map[string]any{"LogGroupName": "/aws/lambda/aa-test-tools"}, jsii.Number(0))
			})
			if _, ok := f.stack.Functions[stack.Tools]; ok {
				t.Error("Stack.Functions has tools")
			}
			if outs := f.tpl.FindOutputs(jsii.String("*"), nil); (*outs)["ToolsUrl"] != nil || (*outs)["ToolsFunctionName"] != nil {
				t.Error("tools outputs without a tools function")
			}
		}},
		{"no tool or seam route", func(t *testing.T, f *fixture) {
			for _, r := range append(slices.Clone(stack.ToolRoutes), stack.SeamRoutes...) {
				check(t, func() {
					f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{"RouteKey": r.Method + " " + r.Path}, jsii.Number(0))
				})
			}
		}},
		{"synth warns that there is no tools function", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.ann.HasWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String(noToolsWarning)))
			})
		}},
	})
}

func TestToolsFunction(t *testing.T) {
	runAll(t, withTools(t), []assertion{
		{"three functions; tools: provided.al2023, arm64, 256 MB, 30 s, own log group", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(3)) })
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
					"FunctionName": "aa-test-tools", "Runtime": "provided.al2023", "Handler": "bootstrap",
					"Architectures": []any{"arm64"}, "MemorySize": 256, "Timeout": 30,
					"Role":          getAtt(f.id[stack.Tools+"Role"], "Arn"),
					"LoggingConfig": map[string]any{"LogGroup": ref(f.id[stack.Tools+"Logs"])},
				})
			})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Logs::LogGroup"), map[string]any{"LogGroupName": "/aws/lambda/aa-test-tools", "RetentionInDays": 30})
			})
			if stack.ToolsTimeoutSeconds > stack.GetTokenTimeoutSeconds {
				t.Errorf("tools timeout %d s is beyond the HTTP API's 30 s", stack.ToolsTimeoutSeconds)
			}
		}},
		{"environment: the AWS backends, the JWT settings, claims, rate limit, EMF metrics; no seam", func(t *testing.T, f *fixture) {
			vars := functionEnv(f)
			maps.Copy(vars, map[string]any{
				stack.EnvJWKSURL:       "https://idp.example.com/.well-known/jwks.json",
				stack.EnvJWTIssuer:     "https://idp.example.com/",
				stack.EnvJWTAudience:   "agentauth-tools",
				stack.EnvTenantClaim:   "tenant_id",
				stack.EnvSkillsClaim:   "skills",
				stack.EnvToolRateLimit: "60/m",
				stack.EnvMetrics:       "emf",
			})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
					"FunctionName": "aa-test-tools",
					"Environment":  map[string]any{"Variables": assertions.Match_ObjectEquals(&vars)},
				})
			})
		}},
		{"only tools gets the tools variables", func(t *testing.T, f *fixture) {
			// Only tools has them (and the seam variable nowhere, seam off).
			for k, n := range map[string]float64{stack.EnvJWKSURL: 1, stack.EnvJWTIssuer: 1, stack.EnvJWTAudience: 1, stack.EnvMetrics: 1, stack.EnvToolhooksSeam: 0} {
				check(t, func() {
					f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), map[string]any{
						"Environment": map[string]any{"Variables": map[string]any{k: assertions.Match_AnyValue()}},
					}, jsii.Number(n))
				})
			}
		}},
		{"tool routes without authorizer, to tools; no seam routes", func(t *testing.T, f *fixture) {
			assertRoutes(t, f, toolRoutesWant(false))
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Authorizer"), jsii.Number(0)) })
			for _, r := range stack.ToolRoutes {
				check(t, func() {
					f.tpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Route"), map[string]any{
						"RouteKey": r.Method + " " + r.Path, "AuthorizationType": "NONE", "AuthorizerId": assertions.Match_Absent(),
					})
				})
			}
		}},
		{"API Gateway may invoke tools only from this API", func(t *testing.T, f *fixture) {
			perms := f.tpl.FindResources(jsii.String("AWS::Lambda::Permission"), map[string]any{"Properties": map[string]any{
				"FunctionName": getAtt(f.id[stack.Tools], "Arn"),
			}})
			if len(*perms) == 0 {
				t.Error("no invoke permission for tools")
			}
			for lid, p := range *perms {
				pp := (*p)["Properties"].(map[string]any)
				// The function URL's two (its auth type NONE: the function
				// checks the JWT): through the URL only.
				if pp["Principal"] == "*" && (pp["Action"] == "lambda:InvokeFunctionUrl" && pp["FunctionUrlAuthType"] == "NONE" ||
					pp["Action"] == "lambda:InvokeFunction" && pp["InvokedViaFunctionUrl"] == true) {
					continue
				}
				if pp["Principal"] != "apigateway.amazonaws.com" || !strings.Contains(fmt.Sprint(pp["SourceArn"]), f.id["api"]) {
					t.Errorf("%s: %v may invoke tools from %v", lid, pp["Principal"], pp["SourceArn"])
				}
			}
		}},
		{"role: Lambda only, exact statements", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::IAM::Role"), jsii.Number(3)) })
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::IAM::Policy"), jsii.Number(3)) })
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::IAM::Role"), map[string]any{
					"AssumeRolePolicyDocument": lambdaTrust(),
					"Description":              "agentauth tools function",
					"ManagedPolicyArns":        assertions.Match_Absent(),
					"Policies":                 assertions.Match_Absent(),
				})
			})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
					"Roles":          []any{ref(f.id[stack.Tools+"Role"])},
					"PolicyDocument": functionPolicy(f, stack.Tools, recordActions(stack.Tools)),
				})
			})
		}},
		{"no IAM policy names KMS or CloudWatch metrics", func(t *testing.T, f *fixture) {
			for lid, r := range f.resources {
				if r["Type"] != "AWS::IAM::Policy" && r["Type"] != "AWS::IAM::Role" {
					continue
				}
				if s := fmt.Sprint(props(r)); strings.Contains(s, "kms:") || strings.Contains(s, "cloudwatch:") {
					t.Errorf("%s: %s", lid, s)
				}
			}
		}},
		{"key policy: tools may GenerateDataKey/Decrypt grants only, and use table SSE through DynamoDB", func(t *testing.T, f *fixture) {
			stmts := keyStatements(t, f)
			if len(stmts) != 5 {
				t.Errorf("key policy has %d statements, want 5 (root, gettoken, callback, tools, DynamoDB)", len(stmts))
			}
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
					"KeyPolicy": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{map[string]any{
						"Sid":       "SealtoolsRecords",
						"Effect":    "Allow",
						"Principal": map[string]any{"AWS": getAtt(f.id[stack.Tools+"Role"], "Arn")},
						"Action":    []any{"kms:GenerateDataKey", "kms:Decrypt"},
						"Resource":  "*",
						"Condition": map[string]any{"StringEquals": map[string]any{
							"kms:EncryptionContext:agentauth:record": []any{"grant"},
						}},
					}})},
				})
			})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
					"KeyPolicy": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
						"Sid": "TableEncryptionThroughDynamoDB",
						"Principal": map[string]any{"AWS": []any{
							getAtt(f.id[stack.GetToken+"Role"], "Arn"), getAtt(f.id[stack.Callback+"Role"], "Arn"), getAtt(f.id[stack.Tools+"Role"], "Arn"),
						}},
					})})},
				})
			})
			for _, s := range stmts {
				if !strings.Contains(fmt.Sprint(s["Principal"]), f.id[stack.Tools+"Role"]) {
					continue
				}
				if sid := s["Sid"]; sid != "SealtoolsRecords" && sid != "TableEncryptionThroughDynamoDB" {
					t.Errorf("tools appears in key policy statement %v", sid)
				}
			}
		}},
		{"the three function roles read the session keys", func(t *testing.T, f *fixture) {
			assertSessionKeyReaders(t, f, stack.GetToken, stack.Callback, stack.Tools)
		}},
		{"stream URL: response streaming, any caller (the function checks the JWT), invoked through the URL only", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::Lambda::Url"), jsii.Number(1)) })
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]any{
					"TargetFunctionArn": getAtt(f.id[stack.Tools], "Arn"), "AuthType": "NONE", "InvokeMode": "RESPONSE_STREAM",
				})
			})
			public := f.tpl.FindResources(jsii.String("AWS::Lambda::Permission"), map[string]any{"Properties": map[string]any{"Principal": "*"}})
			if len(*public) != 2 {
				t.Errorf("%d public invoke permissions, want the function URL's two", len(*public))
			}
			for lid := range *f.tpl.FindResources(jsii.String("AWS::Lambda::Url"), nil) {
				check(t, func() {
					f.tpl.HasOutput(jsii.String("ToolsStreamUrl"), map[string]any{"Value": getAtt(lid, "FunctionUrl")})
				})
			}
		}},
		{"outputs: tools URL and function name", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasOutput(jsii.String("ToolsUrl"), map[string]any{"Value": getAtt(f.id["api"], "ApiEndpoint")})
			})
			check(t, func() {
				f.tpl.HasOutput(jsii.String("ToolsFunctionName"), map[string]any{"Value": ref(f.id[stack.Tools])})
			})
		}},
		{"no warning", func(t *testing.T, f *fixture) {
			if w := f.ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("tools"))); len(*w) != 0 {
				t.Errorf("warnings: %v", (*w)[0].Entry.Data)
			}
		}},
	})
}

func TestToolsSeam(t *testing.T) {
	f := synth(t, func(p *stack.Props) {
		p.Tools = stack.ToolsProps{
			JWKSURL: "https://idp.example.com/jwks", JWTIssuer: "https://idp.example.com/", JWTAudience: "agentauth",
			TenantClaim: "org", SkillsClaim: "https://example.com/skills", Seam: true,
		}
		p.PublicURL = "https://auth.example.com"
	})
	runAll(t, f, []assertion{
		{"seam routes without authorizer, to tools", func(t *testing.T, f *fixture) {
			assertRoutes(t, f, toolRoutesWant(true))
		}},
		{"seam on, claims from props, no rate limit", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
					"FunctionName": "aa-test-tools",
					"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{
						stack.EnvToolhooksSeam: "true",
						stack.EnvTenantClaim:   "org",
						stack.EnvSkillsClaim:   "https://example.com/skills",
						stack.EnvPublicURL:     "https://auth.example.com",
						stack.EnvMetrics:       "emf",
						stack.EnvToolRateLimit: assertions.Match_Absent(),
					})},
				})
			})
		}},
		{"tools URL is the public URL", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.HasOutput(jsii.String("ToolsUrl"), map[string]any{"Value": "https://auth.example.com"}) })
		}},
	})
}

func TestToolsRejected(t *testing.T) {
	noTools := fakeFunctions(t, 0o755, stack.GetToken, stack.Callback)
	// tools turns the tools function on, then edits its props.
	tools := func(edit func(*stack.ToolsProps)) func(*stack.Props) {
		return func(p *stack.Props) {
			toolsProps(p)
			edit(&p.Tools)
		}
	}
	assertRejected(t, []rejection{
		{"no issuer", tools(func(tp *stack.ToolsProps) { tp.JWTIssuer = "" }), "missing context jwtIssuer (required with jwksUrl"},
		{"no audience", tools(func(tp *stack.ToolsProps) { tp.JWTAudience = " " }), "missing context jwtAudience (required with jwksUrl"},
		{"neither", tools(func(tp *stack.ToolsProps) { tp.JWTIssuer, tp.JWTAudience = "", "" }), "missing context jwtIssuer and jwtAudience"},
		{"http JWKS URL", tools(func(tp *stack.ToolsProps) { tp.JWKSURL = "http://idp.example.com/jwks" }), "jwksUrl"},
		{"relative JWKS URL", tools(func(tp *stack.ToolsProps) { tp.JWKSURL = "/jwks" }), "jwksUrl"},
		{"tools not built", func(p *stack.Props) { toolsProps(p); p.AssetDir = noTools }, "function tools"},
		{"tool paths are reserved for callbacks even without tools", func(p *stack.Props) { p.CallbackPaths = []string{"/.well-known/openwop"} }, "collides"},
	})
	t.Run("http JWKS URL on loopback is accepted (local emulator)", func(t *testing.T) {
		p := testProps()
		toolsProps(&p)
		p.Tools.JWKSURL = "http://127.0.0.1:9090/jwks"
		if _, err := newStack(t, "Loopback", p); err != nil {
			t.Fatal(err)
		}
	})
}
