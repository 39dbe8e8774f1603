// Package awsconfig loads the AWS SDK configuration agentauth's functions
// and tests use: the default chain (environment, including
// AWS_ENDPOINT_URL for a local emulator; the Lambda role in AWS), an HTTP
// transport that never replays an applied write, and optional per-call
// counting (shared/aws/awscount).
//
// It must never log credentials or request bodies.
package awsconfig

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/agentauth/agentauth/shared/aws/awscount"
)

// LoadDefault is Load without counting.
func LoadDefault(ctx context.Context) (aws.Config, error) { return Load(ctx, nil) }

// Load returns the SDK configuration; counter may be nil.
func Load(ctx context.Context, counter *awscount.Counter) (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	if counter != nil {
		opts = append(opts, config.WithAPIOptions(counter.APIOptions()))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("aws config: %w", err)
	}
	// Wrapped after loading: the SDK configures its own client first
	// (AWS_CA_BUNDLE needs the concrete type).
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = awshttp.NewBuildableClient()
	}
	cfg.HTTPClient = plainBodyClient{cfg.HTTPClient}
	return cfg, nil
}

// plainBodyClient sends each request body through a wrapper that hides its
// WriteTo method. smithy-go (v1.22.2 to v1.28.9 at least:
// TestWriteIsSentOnce fails once it stops) closes a request body as soon
// as the response headers arrive, and its body's WriteTo then returns io.EOF;
// net/http, still draining the body, takes that for a write error and
// closes the connection under the unread response, and the SDK retries the
// closed connection — replaying a write the service already applied (a
// conditional PutItem then fails its own condition). A fast endpoint hits
// that window every few hundred requests, AWS rarely. Hiding WriteTo makes
// the drain use Read, which reports a closed body as a plain end of body.
type plainBodyClient struct{ base aws.HTTPClient }

func (c plainBodyClient) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r = r.Clone(r.Context())
		r.Body = plainBody{r.Body}
	}
	return c.base.Do(r)
}

type plainBody struct{ rc io.ReadCloser }

func (b plainBody) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b plainBody) Close() error               { return b.rc.Close() }
