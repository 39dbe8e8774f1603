package stack_test

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/agentauth/agentauth/infra/stack"
)

const (
	haikuID        = "anthropic.claude-3-haiku-20240307-v1:0"
	sonnetProfileA = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20241022-v2:0"
)

func turnsProps(p *stack.Props) {
	p.Turns = stack.TurnsProps{Enabled: true, BedrockModels: []string{haikuID, sonnetProfileA}}
}

var turnsStack = &sharedFixture{name: "turns", edit: turnsProps}

// blobStatements are the turn bucket's statements of a role: objects
// under turns/, and listing that folder only.
func blobStatements(f *fixture) []any {
	bucket := f.id["turnBlobs"]
	return []any{
		map[string]any{"Effect": "Allow", "Sid": "TurnBlobs", "Action": []any{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"},
			"Resource": map[string]any{"Fn::Join": []any{"", []any{getAtt(bucket, "Arn"), "/turns/*"}}}},
		map[string]any{"Effect": "Allow", "Sid": "TurnBlobList", "Action": "s3:ListBucket", "Resource": getAtt(bucket, "Arn"),
			"Condition": map[string]any{"StringLike": map[string]any{"s3:prefix": []any{"turns/*"}}}},
	}
}

// bundleStatements are the git bundle's statements of a role (every
// function, with turns): read and write objects under bundle/, never
// delete; list that folder only.
func bundleStatements(f *fixture) []any {
	bucket := f.id["turnBlobs"]
	return []any{
		map[string]any{"Effect": "Allow", "Sid": "GitBundle", "Action": []any{"s3:GetObject", "s3:PutObject"},
			"Resource": map[string]any{"Fn::Join": []any{"", []any{getAtt(bucket, "Arn"), "/bundle/*"}}}},
		map[string]any{"Effect": "Allow", "Sid": "GitBundleList", "Action": "s3:ListBucket", "Resource": getAtt(bucket, "Arn"),
			"Condition": map[string]any{"StringLike": map[string]any{"s3:prefix": []any{"bundle/*"}}}},
	}
}

// bundleRepo is AGENTAUTH_BUNDLE_REPO as the stack sets it.
func bundleRepo(f *fixture) any {
	return map[string]any{"Fn::Join": []any{"", []any{"s3://", ref(f.id["turnBlobs"]), "/bundle/"}}}
}

// turnBlobsID finds the turn bucket.
func turnBlobsID(t *testing.T, f *fixture) {
	t.Helper()
	for lid, r := range f.resources {
		if r["Type"] == "AWS::S3::Bucket" {
			f.id["turnBlobs"] = lid
			return
		}
	}
	t.Fatal("no turn bucket")
}

// turnPolicy is the exact policy document of the turn function's role.
func turnPolicy(f *fixture) map[string]any {
	index := map[string]any{"Fn::Join": []any{"", []any{getAtt(f.id["table"], "Arn"), "/index/pending-by-target"}}}
	haiku := map[string]any{"Fn::Join": []any{"", []any{"arn:", ref("AWS::Partition"), ":bedrock:", ref("AWS::Region"), "::foundation-model/" + haikuID}}}
	statements := []any{
		map[string]any{"Effect": "Allow", "Action": []any{"logs:CreateLogStream", "logs:PutLogEvents"}, "Resource": getAtt(f.id[stack.Turn+"Logs"], "Arn")},
		map[string]any{"Effect": "Allow", "Sid": "Records", "Action": recordActions(stack.Turn), "Resource": getAtt(f.id["table"], "Arn")},
		map[string]any{"Effect": "Allow", "Sid": "PendingIndex", "Action": "dynamodb:Query", "Resource": index},
		map[string]any{"Effect": "Allow", "Sid": "Events", "Action": "sqs:SendMessage", "Resource": getAtt(f.id["queue"], "Arn")},
		map[string]any{"Effect": "Allow", "Sid": "SessionKeys", "Action": "secretsmanager:GetSecretValue", "Resource": ref(f.id["sessionKeys"])},
		map[string]any{"Effect": "Allow", "Sid": "BundleSecrets", "Action": "secretsmanager:GetSecretValue", "Resource": bundleSecretsARN("aa-test/")},
		blobStatements(f)[0], blobStatements(f)[1],
		bundleStatements(f)[0], bundleStatements(f)[1],
		// The event source mapping's (CDK's grant for SqsEventSource).
		map[string]any{"Effect": "Allow", "Action": []any{"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl", "sqs:DeleteMessage", "sqs:GetQueueAttributes"},
			"Resource": getAtt(f.id["queue"], "Arn")},
		map[string]any{"Effect": "Allow", "Sid": "BedrockModels", "Action": "bedrock:InvokeModel", "Resource": []any{haiku, sonnetProfileA}},
	}
	return map[string]any{"Statement": assertions.Match_ArrayEquals(&statements)}
}

func TestTurnFunction(t *testing.T) {
	f := turnsStack.get(t)
	turnBlobsID(t, f)
	runAll(t, f, []assertion{
		{"turn: provided.al2023, arm64, 512 MB, 120 s, own log group", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(3)) })
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
					"FunctionName": "aa-test-turn", "Runtime": "provided.al2023", "Handler": "bootstrap",
					"Architectures": []any{"arm64"}, "MemorySize": 512, "Timeout": stack.DefaultTurnTimeoutSeconds,
					"Role":          getAtt(f.id[stack.Turn+"Role"], "Arn"),
					"LoggingConfig": map[string]any{"LogGroup": ref(f.id[stack.Turn+"Logs"])},
				})
			})
		}},
		{"environment: the AWS backends, the step reserve (a sixth of the timeout, at most 20 s), EMF metrics", func(t *testing.T, f *fixture) {
			vars := functionEnv(f)
			maps.Copy(vars, map[string]any{stack.EnvTurnReserve: "20", stack.EnvMetrics: "emf", stack.EnvTurnBucket: ref(f.id["turnBlobs"]),
				stack.EnvBundleRepo: bundleRepo(f)})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
					"FunctionName": "aa-test-turn",
					"Environment":  map[string]any{"Variables": assertions.Match_ObjectEquals(&vars)},
				})
			})
		}},
		{"event source: the events queue, batches of 10, ReportBatchItemFailures", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(1)) })
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{
					"EventSourceArn":                 getAtt(f.id["queue"], "Arn"),
					"FunctionName":                   ref(f.id[stack.Turn]),
					"BatchSize":                      stack.DefaultTurnBatchSize,
					"FunctionResponseTypes":          []any{"ReportBatchItemFailures"},
					"Enabled":                        true,
					"MaximumBatchingWindowInSeconds": assertions.Match_Absent(),
				})
			})
		}},
		{"queue: visibility six times the turn timeout; redrive to the DLQ (and its alarm) after 5", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{
					"QueueName":         "aa-test-events.fifo",
					"VisibilityTimeout": 6 * stack.DefaultTurnTimeoutSeconds,
					"RedrivePolicy":     map[string]any{"deadLetterTargetArn": getAtt(f.id["dlq"], "Arn"), "maxReceiveCount": 5},
				})
			})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
					"MetricName": "ApproximateNumberOfMessagesVisible",
					"Dimensions": []any{map[string]any{"Name": "QueueName", "Value": getAtt(f.id["dlq"], "QueueName")}},
				})
			})
		}},
		{"role: exact statements — table items, pending index, the queue, secrets, the named models only", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::IAM::Role"), map[string]any{
					"AssumeRolePolicyDocument": lambdaTrust(), "Description": "agentauth turn function",
					"ManagedPolicyArns": assertions.Match_Absent(), "Policies": assertions.Match_Absent(),
				})
			})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::IAM::Policy"), map[string]any{
					"Roles": []any{ref(f.id[stack.Turn+"Role"])}, "PolicyDocument": turnPolicy(f),
				})
			})
			// No other role may call a model or consume the events queue
			// (gettoken reads the dead-letter queue: its DeadLetters
			// statement, the only one naming the DLQ).
			queue := fmt.Sprint(getAtt(f.id["queue"], "Arn"))
			for _, fn := range []string{stack.GetToken, stack.Callback} {
				doc := props(f.resources[f.id[fn+"Policy"]])["PolicyDocument"].(map[string]any)["Statement"].([]any)
				for _, st := range doc {
					s := fmt.Sprint(st)
					consumes := strings.Contains(s, "sqs:ReceiveMessage") || strings.Contains(s, "sqs:DeleteMessage")
					if strings.Contains(s, "bedrock:") || consumes && (strings.Contains(s, queue) || st.(map[string]any)["Sid"] != "DeadLetters") {
						t.Errorf("%s's policy: %s", fn, s)
					}
				}
			}
		}},
		{"key policy: turn may GenerateDataKey/Decrypt grants only, and use table SSE through DynamoDB", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
					"KeyPolicy": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{map[string]any{
						"Sid": "SealturnRecords", "Effect": "Allow",
						"Principal": map[string]any{"AWS": getAtt(f.id[stack.Turn+"Role"], "Arn")},
						"Action":    []any{"kms:GenerateDataKey", "kms:Decrypt"}, "Resource": "*",
						"Condition": map[string]any{"StringEquals": map[string]any{"kms:EncryptionContext:agentauth:record": []any{"grant"}}},
					}})},
				})
			})
			for _, s := range keyStatements(t, f) {
				if !strings.Contains(fmt.Sprint(s["Principal"]), f.id[stack.Turn+"Role"]) {
					continue
				}
				if sid := s["Sid"]; sid != "SealturnRecords" && sid != "TableEncryptionThroughDynamoDB" && sid != "TurnBucketEncryptionThroughS3" {
					t.Errorf("turn appears in key policy statement %v", sid)
				}
			}
		}},
		{"git bundle: every function runs it from bundle/ of the turn bucket, may read and write its objects, never delete them", func(t *testing.T, f *fixture) {
			for _, fn := range []string{stack.GetToken, stack.Callback, stack.Turn} {
				check(t, func() {
					f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{"FunctionName": "aa-test-" + fn,
						"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{stack.EnvBundleRepo: bundleRepo(f)})}})
				})
				doc := props(f.resources[f.id[fn+"Policy"]])["PolicyDocument"].(map[string]any)["Statement"].([]any)
				if !strings.Contains(fmt.Sprint(doc), fmt.Sprint(bundleStatements(f)[0])) || !strings.Contains(fmt.Sprint(doc), fmt.Sprint(bundleStatements(f)[1])) {
					t.Errorf("%s's policy lacks the git bundle's statements: %v", fn, doc)
				}
				for _, st := range doc {
					if s := fmt.Sprint(st); strings.Contains(s, "bundle/") && strings.Contains(s, "s3:DeleteObject") {
						t.Errorf("%s may delete git objects: %s", fn, s)
					}
				}
			}
		}},
		{"no lifecycle rule expires objects (the git bundle's must stay)", func(t *testing.T, f *fixture) {
			rules := fmt.Sprint(props(f.resources[f.id["turnBlobs"]])["LifecycleConfiguration"])
			for _, expiry := range []string{"Expiration", "Transition", "NoncurrentVersion"} {
				if strings.Contains(rules, expiry) {
					t.Errorf("the turn bucket's lifecycle rules %s name %s", rules, expiry)
				}
			}
		}},
		{"turn bucket: private, SSE-KMS with the stack key and a Bucket Key, TLS only, lifecycle rule, retained", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(1)) })
			check(t, func() {
				f.tpl.HasResource(jsii.String("AWS::S3::Bucket"), map[string]any{
					"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain",
					"Properties": assertions.Match_ObjectLike(&map[string]any{
						"BucketEncryption": map[string]any{"ServerSideEncryptionConfiguration": []any{map[string]any{
							"BucketKeyEnabled":              true,
							"ServerSideEncryptionByDefault": map[string]any{"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": getAtt(f.id["key"], "Arn")},
						}}},
						"PublicAccessBlockConfiguration": map[string]any{"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true},
						"OwnershipControls":              map[string]any{"Rules": []any{map[string]any{"ObjectOwnership": "BucketOwnerEnforced"}}},
						"LifecycleConfiguration": map[string]any{"Rules": []any{map[string]any{
							"Id": "abort-incomplete-uploads", "Status": "Enabled", "AbortIncompleteMultipartUpload": map[string]any{"DaysAfterInitiation": 1},
						}}},
					}),
				})
			})
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), map[string]any{
					"Bucket": ref(f.id["turnBlobs"]),
					"PolicyDocument": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{assertions.Match_ObjectLike(&map[string]any{
						"Effect": "Deny", "Action": "s3:*", "Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
					})})},
				})
			})
			check(t, func() {
				f.tpl.HasOutput(jsii.String("TurnBucketName"), map[string]any{"Value": ref(f.id["turnBlobs"])})
			})
		}},
		{"gettoken (the turn routes) reads and deletes the bucket's turn objects too; callback never", func(t *testing.T, f *fixture) {
			doc := props(f.resources[f.id[stack.GetToken+"Policy"]])["PolicyDocument"].(map[string]any)["Statement"].([]any)
			if got, want := fmt.Sprint(doc[len(doc)-4:]), fmt.Sprint(append(blobStatements(f), bundleStatements(f)...)); got != want {
				t.Errorf("gettoken's last statements %s, want the turn bucket's and the git bundle's", got)
			}
			cb := props(f.resources[f.id[stack.Callback+"Policy"]])["PolicyDocument"].(map[string]any)["Statement"].([]any)
			if got := fmt.Sprint(cb[len(cb)-2:]); got != fmt.Sprint(bundleStatements(f)) || strings.Contains(fmt.Sprint(cb), "turns/") {
				t.Errorf("callback's S3 statements %s, want the git bundle's only", fmt.Sprint(cb))
			}
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{"FunctionName": "aa-test-gettoken",
					"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{stack.EnvTurnBucket: ref(f.id["turnBlobs"])})}})
			})
		}},
		{"key policy: the turn bucket's encryption through S3 only, for every function (the git bundle is there)", func(t *testing.T, f *fixture) {
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
					"KeyPolicy": map[string]any{"Statement": assertions.Match_ArrayWith(&[]any{map[string]any{
						"Sid": "TurnBucketEncryptionThroughS3", "Effect": "Allow",
						"Principal": map[string]any{"AWS": []any{getAtt(f.id[stack.GetToken+"Role"], "Arn"), getAtt(f.id[stack.Callback+"Role"], "Arn"), getAtt(f.id[stack.Turn+"Role"], "Arn")}},
						"Action":    []any{"kms:Decrypt", "kms:GenerateDataKey"}, "Resource": "*",
						"Condition": map[string]any{"StringEquals": map[string]any{
							"kms:ViaService":    map[string]any{"Fn::Join": []any{"", []any{"s3.", ref("AWS::Region"), ".amazonaws.com"}}},
							"kms:CallerAccount": ref("AWS::AccountId"),
						}},
					}})},
				})
			})
		}},
		{"stream URL: response streaming, IAM callers only; no public permission", func(t *testing.T, f *fixture) {
			check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::Lambda::Url"), jsii.Number(1)) })
			check(t, func() {
				f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]any{
					"TargetFunctionArn": getAtt(f.id[stack.Turn], "Arn"), "AuthType": "AWS_IAM", "InvokeMode": "RESPONSE_STREAM",
				})
			})
			check(t, func() {
				f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Permission"), map[string]any{"Principal": "*"}, jsii.Number(0))
			})
			urls := f.tpl.FindResources(jsii.String("AWS::Lambda::Url"), nil)
			for lid := range *urls {
				check(t, func() {
					f.tpl.HasOutput(jsii.String("TurnStreamUrl"), map[string]any{"Value": getAtt(lid, "FunctionUrl")})
				})
			}
		}},
		{"turn and bundle history routes on gettoken behind IAM; output: turn function name; no turn warning", func(t *testing.T, f *fixture) {
			want := runtimeRoutesWant("/oauth/callback/{app}")
			// The git bundle's history routes, with it.
			for _, r := range stack.BundleRoutes {
				want[r.Method+" "+r.Path] = routeWant{stack.GetToken, "AWS_IAM"}
			}
			assertRoutes(t, f, want)
			check(t, func() {
				f.tpl.HasOutput(jsii.String("TurnFunctionName"), map[string]any{"Value": ref(f.id[stack.Turn])})
			})
			if w := f.ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("turn function"))); len(*w) != 0 {
				t.Errorf("warnings: %v", (*w)[0].Entry.Data)
			}
		}},
	})
}

