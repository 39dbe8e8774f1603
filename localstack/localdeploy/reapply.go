package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigatewayv2"
	apigwtypes "github.com/aws/aws-sdk-go-v2/service/apigatewayv2/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Outcomes of one check.
const (
	kept      = "kept"       // the emulator has the template's value
	reapplied = "re-applied" // it did not; the template's value was set through the API
	failed    = "FAILED"     // it did not, and setting it failed (or is not possible)
)

type result struct{ outcome, resource, property, detail string }

type reconciler struct {
	resolver
	endpoint string
	results  []result
}

func (r *reconciler) load(ctx context.Context, stack string) error {
	return r.loadPhysical(ctx, stack)
}

func (r *reconciler) add(outcome, res, prop, detail string) {
	r.results = append(r.results, result{outcome, res, prop, detail})
}

// check records one property: ok says whether the live value matches;
// when it does not, fix sets the template's value.
func (r *reconciler) check(res, prop string, ok bool, getErr error, fix func() error) {
	switch {
	case getErr != nil:
		r.add(failed, res, prop, "read: "+getErr.Error())
	case ok:
		r.add(kept, res, prop, "")
	default:
		if err := fix(); err != nil {
			r.add(failed, res, prop, err.Error())
		} else {
			r.add(reapplied, res, prop, "")
		}
	}
}

func (r *reconciler) run(ctx context.Context) {
	for _, id := range r.tpl.logicalIDs("AWS::KMS::Key") {
		r.key(ctx, id)
	}
	for _, id := range r.tpl.logicalIDs("AWS::DynamoDB::Table") {
		r.table(ctx, id)
	}
	for _, id := range r.tpl.logicalIDs("AWS::SQS::Queue") {
		r.queue(ctx, id)
	}
	for _, id := range r.tpl.logicalIDs("AWS::Logs::LogGroup") {
		r.logGroup(ctx, id)
	}
	for _, id := range r.tpl.logicalIDs("AWS::CloudWatch::Alarm") {
		r.alarm(ctx, id)
	}
	for _, id := range r.tpl.logicalIDs("AWS::SecretsManager::Secret") {
		r.secret(ctx, id)
	}
	for _, id := range r.tpl.logicalIDs("AWS::ApiGatewayV2::Route") {
		r.route(ctx, id)
	}
	for _, id := range r.tpl.logicalIDs("AWS::Lambda::Function") {
		r.function(ctx, id)
	}
}

func (r *reconciler) report(w io.Writer) error {
	n := 0
	for _, x := range r.results {
		line := fmt.Sprintf("  %-10s %-44s %s", x.outcome, x.resource, x.property)
		if x.detail != "" {
			line += ": " + x.detail
		}
		fmt.Fprintln(w, line)
		if x.outcome == failed {
			n++
		}
	}
	if n > 0 {
		return fmt.Errorf("%d propert(ies) could not be made to match the template", n)
	}
	return nil
}

func (r *reconciler) key(ctx context.Context, id string) {
	p := r.tpl.Resources[id].Properties
	keyID := r.physical[id]
	name := "key " + keyID
	if b, _ := p["EnableKeyRotation"].(bool); b {
		out, err := r.c.kms.GetKeyRotationStatus(ctx, &kms.GetKeyRotationStatusInput{KeyId: aws.String(keyID)})
		r.check(name, "EnableKeyRotation", err == nil && out.KeyRotationEnabled, err, func() error {
			_, err := r.c.kms.EnableKeyRotation(ctx, &kms.EnableKeyRotationInput{KeyId: aws.String(keyID)})
			return err
		})
	}
	if doc, ok := p["KeyPolicy"]; ok {
		want, err := r.resolve(ctx, doc)
		if err != nil {
			r.add(failed, name, "KeyPolicy", err.Error())
			return
		}
		out, err := r.c.kms.GetKeyPolicy(ctx, &kms.GetKeyPolicyInput{KeyId: aws.String(keyID), PolicyName: aws.String("default")})
		var live any
		if err == nil {
			err = json.Unmarshal([]byte(aws.ToString(out.Policy)), &live)
		}
		r.check(name, "KeyPolicy", err == nil && canonical(live) == canonical(want), err, func() error {
			b, _ := json.Marshal(want)
			_, err := r.c.kms.PutKeyPolicy(ctx, &kms.PutKeyPolicyInput{KeyId: aws.String(keyID), PolicyName: aws.String("default"), Policy: aws.String(string(b))})
			return err
		})
	}
}

