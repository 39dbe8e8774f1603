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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentauth/agentauth/shared/aws/awsbackends"
	"github.com/agentauth/agentauth/shared/aws/awscount"
	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/domain"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/edge/toolsapi"
	"github.com/agentauth/agentauth/shared/local/embedded"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/observe/logging"
	"github.com/agentauth/agentauth/shared/tools/ratelimit"
	"github.com/agentauth/agentauth/shared/tools/toolhooks"
)

// Environment variables read at cold start.
const (
	EnvBundle    = "AGENTAUTH_BUNDLE"     // bundle directory packaged with the function (default ./bundle)
	EnvPublicURL = "AGENTAUTH_PUBLIC_URL" // public base URL of the callback route (required)
	EnvMaxWait   = "AGENTAUTH_MAX_WAIT_SECONDS"

	// AWS backends: see shared/aws/awsbackends (set EnvTable to use them).
	EnvTable             = awsbackends.EnvTable
	EnvKMSKey            = awsbackends.EnvKMSKey
	EnvQueueURL          = awsbackends.EnvQueueURL
	EnvSessionKeysSecret = awsbackends.EnvSessionKeysSecret
	EnvSecretPrefix      = awsbackends.EnvSecretPrefix

	// Embedded backends.
	EnvHome    = "AGENTAUTH_HOME"    // home (default /tmp/agentauth)
	EnvSecrets = "AGENTAUTH_SECRETS" // local secrets directory for secretRef (default <home>/secrets)
)

// Routes picks which routes a function serves.
type Routes int

// The HTTP functions.
const (
	RuntimeRoutes Routes = iota
	CallbackRoutes
	// ToolsRoutes: discovery, skills, invocation and tenant uploads,
	// behind a verified JWT (see toolsapi; AGENTAUTH_JWKS_URL required).
	ToolsRoutes
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
	// tenants stores tenant uploads.
	tenants domain.TenantStore
	// limiter is the tool rate limiter that holds across processes.
	limiter func(ratelimit.Limits) (toolhooks.Limiter, error)
}

// Options are the non-environment knobs of Build.
type Options struct {
	// Counter, when set, counts every AWS call (make bench-aws).
	Counter *awscount.Counter
}

// Build wires the handler from the environment.
func Build(ctx context.Context, routes Routes, log *slog.Logger, opts Options) (http.Handler, error) {
	f, err := build(ctx, routes, log, opts)
	if err != nil {
		return nil, err
	}
	return f.http, nil
}

// function is a built function: its HTTP handler and its OAuth manager
// (for scheduled maintenance).
type function struct {
	http http.Handler
	mgr  *oauth.Manager
	log  *slog.Logger
}

func build(ctx context.Context, routes Routes, log *slog.Logger, opts Options) (*function, error) {
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
	switch routes {
	case CallbackRoutes:
		return &function{http: api.CallbackHandler(), mgr: mgr, log: log}, nil
	case ToolsRoutes:
		tools, _, err := toolsapi.FromEnv(ctx, os.Getenv, toolsapi.Deps{Bundle: b, Tokens: mgr, Tenants: be.tenants,
			Limiter: be.limiter, Stdout: os.Stdout, Function: "tools", Log: log})
		if err != nil {
			return nil, err
		}
		if tools == nil {
			return nil, fmt.Errorf("%s is required for the tools function", toolsapi.EnvJWKSURL)
		}
		api.Mount(tools.Register)
		return &function{http: api.MountedHandler(), mgr: mgr, log: log}, nil
	}
	return &function{http: api.RuntimeHandler(), mgr: mgr, log: log}, nil
}

// Invoke handles one Lambda event: an EventBridge scheduled event runs the
// session sweep (expire pending sessions, deliver auth.granted events whose
// first send failed, delete old sessions); anything else is an API Gateway
// HTTP API v2 request.
func (f *function) Invoke(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Source     string `json:"source"`
		DetailType string `json:"detail-type"`
	}
	if json.Unmarshal(raw, &probe) == nil && probe.Source == "aws.events" && probe.DetailType == "Scheduled Event" {
		rep, err := f.mgr.CleanupExpiredSessions(ctx)
		if err != nil {
			f.log.ErrorContext(ctx, "session sweep failed", "err", err)
			return nil, errors.New("session sweep failed; see the function log")
		}
		f.log.InfoContext(ctx, "session sweep", "expired", rep.Expired, "deleted", rep.Deleted, "eventsDelivered", rep.EventsDelivered, "unreadable", rep.Unreadable)
		return rep, nil
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, errors.New("event is neither an API Gateway v2 request nor a scheduled event")
	}
	return httpadapter.NewV2(f.http).ProxyWithContext(ctx, req)
}

func embeddedBackends(ctx context.Context) (*backends, error) {
	home := getenv(EnvHome, "/tmp/agentauth")
	be, err := embedded.Open(ctx, home, os.Getenv(embedded.EnvKey), true)
	if err != nil {
		return nil, err
	}
	return &backends{store: be.Store, tenants: be.Store, sealer: be.Keyring, sessionSealer: be.Keyring, queue: be.Queue,
		stateKeys: be.Keyring.DerivedKeys("state"), secrets: bundle.DirSecrets{Dir: getenv(EnvSecrets, home+"/secrets")},
		limiter: be.ToolLimiter}, nil
}

func awsBackends(ctx context.Context, counter *awscount.Counter) (*backends, error) {
	be, err := awsbackends.Open(ctx, os.Getenv, counter)
	if err != nil {
		return nil, err
	}
	return &backends{store: be.Store, tenants: be.Store, sealer: be.GrantSealer, sessionSealer: be.SessionSealer, queue: be.Queue,
		stateKeys: be.StateKeys(), secrets: be.Secrets,
		limiter: be.ToolLimiter}, nil
}

// Main is a function's whole main: JSON logs to stdout, build from the
// environment (a failed cold start exits with the reason logged, never a
// secret), log the init duration, then serve API Gateway events.
func Main(name string, routes Routes) {
	start := time.Now()
	log := logging.New(os.Stdout, slog.LevelInfo).With("function", name)
	f, err := build(context.Background(), routes, log, Options{})
	if err != nil {
		log.Error("cold start failed", "err", err)
		os.Exit(1)
	}
	log.Info("initialized", "initMs", time.Since(start).Milliseconds())
	lambda.Start(f.Invoke)
}
