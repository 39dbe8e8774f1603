// Package lambdaentry is the Lambda edge: it builds an agentauth function
// (shared/config → shared/app) and adapts it to API Gateway HTTP API
// (payload v2) events and EventBridge scheduled events, so each
// functions/<fn>/main.go is a single call.
//
// With AGENTAUTH_TABLE set the function runs on the AWS backends; without
// it, on the embedded backends under AGENTAUTH_HOME (tests, single-box
// use). With a git bundle (AGENTAUTH_BUNDLE_REPO) a cold start imports
// the packaged bundle into it and the function follows its active
// revision, rebuilt on a new one within AGENTAUTH_UPLOADS_CHECK_SECONDS
// (live.go); it keeps nothing of a changeset on local disk. Configuration comes from the environment only (shared/config);
// errors name the variable, never its value.
package lambdaentry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentauth/agentauth/shared/app"
	"github.com/agentauth/agentauth/shared/aws/awscount"
	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/edge/httpapi"
	"github.com/agentauth/agentauth/shared/observe/logging"
)

// Routes picks which routes a function serves.
type Routes int

// The HTTP functions.
const (
	RuntimeRoutes Routes = iota
	CallbackRoutes
	// ToolsRoutes: discovery, skills, invocation and tenant uploads,
	// behind a verified JWT (AGENTAUTH_JWKS_URL required).
	ToolsRoutes
	// TurnEvents: the turn function, fed SQS FIFO batches of agent events
	// by its event source mapping (the bundle must have a Swarm).
	TurnEvents
)

// Options are the non-environment knobs of Build.
type Options struct {
	// Counter, when set, counts every AWS call (make bench-aws).
	Counter *awscount.Counter
	// Backends, when set, opens the backends instead of app.OpenBackends
	// (tests: the embedded ones with a local git bundle).
	Backends func(ctx context.Context, cfg config.Config) (*app.Backends, error)
}

// Build wires the handler from getenv (os.Getenv in production).
func Build(ctx context.Context, getenv func(string) string, routes Routes, name string, log *slog.Logger, opts Options) (http.Handler, error) {
	f, err := build(ctx, getenv, routes, name, log, opts)
	if err != nil {
		return nil, err
	}
	return f.http, nil
}

// function is a built function: its HTTP handler and its app (for the
// scheduled sweep).
type function struct {
	http http.Handler
	app  *app.App
	log  *slog.Logger
	// turns runs SQS batches (the turn function only).
	turns *sqsBatch
}

func build(ctx context.Context, getenv func(string) string, routes Routes, name string, log *slog.Logger, opts Options) (*function, error) {
	l, err := start(ctx, getenv, routes, name, log, opts)
	if err != nil {
		return nil, err
	}
	return l.current(ctx), nil
}

// start is a cold start: configuration, backends, the packaged bundle
// imported into a git bundle, then the function on the active revision,
// which follows that revision from then on (live).
func start(ctx context.Context, getenv func(string) string, routes Routes, name string, log *slog.Logger, opts Options) (*live, error) {
	cfg, err := config.FromEnv(getenv, config.Lambda)
	if err != nil {
		return nil, err
	}
	open := opts.Backends
	if open == nil {
		open = func(ctx context.Context, cfg config.Config) (*app.Backends, error) {
			return app.OpenBackends(ctx, cfg, opts.Counter)
		}
	}
	be, err := open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := app.ImportPackaged(ctx, cfg, be, true, log); err != nil {
		return nil, err
	}
	w := wiring{cfg: cfg, be: be, routes: routes, name: name, log: log, fault: getenv(app.FaultEnv)}
	f, err := w.assemble(ctx)
	if err != nil {
		return nil, err
	}
	return newLive(f, w.assemble, cfg.Tools.UploadsCheckEvery, log), nil
}