func (r *reconciler) table(ctx context.Context, id string) {
	p := r.tpl.Resources[id].Properties
	tn := r.physical[id]
	name := "table " + tn
	if ttl, ok := p["TimeToLiveSpecification"].(map[string]any); ok && ttl["Enabled"] == true {
		attr, _ := ttl["AttributeName"].(string)
		out, err := r.c.ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(tn)})
		ok := err == nil && out.TimeToLiveDescription != nil &&
			(out.TimeToLiveDescription.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled || out.TimeToLiveDescription.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabling) &&
			aws.ToString(out.TimeToLiveDescription.AttributeName) == attr
		r.check(name, "TimeToLiveSpecification ("+attr+")", ok, err, func() error {
			_, err := r.c.ddb.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(tn),
				TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(attr), Enabled: aws.Bool(true)}})
			return err
		})
	}
	if pitr, ok := p["PointInTimeRecoverySpecification"].(map[string]any); ok && pitr["PointInTimeRecoveryEnabled"] == true {
		out, err := r.c.ddb.DescribeContinuousBackups(ctx, &dynamodb.DescribeContinuousBackupsInput{TableName: aws.String(tn)})
		ok := err == nil && out.ContinuousBackupsDescription != nil && out.ContinuousBackupsDescription.PointInTimeRecoveryDescription != nil &&
			out.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus == ddbtypes.PointInTimeRecoveryStatusEnabled
		r.check(name, "PointInTimeRecoverySpecification", ok, err, func() error {
			_, err := r.c.ddb.UpdateContinuousBackups(ctx, &dynamodb.UpdateContinuousBackupsInput{TableName: aws.String(tn),
				PointInTimeRecoverySpecification: &ddbtypes.PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: aws.Bool(true)}})
			return err
		})
	}
	desc, derr := r.c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tn)})
	if sse, ok := p["SSESpecification"].(map[string]any); ok && sse["SSEEnabled"] == true {
		keyArn, err := r.resolveString(ctx, sse["KMSMasterKeyId"])
		if err != nil {
			r.add(failed, name, "SSESpecification", err.Error())
		} else {
			ok := derr == nil && desc.Table.SSEDescription != nil && desc.Table.SSEDescription.Status == ddbtypes.SSEStatusEnabled &&
				desc.Table.SSEDescription.SSEType == ddbtypes.SSETypeKms && aws.ToString(desc.Table.SSEDescription.KMSMasterKeyArn) == keyArn
			r.check(name, "SSESpecification (KMS, the stack's key)", ok, derr, func() error {
				_, err := r.c.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(tn),
					SSESpecification: &ddbtypes.SSESpecification{Enabled: aws.Bool(true), SSEType: ddbtypes.SSETypeKms, KMSMasterKeyId: aws.String(keyArn)}})
				return err
			})
		}
	}
	r.indexes(ctx, name, tn, p, desc, derr)
	if b, _ := p["DeletionProtectionEnabled"].(bool); b {
		r.check(name, "DeletionProtectionEnabled", derr == nil && aws.ToBool(desc.Table.DeletionProtectionEnabled), derr, func() error {
			_, err := r.c.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(tn), DeletionProtectionEnabled: aws.Bool(true)})
			return err
		})
	}
	if bm, _ := p["BillingMode"].(string); bm != "" {
		ok := derr == nil && desc.Table.BillingModeSummary != nil && string(desc.Table.BillingModeSummary.BillingMode) == bm
		r.check(name, "BillingMode "+bm, ok, derr, func() error {
			_, err := r.c.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(tn), BillingMode: ddbtypes.BillingMode(bm)})
			return err
		})
	}
}

