package main

import (
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/agentauth/agentauth/shared/testkit/eventtest"
)

// gettoken receives two kinds of event: the runtime routes, SigV4-signed
// and authorized by API Gateway (IAM), and the session sweep's schedule.
func TestEventFixtures(t *testing.T) {
	t.Run("token request", func(t *testing.T) {
		ev := eventtest.HTTPRequest(t, "testdata/token-event.json", eventtest.Request{
			Method: "POST", RawPath: "/v1/oauth/token",
			Headers: map[string]string{
				"authorization":  "AWS4-HMAC-SHA256 Credential=FIXTUREACCESSKEY/20261124/eu-west-1/execute-api/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-request-id, Signature=fixture-signature",
				"content-length": "86", "content-type": "application/json",
				"host":       "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com",
				"user-agent": "agent-runtime/1.4.0", "x-amz-date": "20261124T101602Z",
				"x-amzn-trace-id": "Root=1-6b0563e2-0a9b8c7d6e5f4a3b2c1d0e9f",
				"x-forwarded-for": "198.51.100.23", "x-forwarded-port": "443", "x-forwarded-proto": "https",
				"x-request-id": "agent-req-7f3a",
			},
			Body:      `{"oauthAppRef":"OAuthApp/team","turn":{"auth":{"subjects":{"global":"demo:team:T1"}}}}`,
			RequestID: "Bq3yDjQmDoEEMTQ=",
		})
		if a := ev.RequestContext.Authorizer; a == nil || a.IAM == nil || a.IAM.UserARN == "" {
			t.Errorf("authorizer %+v: want API Gateway's IAM caller", a)
		}
	})
	t.Run("session sweep schedule", func(t *testing.T) {
		ev := eventtest.RoundTrip[events.EventBridgeEvent](t, "testdata/sweep-event.json")
		// What the function tells a schedule from an HTTP request by.
		if ev.Source != "aws.events" || ev.DetailType != "Scheduled Event" {
			t.Errorf("source %q, detail-type %q: want a scheduled event", ev.Source, ev.DetailType)
		}
	})
}
