// Package lambdaentry builds an agentauth HTTP function from its Lambda
// environment and adapts it to API Gateway HTTP API (payload v2) events, so
// each functions/<fn>/main.go is a single call.
//
// With AGENTAUTH_TABLE set it runs on AWS backends — DynamoDB records, KMS
// envelope encryption for grants, a Secrets Manager key for sessions and
// state, SQS FIFO for events; without it, on the embedded backends under
// AGENTAUTH_HOME (tests, single-box use). Configuration comes from the
// environment only; errors name the variable, never its value.
package lambdaentry

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentauth/agentauth/shared/aesseal"
	"github.com/agentauth/agentauth/shared/awsconfig"
	"github.com/agentauth/agentauth/shared/awscount"
	"github.com/agentauth/agentauth/shared/awssecrets"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/dynamostore"
	"github.com/agentauth/agentauth/shared/embedded"
	"github.com/agentauth/agentauth/shared/httpapi"
	"github.com/agentauth/agentauth/shared/kmsseal"
	"github.com/agentauth/agentauth/shared/logging"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/sqsqueue"
)

// Environment variables read at cold start.
const (
	EnvBundle    = "AGENTAUTH_BUNDLE"     // bundle directory packaged with the function (default ./bundle)
	EnvPublicURL = "AGENTAUTH_PUBLIC_URL" // public base URL of the callback route (required)
	EnvMaxWait   = "AGENTAUTH_MAX_WAIT_SECONDS"

	// AWS backends (all required when EnvTable is set).
	EnvTable             = "AGENTAUTH_TABLE"
	EnvKMSKey            = "AGENTAUTH_KMS_KEY_ID"
	EnvQueueURL          = "AGENTAUTH_QUEUE_URL"
	EnvSessionKeysSecret = "AGENTAUTH_SESSION_KEYS_SECRET" // Secrets Manager id: comma-separated random strings, first current
	EnvSecretPrefix      = "AGENTAUTH_SECRET_PREFIX"       // bundle Secret/<name> → secret <prefix><name> (default "agentauth/")

	// Embedded backends.
	EnvHome    = "AGENTAUTH_HOME"    // home (default /tmp/agentauth)
	EnvSecrets = "AGENTAUTH_SECRETS" // local secrets directory for secretRef (default <home>/secrets)
)

// Routes picks which routes a function serves.
type Routes int

// The two HTTP functions.
const (
	RuntimeRoutes Routes = iota
	CallbackRoutes
)

func getenv(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// backends is what the manager needs besides the bundle.
type backends struct {
	store         domain.Store
	sealer        domain.Sealer
	sessionSealer domain.Sealer
	queue         domain.EventQueue
	stateKeys     [][]byte
	secrets       bundle.SecretResolver
}

// Options are the non-environment knobs of Build.
type Options struct {
	// Counter, when set, counts every AWS call (make bench-aws).
	Counter *awscount.Counter
}

// Build wires the handler from the environment.
func Build(ctx context.Context, routes Routes, log *slog.Logger, opts Options) (http.Handler, error) {
	public := os.Getenv(EnvPublicURL)
	if public == "" {
		return nil, fmt.Errorf("%s is required (the public base URL of the callback route)", EnvPublicURL)
	}
	maxWait := oauth.MaxWait
	if v := os.Getenv(EnvMaxWait); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s must be a whole number of seconds", EnvMaxWait)
		}
		maxWait = time.Duration(n) * time.Second
	}
	var be *backends
	var err error
	aws := os.Getenv(EnvTable) != ""
	if aws {
		be, err = awsBackends(ctx, opts.Counter)
	} else {
		be, err = embeddedBackends(ctx)
	}
	if err != nil {
		return nil, err
	}
	b, err := bundle.LoadDir(getenv(EnvBundle, "bundle"), bundle.Options{Secrets: be.secrets})
	if err != nil {
		return nil, fmt.Errorf("bundle (%s):\n%w", EnvBundle, err)
	}
	if aws {
		// A Lambda freezes between invocations: nothing could poll a
		// device code in the background. Refuse rather than hang users.
		for _, app := range b.OAuthApps {
			if app.Flow == bundle.FlowDeviceCode {
				return nil, fmt.Errorf("bundle: OAuthApp/%s: flow deviceCode needs the background poller of the local server; the Lambda deployment does not run it", app.Name)
			}
		}
	}
	for _, w := range b.Warnings {
		log.Warn("bundle warning", "warning", w)
	}
	mgr, err := oauth.New(oauth.Config{Bundle: b, Store: be.store, Sealer: be.sealer, SessionSealer: be.sessionSealer,
		Queue: be.queue, StateKeys: be.stateKeys, BaseURL: public, Logger: log, MaxWait: maxWait})
	if err != nil {
		return nil, err
	}
	// API Gateway authorizes runtime routes with IAM before we run.
	api, err := httpapi.New(mgr, b, httpapi.GatewayAuthorized{}, log)
	if err != nil {
		return nil, err
	}
	if routes == CallbackRoutes {
		return api.CallbackHandler(), nil
	}
	return api.RuntimeHandler(), nil
}