// queueAttributes maps template properties to SQS attribute names that
// SetQueueAttributes accepts after creation (FifoQueue cannot change).
var queueAttributes = map[string]string{
	"MessageRetentionPeriod":    "MessageRetentionPeriod",
	"VisibilityTimeout":         "VisibilityTimeout",
	"SqsManagedSseEnabled":      "SqsManagedSseEnabled",
	"ContentBasedDeduplication": "ContentBasedDeduplication",
	"RedrivePolicy":             "RedrivePolicy",
	"FifoQueue":                 "",
}

func (r *reconciler) queue(ctx context.Context, id string) {
	p := r.tpl.Resources[id].Properties
	u := r.physical[id]
	name := "queue " + u[strings.LastIndex(u, "/")+1:]
	out, gerr := r.c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	var live map[string]string
	if gerr == nil {
		live = out.Attributes
	}
	for _, prop := range sortedKeys(queueAttributes) {
		v, ok := p[prop]
		if !ok {
			continue
		}
		attr := queueAttributes[prop]
		want, err := r.resolve(ctx, v)
		if err != nil {
			r.add(failed, name, prop, err.Error())
			continue
		}
		var match bool
		var wantStr string
		if prop == "RedrivePolicy" {
			b, _ := json.Marshal(want)
			wantStr = string(b)
			var l any
			match = json.Unmarshal([]byte(live["RedrivePolicy"]), &l) == nil && canonical(l) == canonical(want)
		} else {
			wantStr = scalar(want)
			liveKey := attr
			if prop == "FifoQueue" {
				liveKey = "FifoQueue"
			}
			match = strings.EqualFold(live[liveKey], wantStr)
		}
		r.check(name, prop+" "+shorten(wantStr), match, gerr, func() error {
			if attr == "" {
				return fmt.Errorf("%s cannot change after creation", prop)
			}
			_, err := r.c.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(u), Attributes: map[string]string{attr: wantStr}})
			return err
		})
	}
}

func (r *reconciler) logGroup(ctx context.Context, id string) {
	p := r.tpl.Resources[id].Properties
	days, ok := p["RetentionInDays"].(float64)
	if !ok {
		return
	}
	lg := r.physical[id]
	out, err := r.c.logs.DescribeLogGroups(ctx, &cloudwatchlogs.DescribeLogGroupsInput{LogGroupNamePrefix: aws.String(lg)})
	match := false
	if err == nil {
		for _, g := range out.LogGroups {
			if aws.ToString(g.LogGroupName) == lg && g.RetentionInDays != nil && float64(*g.RetentionInDays) == days {
				match = true
			}
		}
	}
	r.check("log group "+lg, fmt.Sprintf("RetentionInDays %v", days), match, err, func() error {
		_, err := r.c.logs.PutRetentionPolicy(ctx, &cloudwatchlogs.PutRetentionPolicyInput{LogGroupName: aws.String(lg), RetentionInDays: aws.Int32(int32(days))})
		return err
	})
}

