// Package awscount counts AWS SDK v2 calls per service and operation, so a
// benchmark (make bench-aws) or a test can say exactly what a request costs
// in AWS calls: {"dynamodb.GetItem": 1, "kms.Decrypt": 0}.
//
// A Counter is SDK middleware: add it to an aws.Config (Register), to
// config.LoadDefaultConfig (config.WithAPIOptions) or to one client's
// options (APIOption). It counts one call per operation invoked, whatever
// the outcome and however many HTTP attempts the retryer makes.
//
// It records service and operation names only: it must never read, keep or
// print a request or response, which may hold secrets (KMS plaintext data
// keys, tokens in DynamoDB items).
package awscount

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
)

// Counter counts AWS calls by "service.Operation". The zero value is ready
// to use; a Counter is safe for concurrent use and must not be copied after
// first use.
type Counter struct {
	mu     sync.Mutex
	counts map[string]int
}

// New returns an empty Counter.
func New() *Counter { return &Counter{} }

// Register adds the counter to every client later built from cfg
// (dynamodb.NewFromConfig(*cfg), kms.NewFromConfig(*cfg), …). Registering
// the same counter twice on one stack counts each call once.
func (c *Counter) Register(cfg *aws.Config) {
	cfg.APIOptions = append(cfg.APIOptions, c.APIOption)
}

// APIOption adds the counting middleware to one operation's stack. Use it
// with config.WithAPIOptions or a client's Options.APIOptions.
func (c *Counter) APIOption(stack *middleware.Stack) error {
	// The id is per counter, so two counters on one stack both count and
	// one counter added twice (config and client options) counts once.
	id := fmt.Sprintf("agentauth/awscount/%p", c)
	if _, ok := stack.Initialize.Get(id); ok {
		return nil
	}
	// After: the operation's RegisterServiceMetadata middleware (added
	// Before) has put the service id and operation name in the context.
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc(id,
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.Add(Key(awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)), 1)
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
}

// Key is the name a call is counted under: the SDK service id in lower
// case without spaces, a dot, and the operation ("DynamoDB", "GetItem" →
// "dynamodb.GetItem"; "Secrets Manager", "GetSecretValue" →
// "secretsmanager.GetSecretValue").
func Key(serviceID, operation string) string {
	if serviceID == "" {
		serviceID = "unknown"
	}
	if operation == "" {
		operation = "unknown"
	}
	return strings.ToLower(strings.ReplaceAll(serviceID, " ", "")) + "." + operation
}

// Add counts n calls under key; for callers that count work done outside
// the SDK (a fake client in a test) on the same Counter.
func (c *Counter) Add(key string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = make(map[string]int)
	}
	c.counts[key] += n
}

// Get returns the count for one key ("kms.Decrypt").
func (c *Counter) Get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[key]
}

// Total returns the number of calls counted under every key.
func (c *Counter) Total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Snapshot returns a copy of the counts; keys with no calls are absent.
func (c *Counter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	maps.Copy(out, c.counts)
	return out
}

// Reset forgets every count.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}

// String renders the counts sorted by key, "dynamodb.GetItem=1 kms.Decrypt=2",
// or "none".
func (c *Counter) String() string {
	snap := c.Snapshot()
	if len(snap) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(snap))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, snap[k])
	}
	return strings.Join(parts, " ")
}

// APIOptions returns the counter's middleware as a list, the shape
// config.WithAPIOptions takes.
func (c *Counter) APIOptions() []func(*middleware.Stack) error {
	return []func(*middleware.Stack) error{c.APIOption}
}
