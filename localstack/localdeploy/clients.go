package main

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/apigatewayv2"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// clients are the service clients, all on the emulator endpoint.
type clients struct {
	region string
	cfn    *cloudformation.Client
	ddb    *dynamodb.Client
	sqs    *sqs.Client
	kms    *kms.Client
	iam    *iam.Client
	logs   *cloudwatchlogs.Client
	cw     *cloudwatch.Client
	sm     *secretsmanager.Client
	lambda *lambda.Client
	apigw  *apigatewayv2.Client
	s3     *s3.Client
}

func newClients(cfg aws.Config) *clients {
	return &clients{
		region: cfg.Region,
		cfn:    cloudformation.NewFromConfig(cfg),
		ddb:    dynamodb.NewFromConfig(cfg),
		sqs:    sqs.NewFromConfig(cfg),
		kms:    kms.NewFromConfig(cfg),
		iam:    iam.NewFromConfig(cfg),
		logs:   cloudwatchlogs.NewFromConfig(cfg),
		cw:     cloudwatch.NewFromConfig(cfg),
		sm:     secretsmanager.NewFromConfig(cfg),
		lambda: lambda.NewFromConfig(cfg),
		apigw:  apigatewayv2.NewFromConfig(cfg),
		s3:     s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }),
	}
}
