package lambdaentry

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/agentauth/agentauth/shared/edge/httpx"
	"github.com/agentauth/agentauth/shared/testkit/eventtest"
	"github.com/agentauth/agentauth/shared/testkit/jwttest"
)

const urlFixture = "testdata/function-url-event.json"

// TestFunctionURLFixture: the fixture is a function URL event as
// aws-lambda-go decodes it (strictly, and unchanged by a round trip), and
// it becomes the request it describes.
func TestFunctionURLFixture(t *testing.T) {
	ev := eventtest.RoundTrip[events.LambdaFunctionURLRequest](t, urlFixture)
	raw, _ := os.ReadFile(urlFixture)
	again, _ := json.Marshal(ev)
	var in, out any
	_ = json.Unmarshal(raw, &in)
	_ = json.Unmarshal(again, &out)
	if a, b := mustJSON(in), mustJSON(out); a != b {
		t.Fatalf("the fixture re-encodes differently:\n%s\n%s", a, b)
	}
	if !isFunctionURL(ev.RequestContext.DomainName) {
		t.Fatalf("domain %q is not a function URL's", ev.RequestContext.DomainName)
	}
	r, err := urlRequest(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != "GET" || r.URL.Path != "/v1/agents/stream" || r.URL.RawQuery != "include_disabled=false" || r.RequestURI != "/v1/agents/stream?include_disabled=false" ||
		r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("Cookie") != "lang=en" || r.Host != ev.Headers["host"] ||
		r.RemoteAddr != "203.0.113.7" || r.Body != http.NoBody || r.ContentLength != 0 || r.Context() != t.Context() {
		t.Fatalf("request %s %s (%s) host %s from %s, headers %v", r.Method, r.URL, r.RequestURI, r.Host, r.RemoteAddr, r.Header)
	}
	if c, err := r.Cookie("lang"); err != nil || c.Value != "en" {
		t.Fatalf("cookie lang: %v %v", c, err)
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestURLRequest(t *testing.T) {
	base := func(mod func(*events.LambdaFunctionURLRequest)) events.LambdaFunctionURLRequest {
		ev := events.LambdaFunctionURLRequest{RawPath: "/v1/x", Headers: map[string]string{"content-type": "application/json"},
			RequestContext: events.LambdaFunctionURLRequestContext{DomainName: "u.lambda-url.us-east-1.on.aws", HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}}
		mod(&ev)
		return ev
	}
	for _, tc := range []struct {
		name           string
		ev             events.LambdaFunctionURLRequest
		path, rawPath  string
		body, problem  string
		host, rawQuery string
	}{
		{name: "plain body", ev: base(func(ev *events.LambdaFunctionURLRequest) { ev.Body = `{"a":1}` }), path: "/v1/x", body: `{"a":1}`, host: "u.lambda-url.us-east-1.on.aws"},
		{name: "base64 body", ev: base(func(ev *events.LambdaFunctionURLRequest) {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte("\x00\xffbin")), true
		}), path: "/v1/x", body: "\x00\xffbin", host: "u.lambda-url.us-east-1.on.aws"},
		{name: "escaped segment and query", ev: base(func(ev *events.LambdaFunctionURLRequest) {
			ev.RawPath, ev.RawQueryString, ev.Headers["host"] = "/v1/instances/s/chat%20C1%3A7/a", "after=3&x=%26", "auth.example"
		}), path: "/v1/instances/s/chat C1:7/a", rawPath: "/v1/instances/s/chat%20C1%3A7/a", rawQuery: "after=3&x=%26", host: "auth.example"},
		{name: "bad base64", ev: base(func(ev *events.LambdaFunctionURLRequest) { ev.Body, ev.IsBase64Encoded = "%%%", true }), problem: "base64"},
		{name: "no method", ev: base(func(ev *events.LambdaFunctionURLRequest) { ev.RequestContext.HTTP.Method = "" }), problem: "no method"},
		{name: "relative path", ev: base(func(ev *events.LambdaFunctionURLRequest) { ev.RawPath = "v1/x" }), problem: "rawPath"},
		{name: "query that does not parse", ev: base(func(ev *events.LambdaFunctionURLRequest) { ev.RawPath = "/%zz"; ev.RawQueryString = "code=secret-code" }), problem: "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := urlRequest(t.Context(), tc.ev)
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) || strings.Contains(err.Error(), "secret-code") {
					t.Fatalf("err = %v, want one mentioning %q and not the query", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(r.Body)
			if r.URL.Path != tc.path || r.URL.RawPath != tc.rawPath || r.URL.RawQuery != tc.rawQuery || string(body) != tc.body || r.ContentLength != int64(len(tc.body)) || r.Host != tc.host {
				t.Fatalf("%s %q (raw %q) ?%s body %q (%d) host %s", r.Method, r.URL.Path, r.URL.RawPath, r.URL.RawQuery, body, r.ContentLength, r.Host)
			}
		})
	}
}

// readWithin reads once from r, failing t after d: a read that blocks is a
// body that is not streamed.
func readWithin(t *testing.T, r io.Reader, d time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		b := make([]byte, 4096)
		n, _ := r.Read(b)
		got <- string(b[:n])
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(d):
		t.Fatalf("nothing to read after %v", d)
		return ""
	}
}

// TestStreamURLRequestStreams: a handler that writes, flushes, waits and
// writes again — its first bytes are readable from the Body while it
// waits, and the Body ends when it returns.
func TestStreamURLRequestStreams(t *testing.T) {
	release, returned := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Add("Vary", "Accept")
		w.Header().Add("Vary", "Origin")
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "second\n")
	})
	ev := eventtest.RoundTrip[events.LambdaFunctionURLRequest](t, urlFixture)
	resp, err := streamURLRequest(t.Context(), h, ev)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	if resp.StatusCode != 202 || resp.Headers["Content-Type"] != "text/event-stream" || resp.Headers["Vary"] != "Accept, Origin" ||
		strings.Join(resp.Cookies, "|") != "a=1|b=2" || resp.Headers["Set-Cookie"] != "" {
		t.Fatalf("%d %v cookies %v", resp.StatusCode, resp.Headers, resp.Cookies)
	}
	// The runtime reads the response itself: the prelude (status,
	// headers), eight zero bytes, then the body as it comes.
	br := bufio.NewReader(resp)
	prelude, err := br.ReadBytes(0)
	if err != nil || !bytes.Contains(prelude, []byte(`"statusCode":202`)) {
		t.Fatalf("prelude %q: %v", prelude, err)
	}
	if zeros, _ := br.Peek(7); !bytes.Equal(zeros, make([]byte, 7)) {
		t.Fatalf("after the prelude %q", zeros)
	}
	br.Discard(7)
	if got := readWithin(t, br, 5*time.Second); got != "first\n" {
		t.Fatalf("first read %q", got)
	}
	select {
	case <-returned:
		t.Fatal("the handler returned before it was released: the test proves nothing")
	default:
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "second\n" {
		t.Fatalf("rest %q: %v", rest, err)
	}
}