func embeddedBackends(ctx context.Context) (*backends, error) {
	home := getenv(EnvHome, "/tmp/agentauth")
	be, err := embedded.Open(ctx, home, os.Getenv(embedded.EnvKey), true)
	if err != nil {
		return nil, err
	}
	return &backends{store: be.Store, sealer: be.Keyring, sessionSealer: be.Keyring, queue: be.Queue,
		stateKeys: be.Keyring.DerivedKeys("state"), secrets: bundle.DirSecrets{Dir: getenv(EnvSecrets, home+"/secrets")}}, nil
}

func awsBackends(ctx context.Context, counter *awscount.Counter) (*backends, error) {
	var missing []string
	for _, k := range []string{EnvKMSKey, EnvQueueURL, EnvSessionKeysSecret} {
		if os.Getenv(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s set but %s missing", EnvTable, strings.Join(missing, ", "))
	}
	cfg, err := awsconfig.Load(ctx, counter)
	if err != nil {
		return nil, err
	}
	store, err := dynamostore.New(dynamodb.NewFromConfig(cfg), os.Getenv(EnvTable))
	if err != nil {
		return nil, err
	}
	sealer, err := kmsseal.New(kms.NewFromConfig(cfg), os.Getenv(EnvKMSKey), kmsseal.Options{})
	if err != nil {
		return nil, err
	}
	queue, err := sqsqueue.New(sqs.NewFromConfig(cfg), os.Getenv(EnvQueueURL), sqsqueue.Options{})
	if err != nil {
		return nil, err
	}
	secrets := awssecrets.New(secretsmanager.NewFromConfig(cfg), getenv(EnvSecretPrefix, "agentauth/"))
	raw, err := secrets.String(os.Getenv(EnvSessionKeysSecret))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvSessionKeysSecret, err)
	}
	keys, err := SessionKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvSessionKeysSecret, err)
	}
	ring, err := aesseal.New(keys[0], keys[1:]...)
	if err != nil {
		return nil, err
	}
	return &backends{store: store, sealer: sealer, sessionSealer: ring, queue: queue,
		stateKeys: ring.DerivedKeys("state"), secrets: secrets}, nil
}

// SessionKeys turns the session-keys secret — comma-separated random
// strings of at least 32 characters, the first current — into AES keys
// (SHA-256 of each), so Secrets Manager's generated passwords work as is
// and a rotation prepends a new string.
func SessionKeys(s domain.Secret) ([][]byte, error) {
	var keys [][]byte
	for i, part := range strings.Split(s.Reveal(), ",") {
		part = strings.TrimSpace(part)
		if len(part) < 32 {
			return nil, fmt.Errorf("key %d is shorter than 32 characters", i+1)
		}
		sum := sha256.Sum256([]byte(part))
		keys = append(keys, sum[:])
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys")
	}
	return keys, nil
}

// Main is a function's whole main: JSON logs to stdout, build from the
// environment (a failed cold start exits with the reason logged, never a
// secret), log the init duration, then serve API Gateway events.
func Main(name string, routes Routes) {
	start := time.Now()
	log := logging.New(os.Stdout, slog.LevelInfo).With("function", name)
	h, err := Build(context.Background(), routes, log, Options{})
	if err != nil {
		log.Error("cold start failed", "err", err)
		os.Exit(1)
	}
	log.Info("initialized", "initMs", time.Since(start).Milliseconds())
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}
