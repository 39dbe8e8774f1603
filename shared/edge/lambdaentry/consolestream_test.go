package lambdaentry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/agentauth/agentauth/shared/edge/httpx"
)

// Behind API Gateway's Lambda proxy the response writer cannot flush: a
// stream that means to be buffered (a window of events, then the end)
// answers 200 with its events; one that does not is refused before it
// writes (ErrNoFlush), so its route can say so (406) rather than leave
// the proxy an answer without a status (its 502).
func TestStreamBehindTheLambdaProxy(t *testing.T) {
	for _, buffered := range []bool{true, false} {
		var openErr error
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s, err := httpx.OpenStream(w, r, httpx.StreamLimits{Buffered: buffered, MaxDuration: 50 * time.Millisecond})
			if openErr = err; err != nil {
				httpx.RefuseStream(w, r)
				return
			}
			_ = s.Event("1", "entry", []byte("<li>one</li>"))
			_ = s.Follow(r.Context(), 10*time.Millisecond, func(context.Context, *httpx.Stream) (bool, error) { return false, nil })
		})
		resp, err := httpadapter.NewV2(h).ProxyWithContext(context.Background(), events.APIGatewayV2HTTPRequest{
			RawPath: "/console/x/events", Headers: map[string]string{"accept": "text/event-stream"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: "/console/x/events"}},
		})
		if err != nil {
			t.Fatalf("buffered %v: proxy: %v", buffered, err)
		}
		switch {
		case buffered && (resp.StatusCode != 200 || !strings.HasPrefix(resp.Headers["Content-Type"], "text/event-stream") ||
			!strings.Contains(resp.Body, "id: 1\nevent: entry\ndata: <li>one</li>") || !strings.Contains(resp.Body, httpx.CommentMaxStream)):
			t.Errorf("buffered: %d %v %q", resp.StatusCode, resp.Headers, resp.Body)
		case !buffered && (!errors.Is(openErr, httpx.ErrNoFlush) || resp.StatusCode != http.StatusNotAcceptable):
			t.Errorf("not buffered: %v, %d", openErr, resp.StatusCode)
		}
	}
}
