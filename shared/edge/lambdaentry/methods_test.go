package lambdaentry

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"testing"

	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
)

// Issue 18: the Lambda functions serve the same handlers, so a wrong
// method on a known route is 405 with Allow through API Gateway too.
func TestWrongMethodThroughAPIGateway(t *testing.T) {
	functionEnv(t)
	h, err := Build(context.Background(), os.Getenv, RuntimeRoutes, "gettoken", slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := event(t)
	ev.RequestContext.HTTP.Method, ev.Body = "GET", ""
	resp, err := httpadapter.NewV2(h).ProxyWithContext(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Error struct{ Code, Message, RequestID string } `json:"error"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &out); err != nil || resp.StatusCode != 405 || resp.Headers["Allow"] != "POST" || out.Error.Code != "methodNotAllowed" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Headers, resp.Body)
	}
}