func TestStreamURLRequestAnswers(t *testing.T) {
	for _, tc := range []struct {
		name        string
		h           http.HandlerFunc
		status      int
		contentType string
		body        string
		bodyErr     bool
	}{
		{"nothing written", func(http.ResponseWriter, *http.Request) {}, 200, "", "", false},
		{"body without a header", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "<html>hi</html>") }, 200, "text/html; charset=utf-8", "<html>hi</html>", false},
		{"an informational status first", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusNoContent)
		}, 204, "", "", false},
		{"a JSON error answer", func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteError(w, r, http.StatusNotFound, httpx.CodeNotFound, "no route")
		}, 404, "application/json", `{"error":{"code":"notFound","message":"no route"}}` + "\n", false},
		{"a panic before the header", func(http.ResponseWriter, *http.Request) { panic("boom") }, 500, "", "", true},
		{"a panic mid-body", func(w http.ResponseWriter, _ *http.Request) {
			io.WriteString(w, "partial")
			panic("boom")
		}, 200, "text/plain; charset=utf-8", "partial", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := streamURLRequest(t.Context(), tc.h, eventtest.RoundTrip[events.LambdaFunctionURLRequest](t, urlFixture))
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status || resp.Headers["Content-Type"] != tc.contentType || string(body) != tc.body || (err != nil) != tc.bodyErr {
				t.Fatalf("%d %v %q (err %v)", resp.StatusCode, resp.Headers, body, err)
			}
		})
	}
}

// TestStreamURLRequestInvocationEnds: an invocation that ends before the
// handler answers is an error, and the handler is not left blocked.
func TestStreamURLRequestInvocationEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	returned := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(returned)
		<-r.Context().Done()
		io.WriteString(w, "too late") // into a pipe no one reads: must not block
	})
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := streamURLRequest(ctx, h, eventtest.RoundTrip[events.LambdaFunctionURLRequest](t, urlFixture)); err == nil || !strings.Contains(err.Error(), "/v1/agents/stream") {
		t.Fatalf("err = %v", err)
	}
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler is still blocked")
	}
}