func (r *reconciler) alarm(ctx context.Context, id string) {
	p := r.tpl.Resources[id].Properties
	name := r.physical[id]
	out, err := r.c.cw.DescribeAlarms(ctx, &cloudwatch.DescribeAlarmsInput{AlarmNames: []string{name}})
	var dims []cwtypes.Dimension
	for _, d := range asList(p["Dimensions"]) {
		m := d.(map[string]any)
		v, rerr := r.resolveString(ctx, m["Value"])
		if rerr != nil {
			r.add(failed, "alarm "+name, "Dimensions", rerr.Error())
			return
		}
		dims = append(dims, cwtypes.Dimension{Name: aws.String(m["Name"].(string)), Value: aws.String(v)})
	}
	want := fmt.Sprintf("%v %v %v %v %v %v %v %v", p["Namespace"], p["MetricName"], p["Statistic"], p["Period"], p["EvaluationPeriods"], p["ComparisonOperator"], p["Threshold"], p["TreatMissingData"])
	match := false
	if err == nil && len(out.MetricAlarms) == 1 {
		a := out.MetricAlarms[0]
		got := fmt.Sprintf("%v %v %v %v %v %v %v %v", aws.ToString(a.Namespace), aws.ToString(a.MetricName), a.Statistic, aws.ToInt32(a.Period), aws.ToInt32(a.EvaluationPeriods), a.ComparisonOperator, aws.ToFloat64(a.Threshold), aws.ToString(a.TreatMissingData))
		match = got == want && len(a.Dimensions) == len(dims) && len(a.AlarmActions) == len(asList(p["AlarmActions"]))
		for i := range dims {
			match = match && i < len(a.Dimensions) && aws.ToString(a.Dimensions[i].Value) == aws.ToString(dims[i].Value)
		}
	}
	r.check("alarm "+name, "metric, threshold, dimensions, actions", match, err, func() error {
		var actions []string
		for _, a := range asList(p["AlarmActions"]) {
			s, err := r.resolveString(ctx, a)
			if err != nil {
				return err
			}
			actions = append(actions, s)
		}
		_, err := r.c.cw.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{
			AlarmName: aws.String(name), AlarmDescription: aws.String(fmt.Sprint(p["AlarmDescription"])),
			Namespace: aws.String(fmt.Sprint(p["Namespace"])), MetricName: aws.String(fmt.Sprint(p["MetricName"])),
			Statistic: cwtypes.Statistic(fmt.Sprint(p["Statistic"])), Period: aws.Int32(int32(num(p["Period"]))),
			EvaluationPeriods: aws.Int32(int32(num(p["EvaluationPeriods"]))), Threshold: aws.Float64(num(p["Threshold"])),
			ComparisonOperator: cwtypes.ComparisonOperator(fmt.Sprint(p["ComparisonOperator"])),
			TreatMissingData:   aws.String(fmt.Sprint(p["TreatMissingData"])), Dimensions: dims, AlarmActions: actions,
		})
		return err
	})
}

// secret checks a generated secret against its GenerateSecretString rules.
// MiniStack's CloudFormation ignores ExcludePunctuation (and draws from
// Python's non-cryptographic random); a punctuation character — ',' above
// all — would split the session-keys string. A non-conforming value is
// replaced by one drawn with crypto/rand under the template's rules.
func (r *reconciler) secret(ctx context.Context, id string) {
	p := r.tpl.Resources[id].Properties
	gen, ok := p["GenerateSecretString"].(map[string]any)
	if !ok || gen["SecretStringTemplate"] != nil {
		return
	}
	length := 32
	if v, ok := gen["PasswordLength"].(float64); ok {
		length = int(v)
	}
	alphabet := secretAlphabet(gen)
	sid := r.physical[id]
	out, err := r.c.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(sid)})
	match := false
	if err == nil {
		v := aws.ToString(out.SecretString)
		match = len(v) == length && !strings.ContainsFunc(v, func(c rune) bool { return !strings.ContainsRune(alphabet, c) })
	}
	r.check("secret "+sid, fmt.Sprintf("GenerateSecretString (%d of %s)", length, describeAlphabet(gen)), match, err, func() error {
		v, err := randomString(alphabet, length)
		if err != nil {
			return err
		}
		_, err = r.c.sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(sid), SecretString: aws.String(v)})
		return err
	})
}

