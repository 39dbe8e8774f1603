package bedrock

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
)

// NewClient builds the bedrock-runtime client of a Model: the SDK
// configuration from load (shared/aws/awsconfig's, with its replay-safe
// transport and AWS_ENDPOINT_URL for an emulator), the Model's region and
// endpoint override when set.
func NewClient(ctx context.Context, load func(context.Context) (aws.Config, error), region, endpoint string) (*bedrockruntime.Client, error) {
	cfg, err := load(ctx)
	if err != nil {
		return nil, fmt.Errorf("bedrock model: AWS configuration: %w", err)
	}
	return bedrockruntime.NewFromConfig(cfg, func(o *bedrockruntime.Options) {
		if region != "" {
			o.Region = region
		}
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	}), nil
}
