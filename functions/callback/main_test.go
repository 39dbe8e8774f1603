package main

import (
	"testing"

	"github.com/agentauth/agentauth/shared/testkit/eventtest"
)

// The callback fixture is a browser's redirect back from the provider: a
// public GET route (no API Gateway authorizer) whose query carries the
// code and state the callback reads.
func TestEventFixture(t *testing.T) {
	ev := eventtest.HTTPRequest(t, "testdata/callback-event.json", eventtest.Request{
		Method: "GET", RawPath: "/oauth/callback/team",
		RawQuery: "code=fixture-code-4b7f&state=fixture-state-signed-by-the-test",
		Headers: map[string]string{
			"accept":          "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
			"accept-encoding": "gzip, deflate, br", "accept-language": "en-US,en;q=0.9", "content-length": "0",
			"host": "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com", "referer": "https://idp.example.com/",
			"user-agent":      "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0",
			"x-amzn-trace-id": "Root=1-6b0563c2-5f0c3a1e9d2b4c6a8e7f1d3b",
			"x-forwarded-for": "203.0.113.7", "x-forwarded-port": "443", "x-forwarded-proto": "https",
		},
		RequestID: "Bq3xYhSPDoEEMZw=",
	})
	if ev.RequestContext.Authorizer != nil || ev.PathParameters["app"] != "team" {
		t.Errorf("authorizer %+v, path parameters %v: want a public route for app team", ev.RequestContext.Authorizer, ev.PathParameters)
	}
}
