package main

import (
	"testing"

	"github.com/agentauth/agentauth/shared/testkit/eventtest"
)

// The tool routes have no API Gateway authorizer: the function checks the
// bearer JWT itself, so the fixture's token is a placeholder a handler
// test replaces with one it mints.
func TestEventFixture(t *testing.T) {
	ev := eventtest.HTTPRequest(t, "testdata/tools-event.json", eventtest.Request{
		Method: "GET", RawPath: "/v1/agents/tools",
		Headers: map[string]string{
			"accept": "application/json", "authorization": "Bearer fixture-jwt-minted-by-the-test", "content-length": "0",
			"host":        "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com",
			"traceparent": "00-6b0564495d1e4f2a8c3b7a9e0f1d2c3b-a1b2c3d4e5f60718-01",
			"user-agent":  "agent-runtime/1.4.0", "x-amzn-trace-id": "Root=1-6b056449-5d1e4f2a8c3b7a9e0f1d2c3b",
			"x-forwarded-for": "198.51.100.23", "x-forwarded-port": "443", "x-forwarded-proto": "https",
		},
		RequestID: "Bq3ybgTLDoEEMbA=",
	})
	if ev.RequestContext.Authorizer != nil {
		t.Errorf("authorizer %+v: the tool routes have none", ev.RequestContext.Authorizer)
	}
}
