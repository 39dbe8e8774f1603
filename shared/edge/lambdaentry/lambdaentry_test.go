package lambdaentry

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentauth/agentauth/shared/config"
	"github.com/agentauth/agentauth/shared/oauth"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
)

func event(t *testing.T) events.APIGatewayV2HTTPRequest {
	t.Helper()
	raw, err := os.ReadFile("testdata/token-event.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	// Round trip: the fixture is a real v2 event shape.
	again, _ := json.Marshal(ev)
	var back events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(again, &back); err != nil || back.RequestContext.HTTP.Method != "POST" || back.RawPath != ev.RawPath {
		t.Fatalf("fixture round trip: %v", err)
	}
	return ev
}

// functionEnv is a function's environment on the test bundle and a fresh
// embedded home.
func functionEnv(t *testing.T) {
	t.Helper()
	t.Setenv(config.Bundle, "testdata/bundle")
	t.Setenv(config.Home, t.TempDir())
	t.Setenv(config.PublicURL, "https://auth.example")
	t.Setenv("TEAM_CLIENT_SECRET", "s3cret")
	t.Setenv(config.MasterKey, "")
}

func TestRuntimeFunctionAnswersAPIGatewayEvents(t *testing.T) {
	functionEnv(t)
	h, err := Build(context.Background(), os.Getenv, RuntimeRoutes, "gettoken", slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpadapter.NewV2(h).ProxyWithContext(context.Background(), event(t))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	_ = json.Unmarshal([]byte(resp.Body), &out)
	if resp.StatusCode != 200 || out["status"] != "authorization_required" || !strings.Contains(out["authorizationUrl"].(string), "redirect_uri=https%3A%2F%2Fauth.example%2Foauth%2Fcallback%2Fteam") {
		t.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
	if resp.Headers["X-Request-Id"] != "lambda-req-1" {
		t.Fatalf("headers %v", resp.Headers)
	}
	// The runtime function does not serve callbacks.
	ev := event(t)
	ev.RawPath, ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = "/oauth/callback/team", "GET", "/oauth/callback/team"
	if resp, _ := httpadapter.NewV2(h).ProxyWithContext(context.Background(), ev); resp.StatusCode != 404 {
		t.Fatalf("callback on the runtime function: %d", resp.StatusCode)
	}
}

func TestBuildNamesMissingConfiguration(t *testing.T) {
	t.Setenv(config.PublicURL, "")
	if _, err := Build(context.Background(), os.Getenv, CallbackRoutes, "callback", slog.New(slog.DiscardHandler), Options{}); err == nil || !strings.Contains(err.Error(), config.PublicURL) {
		t.Fatalf("err = %v", err)
	}
	t.Setenv(config.PublicURL, "https://auth.example")
	t.Setenv(config.Bundle, "testdata/bundle")
	t.Setenv(config.Home, t.TempDir())
	t.Setenv("TEAM_CLIENT_SECRET", "")
	_, err := Build(context.Background(), os.Getenv, CallbackRoutes, "callback", slog.New(slog.DiscardHandler), Options{})
	if err == nil || !strings.Contains(err.Error(), "TEAM_CLIENT_SECRET") {
		t.Fatalf("err = %v", err)
	}
}

func TestInvokeRoutesScheduledEventsToTheSweep(t *testing.T) {
	functionEnv(t)
	f, err := build(context.Background(), os.Getenv, RuntimeRoutes, "gettoken", slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// An API Gateway event is answered over HTTP; a scheduled event runs
	// the sweep and returns its report (routing, not the sweep itself, is
	// under test: the sweep has its own tests in shared/oauth).
	ev, _ := json.Marshal(event(t))
	out, err := f.Invoke(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if resp, ok := out.(events.APIGatewayV2HTTPResponse); !ok || resp.StatusCode != 200 {
		t.Fatalf("HTTP event: %#v", out)
	}
	sched := []byte(`{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","account":"000000000000","time":"2026-11-21T10:00:00Z","region":"us-east-1","resources":[],"detail":{}}`)
	out, err = f.Invoke(context.Background(), sched)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.(oauth.CleanupReport); !ok {
		t.Fatalf("scheduled event: %#v", out)
	}
	if _, err := f.Invoke(context.Background(), []byte(`[1,2]`)); err == nil {
		t.Fatal("garbage event accepted")
	}
}

// TestFunctionFixturesThroughTheirHandlers feeds each function's real
// event fixture (functions/<fn>/testdata) to the function it belongs to:
// the routes answer it, not a 404, and the scheduled event runs the sweep.
func TestFunctionFixturesThroughTheirHandlers(t *testing.T) {
	functionEnv(t)
	iss := jwttest.Start(t)
	for k, v := range iss.Env() {
		t.Setenv(k, v)
	}
	for _, tc := range []struct {
		fn      string
		routes  Routes
		fixture string
		status  int
		body    string
	}{
		{"gettoken", RuntimeRoutes, "token-event.json", 200, `"status":"authorization_required"`},
		{"callback", CallbackRoutes, "callback-event.json", 400, `data-reason="invalid_state"`},
		{"tools", ToolsRoutes, "tools-event.json", 401, `"code":"unauthenticated"`},
	} {
		t.Run(tc.fn, func(t *testing.T) {
			f, err := build(context.Background(), os.Getenv, tc.routes, tc.fn, slog.New(slog.DiscardHandler), Options{})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join("..", "..", "..", "functions", tc.fn, "testdata", tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			out, err := f.Invoke(context.Background(), raw)
			if err != nil {
				t.Fatal(err)
			}
			resp, ok := out.(events.APIGatewayV2HTTPResponse)
			if !ok || resp.StatusCode != tc.status || !strings.Contains(resp.Body, tc.body) {
				t.Fatalf("%#v", out)
			}
		})
	}
	f, err := build(context.Background(), os.Getenv, RuntimeRoutes, "gettoken", slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "functions", "gettoken", "testdata", "sweep-event.json"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := f.Invoke(context.Background(), raw); err != nil {
		t.Fatal(err)
	} else if _, ok := out.(oauth.CleanupReport); !ok {
		t.Fatalf("the scheduled event did not run the sweep: %#v", out)
	}
}
