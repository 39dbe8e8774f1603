// Package lambdaentry builds an agentauth HTTP function from its Lambda
// environment and adapts it to API Gateway HTTP API (payload v2) events, so
// each functions/<fn>/main.go is a single call.
//
// Configuration comes from the environment only; errors name the variable,
// never its value.
package lambdaentry

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentauth/agentauth/shared/bundle"
	"github.com/agentauth/agentauth/shared/embedded"
	"github.com/agentauth/agentauth/shared/httpapi"
	"github.com/agentauth/agentauth/shared/logging"
	"github.com/agentauth/agentauth/shared/oauth"
)

// Environment variables read at cold start.
const (
	EnvBundle    = "AGENTAUTH_BUNDLE"     // bundle directory packaged with the function (default ./bundle)
	EnvHome      = "AGENTAUTH_HOME"       // embedded backends' home (default /tmp/agentauth)
	EnvPublicURL = "AGENTAUTH_PUBLIC_URL" // public base URL of the callback route (required)
	EnvSecrets   = "AGENTAUTH_SECRETS"    // local secrets directory for secretRef (default <home>/secrets)
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

// Build wires the handler from the environment.
func Build(ctx context.Context, routes Routes, log *slog.Logger) (http.Handler, error) {
	home := getenv(EnvHome, "/tmp/agentauth")
	public := os.Getenv(EnvPublicURL)
	if public == "" {
		return nil, fmt.Errorf("%s is required (the public base URL of the callback route)", EnvPublicURL)
	}
	b, err := bundle.LoadDir(getenv(EnvBundle, "bundle"), bundle.Options{Secrets: bundle.DirSecrets{Dir: getenv(EnvSecrets, home+"/secrets")}})
	if err != nil {
		return nil, fmt.Errorf("bundle (%s):\n%w", EnvBundle, err)
	}
	for _, w := range b.Warnings {
		log.Warn("bundle warning", "warning", w)
	}
	be, err := embedded.Open(ctx, home, os.Getenv(embedded.EnvKey), true)
	if err != nil {
		return nil, err
	}
	mgr, err := oauth.New(oauth.Config{Bundle: b, Store: be.Store, Sealer: be.Keyring, Queue: be.Queue,
		StateKeys: be.Keyring.DerivedKeys("state"), BaseURL: public, Logger: log})
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

// Main is a function's whole main: JSON logs to stdout, build from the
// environment (a failed cold start exits with the reason logged, never a
// secret), log the init duration, then serve API Gateway events.
func Main(name string, routes Routes) {
	start := time.Now()
	log := logging.New(os.Stdout, slog.LevelInfo).With("function", name)
	h, err := Build(context.Background(), routes, log)
	if err != nil {
		log.Error("cold start failed", "err", err)
		os.Exit(1)
	}
	log.Info("initialized", "initMs", time.Since(start).Milliseconds())
	lambda.Start(httpadapter.NewV2(h).ProxyWithContext)
}
