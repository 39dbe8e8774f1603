package awscount_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/agentauth/agentauth/shared/aws/awscount"
)

// Count the AWS calls one piece of work makes.
func Example() {
	ctx := context.Background()
	calls := awscount.New()
	cfg, err := config.LoadDefaultConfig(ctx, config.WithAPIOptions(calls.APIOptions()))
	if err != nil {
		return
	}
	keys := kms.NewFromConfig(cfg)
	// … serve one request with keys and the other clients built from cfg …
	_ = keys
	fmt.Println(calls) // e.g. "dynamodb.GetItem=1 kms.Decrypt=1", or "none"
	calls.Reset()
}
