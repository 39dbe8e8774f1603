package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigatewayv2"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// resource is one template resource.
type resource struct {
	Type           string         `json:"Type"`
	Properties     map[string]any `json:"Properties"`
	DeletionPolicy string         `json:"DeletionPolicy"`
}

type template struct {
	Resources map[string]resource `json:"Resources"`
}

func loadTemplate(path string) (*template, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t template
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("template %s: %w", path, err)
	}
	return &t, nil
}

// logicalIDs returns the template's resources of type typ, sorted.
func (t *template) logicalIDs(typ string) []string {
	var ids []string
	for id, r := range t.Resources {
		if r.Type == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

// resolver turns the template's intrinsic functions into the values the
// deployed stack has, from its physical ids and the live resources.
type resolver struct {
	c        *clients
	tpl      *template
	account  string
	physical map[string]string // logical id -> physical id
}

func (r *resolver) loadPhysical(ctx context.Context, stack string) error {
	out, err := r.c.cfn.DescribeStackResources(ctx, &cloudformation.DescribeStackResourcesInput{StackName: aws.String(stack)})
	if err != nil {
		return fmt.Errorf("describe stack %s: %w", stack, err)
	}
	r.physical = map[string]string{}
	for _, res := range out.StackResources {
		r.physical[aws.ToString(res.LogicalResourceId)] = aws.ToString(res.PhysicalResourceId)
	}
	st, err := r.c.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if err != nil || len(st.Stacks) == 0 {
		return fmt.Errorf("describe stack %s: %v", stack, err)
	}
	// arn:aws:cloudformation:<region>:<account>:stack/...
	if parts := strings.Split(aws.ToString(st.Stacks[0].StackId), ":"); len(parts) > 4 {
		r.account = parts[4]
	}
	return nil
}

// resolve returns v with every Ref, Fn::GetAtt and Fn::Join replaced.
func (r *resolver) resolve(ctx context.Context, v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 1 {
			for k, x := range v {
				switch k {
				case "Ref":
					return r.ref(x.(string))
				case "Fn::GetAtt":
					a := x.([]any)
					return r.getAtt(ctx, a[0].(string), a[1].(string))
				case "Fn::Join":
					a := x.([]any)
					parts, err := r.resolve(ctx, a[1])
					if err != nil {
						return nil, err
					}
					var ss []string
					for _, p := range parts.([]any) {
						ss = append(ss, fmt.Sprint(p))
					}
					return strings.Join(ss, a[0].(string)), nil
				}
			}
		}
		out := map[string]any{}
		for k, x := range v {
			rx, err := r.resolve(ctx, x)
			if err != nil {
				return nil, err
			}
			out[k] = rx
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			rx, err := r.resolve(ctx, x)
			if err != nil {
				return nil, err
			}
			out[i] = rx
		}
		return out, nil
	}
	return v, nil
}

func (r *resolver) resolveString(ctx context.Context, v any) (string, error) {
	x, err := r.resolve(ctx, v)
	if err != nil {
		return "", err
	}
	s, ok := x.(string)
	if !ok {
		return "", fmt.Errorf("%v does not resolve to a string", v)
	}
	return s, nil
}

func (r *resolver) ref(id string) (string, error) {
	switch id {
	case "AWS::Region":
		return r.c.region, nil
	case "AWS::AccountId":
		return r.account, nil
	case "AWS::Partition":
		return "aws", nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	}
	p, ok := r.physical[id]
	if !ok {
		return "", fmt.Errorf("Ref %s: not a resource of the stack", id)
	}
	return p, nil
}

func (r *resolver) getAtt(ctx context.Context, id, attr string) (string, error) {
	p, err := r.ref(id)
	if err != nil {
		return "", err
	}
	typ := r.tpl.Resources[id].Type
	switch {
	case typ == "AWS::KMS::Key" && attr == "Arn":
		out, err := r.c.kms.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(p)})
		if err != nil {
			return "", fmt.Errorf("describe key %s: %w", p, err)
		}
		return aws.ToString(out.KeyMetadata.Arn), nil
	case typ == "AWS::SQS::Queue" && attr == "Arn":
		out, err := r.c.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(p),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
		if err != nil {
			return "", fmt.Errorf("queue %s: %w", p, err)
		}
		return out.Attributes["QueueArn"], nil
	case typ == "AWS::SQS::Queue" && attr == "QueueName":
		return p[strings.LastIndex(p, "/")+1:], nil
	case typ == "AWS::IAM::Role" && attr == "Arn":
		out, err := r.c.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(p)})
		if err != nil {
			return "", fmt.Errorf("role %s: %w", p, err)
		}
		return aws.ToString(out.Role.Arn), nil
	case typ == "AWS::ApiGatewayV2::Api" && attr == "ApiEndpoint":
		out, err := r.c.apigw.GetApi(ctx, &apigatewayv2.GetApiInput{ApiId: aws.String(p)})
		if err != nil {
			return "", fmt.Errorf("api %s: %w", p, err)
		}
		return aws.ToString(out.ApiEndpoint), nil
	}
	return "", fmt.Errorf("Fn::GetAtt %s.%s (%s): not supported here", id, attr, typ)
}

// normalize makes two policy documents comparable: every scalar becomes a
// one-element list and nested lists flatten, since IAM treats "a" and
// ["a"] alike and services differ in which they echo back.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = normalize(x)
		}
		return out
	case []any:
		out := []any{}
		for _, x := range v {
			n := normalize(x)
			if l, ok := n.([]any); ok {
				out = append(out, l...)
			} else {
				out = append(out, n)
			}
		}
		return out
	case string, float64, bool:
		return []any{fmt.Sprint(v)}
	}
	return v
}

func canonical(v any) string {
	b, _ := json.Marshal(normalize(v))
	return string(b)
}