// TestInvokeStreamsFunctionURLEvents: the tools function answers the
// fixture (with a caller's JWT added) through Invoke as a stream — the
// manifest at once — and ends it before the invocation's deadline with the
// reconnect comment.
func TestInvokeStreamsFunctionURLEvents(t *testing.T) {
	functionEnv(t)
	iss := jwttest.Start(t)
	for k, v := range iss.Env() {
		t.Setenv(k, v)
	}
	f, err := build(context.Background(), os.Getenv, ToolsRoutes, "tools", slog.New(slog.DiscardHandler), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := eventtest.RoundTrip[events.LambdaFunctionURLRequest](t, urlFixture)
	ev.Headers["authorization"] = "Bearer " + iss.Mint(t, map[string]any{"sub": "alice", "scope": "tools:echo"})
	raw, _ := json.Marshal(ev)

	// The stream keeps 2 s before the deadline for its last words.
	ctx, cancel := context.WithTimeout(t.Context(), 2500*time.Millisecond)
	defer cancel()
	start := time.Now()
	out, err := f.Invoke(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(*events.LambdaFunctionURLStreamingResponse)
	if !ok {
		t.Fatalf("Invoke answered %T, want a streaming response", out)
	}
	defer resp.Close()
	if resp.StatusCode != 200 || resp.Headers["Content-Type"] != "text/event-stream" || resp.Headers["X-Accel-Buffering"] != "no" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Headers)
	}
	first := readWithin(t, resp.Body, 2*time.Second)
	if !strings.Contains(first, "event: tools\n") || !strings.Contains(first, `data: {"data":[]}`) {
		t.Fatalf("first bytes %q", first)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil || !strings.HasSuffix(string(rest), ": "+httpx.CommentMaxStream+"\n\n") || time.Since(start) > 2500*time.Millisecond {
		t.Fatalf("after %v: %q (%v)", time.Since(start), rest, err)
	}

	// aws-lambda-go's handler takes Invoke's answer as a stream (it cannot
	// be JSON): the prelude, eight zero bytes, the body.
	ev.RawPath, ev.RequestContext.HTTP.Path = "/v1/agents/tools", "/v1/agents/tools"
	raw, _ = json.Marshal(ev)
	got, err := lambda.NewHandler(f.Invoke).Invoke(t.Context(), raw)
	if err != nil {
		t.Fatal(err)
	}
	prelude, body, ok := bytes.Cut(got, make([]byte, 8))
	if !ok || !bytes.Contains(prelude, []byte(`"statusCode":200`)) || string(body) != "{\"data\":[]}\n" {
		t.Fatalf("through the runtime's handler: %q", got)
	}

	// An API Gateway event (its domain is not a function URL's) still
	// answers buffered.
	if isFunctionURL("api1.execute-api.us-east-1.amazonaws.com") {
		t.Fatal("an API Gateway domain taken for a function URL")
	}
	if out, err := f.Invoke(t.Context(), toolsEvent("GET", "/v1/agents/tools", "not-a-jwt", "")); err != nil {
		t.Fatal(err)
	} else if _, ok := out.(events.APIGatewayV2HTTPResponse); !ok {
		t.Fatalf("API Gateway event answered %T", out)
	}
}

// FuzzURLRequest: whatever a function URL event's path, query and body,
// it becomes a request or an error that quotes none of them.
func FuzzURLRequest(f *testing.F) {
	f.Add("/v1/x", "a=1", "body", false)
	f.Add("/%zz", "code=c", "", false)
	f.Add("/v1/x", "", "aGk=", true)
	f.Add("v1", "", "%%%", true)
	const canary = "zq-canary-zq"
	f.Fuzz(func(t *testing.T, path, query, body string, b64 bool) {
		ev := events.LambdaFunctionURLRequest{RawPath: path + canary, RawQueryString: query + canary, Body: body + canary, IsBase64Encoded: b64,
			RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}}
		r, err := urlRequest(t.Context(), ev)
		if err != nil {
			if strings.Contains(err.Error(), canary) {
				t.Fatalf("the error quotes the event: %v", err)
			}
			return
		}
		got, _ := io.ReadAll(r.Body)
		if !b64 && string(got) != body+canary || r.ContentLength != int64(len(got)) || !strings.HasPrefix(r.RequestURI, "/") {
			t.Fatalf("body %q (%d), request URI %q", got, r.ContentLength, r.RequestURI)
		}
	})
}