// wiring is what a function is assembled from: read and opened once per
// cold start, reused by every rebuild (the SDK clients, their caches).
type wiring struct {
	cfg    config.Config
	be     *app.Backends
	routes Routes
	name   string
	log    *slog.Logger
	fault  string
}

// assemble builds the function on the bundle's active revision.
func (w wiring) assemble(ctx context.Context) (*function, error) {
	cfg, log := w.cfg, w.log
	// API Gateway authorizes runtime routes with IAM before we run.
	a, err := app.Build(ctx, cfg, w.be, log, app.Options{RuntimeAuth: httpapi.GatewayAuthorized{}, Lambda: true,
		Function: w.name, MetricsOut: os.Stdout})
	if err != nil {
		return nil, err
	}
	f := &function{app: a, log: log}
	switch w.routes {
	case CallbackRoutes:
		f.http = a.CallbackHandler()
	case ToolsRoutes:
		if f.http, err = a.ToolsHandler(); err != nil {
			return nil, err
		}
	case TurnEvents:
		if a.Turns == nil {
			return nil, fmt.Errorf("the turn function has nothing to run: the bundle %s has no Swarm", cfg.BundleDir)
		}
		f.turns = &sqsBatch{handle: a.Turns.Handle, log: log}
		if err := a.Turns.ArmFault(w.fault); err != nil {
			return nil, err
		}
		// Its function URL (IAM-authorized, response streaming) serves the
		// live turn event stream, for as long as its timeout allows.
		if f.http, err = a.TurnStreamHandler(); err != nil {
			return nil, err
		}
	default:
		f.http = a.RuntimeHandler()
	}
	return f, nil
}

// Invoke handles one Lambda event: an SQS batch runs agent events through
// the turn engine (the turn function); an EventBridge scheduled event runs
// the session sweep (expire pending sessions, deliver auth.granted events
// whose first send failed, delete old sessions); a function URL request
// is answered streamed (stream.go); anything else is an API Gateway HTTP
// API v2 request.
func (f *function) Invoke(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Source     string `json:"source"`
		DetailType string `json:"detail-type"`
		Records    []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
		RequestContext struct {
			DomainName string `json:"domainName"`
		} `json:"requestContext"`
	}
	_ = json.Unmarshal(raw, &probe)
	if len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs" {
		if f.turns == nil {
			return nil, errors.New("an SQS batch reached a function that runs no turns")
		}
		var batch events.SQSEvent
		if err := json.Unmarshal(raw, &batch); err != nil {
			return nil, errors.New("the SQS batch does not decode")
		}
		return f.turns.run(ctx, batch), nil
	}
	if probe.Source == "aws.events" && probe.DetailType == "Scheduled Event" {
		rep, err := f.app.Sweep(ctx)
		if err != nil {
			f.log.ErrorContext(ctx, "session sweep failed", "err", err)
			return nil, errors.New("session sweep failed; see the function log")
		}
		f.log.InfoContext(ctx, "session sweep", "sweep", rep)
		return rep, nil
	}
	if isFunctionURL(probe.RequestContext.DomainName) {
		return f.functionURL(ctx, raw)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, errors.New("event is neither an API Gateway v2 request nor a scheduled event")
	}
	return httpadapter.NewV2(f.http).ProxyWithContext(ctx, req)
}

// Main is a function's whole main: JSON logs to stdout, build from the
// environment (a failed cold start exits with the reason logged, never a
// secret), log the init duration, then serve API Gateway events.
func Main(name string, routes Routes) {
	begin := time.Now()
	log := logging.New(os.Stdout, slog.LevelInfo).With("function", name)
	l, err := start(context.Background(), os.Getenv, routes, name, log, Options{})
	if err != nil {
		log.Error("cold start failed", "err", err)
		os.Exit(1)
	}
	log.Info("initialized", "initMs", time.Since(begin).Milliseconds(), "revision", l.current(context.Background()).app.Bundle.Revision)
	lambda.Start(l.Invoke)
}