func secretAlphabet(gen map[string]any) string {
	var b strings.Builder
	add := func(flag string, set string) {
		if gen[flag] != true {
			b.WriteString(set)
		}
	}
	add("ExcludeLowercase", "abcdefghijklmnopqrstuvwxyz")
	add("ExcludeUppercase", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	add("ExcludeNumbers", "0123456789")
	add("ExcludePunctuation", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
	if gen["IncludeSpace"] == true {
		b.WriteString(" ")
	}
	ex, _ := gen["ExcludeCharacters"].(string)
	return strings.Map(func(c rune) rune {
		if strings.ContainsRune(ex, c) {
			return -1
		}
		return c
	}, b.String())
}

func describeAlphabet(gen map[string]any) string {
	if gen["ExcludePunctuation"] == true && gen["IncludeSpace"] != true {
		return "letters and digits"
	}
	return "the template's characters"
}

func randomString(alphabet string, n int) (string, error) {
	if alphabet == "" {
		return "", fmt.Errorf("empty alphabet")
	}
	out := make([]byte, n)
	for i := range out {
		k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			return "", err
		}
		out[i] = alphabet[k.Int64()]
	}
	return string(out), nil
}

// route looks the route up by its key: the emulator's physical id for a
// route is not the route id (MiniStack 1.5.33 reports the API id).
func (r *reconciler) route(ctx context.Context, id string) {
	p := r.tpl.Resources[id].Properties
	key := fmt.Sprint(p["RouteKey"])
	want := fmt.Sprint(p["AuthorizationType"])
	apiID, err := r.resolveString(ctx, p["ApiId"])
	if err != nil {
		r.add(failed, "route "+key, "AuthorizationType", err.Error())
		return
	}
	out, gerr := r.c.apigw.GetRoutes(ctx, &apigatewayv2.GetRoutesInput{ApiId: aws.String(apiID), MaxResults: aws.String("500")})
	var live *apigwtypes.Route
	if gerr == nil {
		for i := range out.Items {
			if aws.ToString(out.Items[i].RouteKey) == key {
				live = &out.Items[i]
			}
		}
		if live == nil {
			gerr = fmt.Errorf("API %s has no route %q", apiID, key)
		}
	}
	r.check("route "+key, "AuthorizationType "+want, gerr == nil && string(live.AuthorizationType) == want, gerr, func() error {
		_, err := r.c.apigw.UpdateRoute(ctx, &apigatewayv2.UpdateRouteInput{ApiId: aws.String(apiID), RouteId: live.RouteId,
			AuthorizationType: apigwtypes.AuthorizationType(want)})
		return err
	})
}

// function verifies what the emulator runs and points the function at the
// emulator. AWS_ENDPOINT_URL is not in the template and never goes there:
// in AWS the SDK finds the service endpoints itself.
func (r *reconciler) function(ctx context.Context, id string) {
	p := r.tpl.Resources[id].Properties
	fn := r.physical[id]
	name := "function " + fn
	cfg, err := r.c.lambda.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(fn)})
	if err != nil {
		r.add(failed, name, "configuration", err.Error())
		return
	}
	var arch []string
	for _, a := range cfg.Architectures {
		arch = append(arch, string(a))
	}
	want := fmt.Sprintf("%v %v %v %v %v", p["Runtime"], p["Handler"], asList(p["Architectures"]), p["MemorySize"], p["Timeout"])
	got := fmt.Sprintf("%v %v %v %v %v", cfg.Runtime, aws.ToString(cfg.Handler), toAny(arch), aws.ToInt32(cfg.MemorySize), aws.ToInt32(cfg.Timeout))
	r.check(name, "runtime, handler, architecture, memory, timeout", got == want, nil, func() error {
		return fmt.Errorf("have %s, template says %s (redeploy; the emulator cannot change these in place here)", got, want)
	})
	vars := map[string]string{}
	if cfg.Environment != nil {
		vars = cfg.Environment.Variables
	}
	wantEnv, err := r.resolve(ctx, p["Environment"].(map[string]any)["Variables"])
	if err != nil {
		r.add(failed, name, "Environment", err.Error())
		return
	}
	// What the emulator needs besides the template's values.
	overrides := emulatorEnv(wantEnv.(map[string]any), r.endpoint)
	var differ []string
	for k, v := range wantEnv.(map[string]any) {
		if _, over := overrides[k]; !over && vars[k] != fmt.Sprint(v) {
			differ = append(differ, k)
		}
	}
	slices.Sort(differ)
	r.check(name, "Environment (the template's variables)", len(differ) == 0, nil, func() error {
		return fmt.Errorf("differs from the template: %s", strings.Join(differ, ", "))
	})
	for _, k := range sortedKeys(overrides) {
		v := overrides[k]
		r.check(name, k+"="+v+" (emulator only)", vars[k] == v, nil, func() error {
			env := map[string]string{}
			for k, v := range vars {
				env[k] = v
			}
			env[k] = v
			_, err := r.c.lambda.UpdateFunctionConfiguration(ctx, &lambda.UpdateFunctionConfigurationInput{FunctionName: aws.String(fn),
				Environment: &lambdatypes.Environment{Variables: env}})
			if err == nil {
				vars = env
			}
			return err
		})
	}
}