func TestNoTurnFunctionByDefault(t *testing.T) {
	f := defaults(t)
	if _, ok := f.id[stack.Turn]; ok {
		t.Fatal("a turn function without turns=1")
	}
	check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(0)) })
	check(t, func() {
		f.tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{"QueueName": "aa-test-events.fifo", "VisibilityTimeout": 180})
	})
	check(t, func() { f.tpl.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(0)) })
	// Without turns no agent changes the bundle: the packaged directory
	// runs as is.
	check(t, func() {
		f.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"), map[string]any{
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{stack.EnvBundleRepo: assertions.Match_AnyValue()})}}, jsii.Number(0))
	})
	if w := f.ann.FindWarning(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("no turn function.*turns=1"))); len(*w) != 1 {
		t.Errorf("want one warning that nothing consumes the queue, got %d", len(*w))
	}
}

func TestTurnSettings(t *testing.T) {
	f := synth(t, func(p *stack.Props) { p.Turns = stack.TurnsProps{Enabled: true, TimeoutSeconds: 10, BatchSize: 3} })
	check(t, func() {
		f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
			"FunctionName": "aa-test-turn", "Timeout": 10,
			"Environment": map[string]any{"Variables": assertions.Match_ObjectLike(&map[string]any{stack.EnvTurnReserve: "1"})},
		})
	})
	check(t, func() {
		f.tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]any{"QueueName": "aa-test-events.fifo", "VisibilityTimeout": 60})
	})
	check(t, func() {
		f.tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]any{"BatchSize": 3})
	})
	// Without models, no Bedrock statement at all.
	if doc := fmt.Sprint(props(f.resources[f.id[stack.Turn+"Policy"]])); strings.Contains(doc, "bedrock") {
		t.Errorf("turn policy without models: %s", doc)
	}
	assertRejected(t, []rejection{
		{"timeout too short", func(p *stack.Props) { p.Turns = stack.TurnsProps{Enabled: true, TimeoutSeconds: 2} }, "turnTimeout 2"},
		{"timeout beyond Lambda's", func(p *stack.Props) { p.Turns = stack.TurnsProps{Enabled: true, TimeoutSeconds: 901} }, "turnTimeout 901"},
		{"batch beyond FIFO's", func(p *stack.Props) { p.Turns = stack.TurnsProps{Enabled: true, BatchSize: 11} }, "turnBatchSize 11"},
		{"wildcard model", func(p *stack.Props) {
			p.Turns = stack.TurnsProps{Enabled: true, BedrockModels: []string{"anthropic.*"}}
		}, "bedrockModels"},
		{"wildcard model ARN", func(p *stack.Props) {
			p.Turns = stack.TurnsProps{Enabled: true, BedrockModels: []string{"arn:aws:bedrock:us-east-1::foundation-model/*"}}
		}, "bedrockModels"},
		{"settings without the function", func(p *stack.Props) { p.Turns = stack.TurnsProps{TimeoutSeconds: 60} }, "need turns=1"},
		{"turn route as a callback path", func(p *stack.Props) { p.CallbackPaths = []string{"/v1/instances"} }, "collides"},
		{"bundle route as a callback path", func(p *stack.Props) { p.CallbackPaths = []string{"/v1/bundle/revisions"} }, "collides"},
	})
}
