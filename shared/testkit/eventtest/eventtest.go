// Package eventtest loads the Lambda event fixtures under
// functions/<fn>/testdata (the aws-lambda-go habit): each fixture must
// decode into its aws-lambda-go type with no key left over and survive an
// encode and a second decode unchanged, so a fixture is an event shape the
// function's decoder really reads. Only for tests; it never holds a real
// credential, and fixtures must not either.
package eventtest

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// RoundTrip reads the fixture at path into a T, strictly (a key T has no
// field for fails: it would be a typo or a shape T does not model), encodes
// it, decodes that again, and fails t unless both decodes are equal.
func RoundTrip[T any](t testing.TB, path string) T {
	t.Helper()
	var first, second T
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("fixture %s: %v", path, err)
		return first
	}
	if err := decodeStrict(raw, &first); err != nil {
		t.Fatalf("fixture %s: decode into %T: %v", path, first, err)
		return first
	}
	encoded, err := json.Marshal(first)
	if err != nil {
		t.Fatalf("fixture %s: encode %T: %v", path, first, err)
		return first
	}
	if err := decodeStrict(encoded, &second); err != nil {
		t.Fatalf("fixture %s: decode the encoded %T: %v", path, first, err)
		return first
	}
	if !reflect.DeepEqual(first, second) {
		t.Fatalf("fixture %s: %T changed in a round trip:\nfirst  %+v\nsecond %+v", path, first, first, second)
	}
	return first
}

func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Request is what agentauth's functions read from an API Gateway HTTP API
// (payload 2.0) event: through the proxy adapter, the method, raw path,
// raw query, headers and body (base64 when flagged) make the http.Request,
// and the request context's id is API Gateway's own request id.
type Request struct {
	Method, RawPath, RawQuery string
	Headers                   map[string]string
	Body                      string
	Base64                    bool
	RequestID                 string
}

// RequestOf is the part of ev a function relies on.
func RequestOf(ev events.APIGatewayV2HTTPRequest) Request {
	return Request{
		Method:    ev.RequestContext.HTTP.Method,
		RawPath:   ev.RawPath,
		RawQuery:  ev.RawQueryString,
		Headers:   ev.Headers,
		Body:      ev.Body,
		Base64:    ev.IsBase64Encoded,
		RequestID: ev.RequestContext.RequestID,
	}
}

// HTTPRequest loads an HTTP API event fixture with RoundTrip and fails t
// unless the fields a function relies on are want.
func HTTPRequest(t testing.TB, path string, want Request) events.APIGatewayV2HTTPRequest {
	t.Helper()
	ev := RoundTrip[events.APIGatewayV2HTTPRequest](t, path)
	if got := RequestOf(ev); !reflect.DeepEqual(got, want) {
		t.Errorf("fixture %s:\n got %+v\nwant %+v", path, got, want)
	}
	return ev
}