// taskRoot is where Lambda unpacks a function package, and the working
// directory of its bootstrap.
const taskRoot = "/var/task/"

// emulatorEnv is the environment the emulator needs on top of the
// template's: AWS_ENDPOINT_URL, so the functions' SDK calls reach the
// emulator (in AWS the SDK finds the endpoints itself), and every path
// under /var/task made relative, because MiniStack runs a provided.*
// bootstrap as a host process in a temporary directory (its working
// directory and LAMBDA_TASK_ROOT), where /var/task does not exist.
func emulatorEnv(template map[string]any, endpoint string) map[string]string {
	out := map[string]string{"AWS_ENDPOINT_URL": endpoint}
	for k, v := range template {
		if s, ok := v.(string); ok && strings.HasPrefix(s, taskRoot) {
			out[k] = strings.TrimPrefix(s, taskRoot)
		}
	}
	return out
}

// scalar formats a template value as the services echo it: whole
// numbers without an exponent (1209600, not 1.2096e+06).
func scalar(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return nil
}

func toAny(ss []string) []any {
	out := []any{}
	for _, s := range ss {
		out = append(out, s)
	}
	return out
}

func num(v any) float64 {
	switch v := v.(type) {
	case float64:
		return v
	case string:
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	return 0
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func shorten(s string) string {
	if len(s) > 60 {
		return s[:57] + "..."
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// indexes checks that the table has each global secondary index of the
// template, by name, key schema and projection type, and creates one that
// is missing (one UpdateTable per index, as DynamoDB requires).
func (r *reconciler) indexes(ctx context.Context, name, tn string, p map[string]any, desc *dynamodb.DescribeTableOutput, derr error) {
	gsis, _ := p["GlobalSecondaryIndexes"].([]any)
	if len(gsis) == 0 {
		return
	}
	attrTypes := map[string]string{}
	defs, _ := p["AttributeDefinitions"].([]any)
	for _, d := range defs {
		dm, _ := d.(map[string]any)
		n, _ := dm["AttributeName"].(string)
		t, _ := dm["AttributeType"].(string)
		attrTypes[n] = t
	}
	for _, g := range gsis {
		gm, _ := g.(map[string]any)
		idx, _ := gm["IndexName"].(string)
		proj, _ := gm["Projection"].(map[string]any)
		projType, _ := proj["ProjectionType"].(string)
		var keys []ddbtypes.KeySchemaElement
		var attrs []ddbtypes.AttributeDefinition
		ks, _ := gm["KeySchema"].([]any)
		for _, k := range ks {
			km, _ := k.(map[string]any)
			n, _ := km["AttributeName"].(string)
			kt, _ := km["KeyType"].(string)
			keys = append(keys, ddbtypes.KeySchemaElement{AttributeName: aws.String(n), KeyType: ddbtypes.KeyType(kt)})
			attrs = append(attrs, ddbtypes.AttributeDefinition{AttributeName: aws.String(n), AttributeType: ddbtypes.ScalarAttributeType(attrTypes[n])})
		}
		ok := false
		if derr == nil {
			for _, live := range desc.Table.GlobalSecondaryIndexes {
				if aws.ToString(live.IndexName) == idx && sameKeys(live.KeySchema, keys) &&
					live.Projection != nil && string(live.Projection.ProjectionType) == projType {
					ok = true
				}
			}
		}
		r.check(name, "GlobalSecondaryIndexes "+idx, ok, derr, func() error {
			_, err := r.c.ddb.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(tn), AttributeDefinitions: attrs,
				GlobalSecondaryIndexUpdates: []ddbtypes.GlobalSecondaryIndexUpdate{{Create: &ddbtypes.CreateGlobalSecondaryIndexAction{
					IndexName: aws.String(idx), KeySchema: keys, Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionType(projType)},
				}}}})
			return err
		})
	}
}

func sameKeys(a, b []ddbtypes.KeySchemaElement) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if aws.ToString(a[i].AttributeName) != aws.ToString(b[i].AttributeName) || a[i].KeyType != b[i].KeyType {
			return false
		}
	}
	return true
}
