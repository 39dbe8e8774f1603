package lambdaentry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// A Lambda function URL in RESPONSE_STREAM mode lets a function answer an
// event stream (the turn event stream, the tools stream) as it is written,
// where API Gateway buffers a whole answer. aws-lambda-go-api-proxy
// (v0.16.2) has no function URL adapter and buffers every answer, so this
// one is ours: the handler runs in a goroutine and writes into a pipe
// whose reader is the streamed body.

// isFunctionURL reports whether an event's requestContext.domainName is a
// function URL's ("<url-id>.lambda-url.<region>.on.aws"): API Gateway v2
// events have the same shape with another domain.
func isFunctionURL(domainName string) bool { return strings.Contains(domainName, ".lambda-url.") }

// functionURL serves a function URL event with the function's handler,
// streamed.
func (f *function) functionURL(ctx context.Context, raw json.RawMessage) (any, error) {
	var req events.LambdaFunctionURLRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, errors.New("the function URL request does not decode")
	}
	return streamURLRequest(ctx, f.http, req)
}

// streamURLRequest runs h on the function URL request and returns its
// answer as soon as the handler has written its header (or returned):
// status and headers filled, Body a pipe the handler goes on writing into,
// flushed as written, closed when it returns. The request's context is
// ctx (the invocation's: the runtime streams the body before the
// invocation ends). Closing the Body (the runtime does, after the stream)
// makes the handler's further writes fail, which ends a stream.
func streamURLRequest(ctx context.Context, h http.Handler, req events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	r, err := urlRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			// A panic here would end the process, not the request
			// (Observe recovers the handlers' own; this is the second
			// line): answer a 500 if nothing was written, else cut the
			// body short.
			if p := recover(); p != nil {
				w.WriteHeader(http.StatusInternalServerError)
				_ = pw.CloseWithError(errors.New("the handler panicked"))
			}
			w.WriteHeader(http.StatusOK) // nothing written: an empty 200, as net/http answers
			_ = pw.Close()
		}()
		h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-done:
	case <-ctx.Done():
		// The handler must not block on a pipe no one will read.
		_ = pr.CloseWithError(ctx.Err())
		return nil, fmt.Errorf("function URL request %s %s: no answer before the invocation ended", r.Method, r.URL.Path)
	}
	return &events.LambdaFunctionURLStreamingResponse{StatusCode: w.status, Headers: w.headers, Cookies: w.cookies, Body: pr}, nil
}

// urlRequest is the http.Request a function URL event describes.
func urlRequest(ctx context.Context, req events.LambdaFunctionURLRequest) (*http.Request, error) {
	method := req.RequestContext.HTTP.Method
	if method == "" || !strings.HasPrefix(req.RawPath, "/") {
		return nil, errors.New("the function URL request has no method or no absolute rawPath")
	}
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		var err error
		if body, err = base64.StdEncoding.DecodeString(req.Body); err != nil {
			return nil, errors.New("the function URL request's body is flagged base64 and is not")
		}
	}
	target := req.RawPath
	if req.RawQueryString != "" {
		target += "?" + req.RawQueryString
	}
	r, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
	if err != nil {
		// The error quotes the URL, which may hold a code or state.
		return nil, errors.New("the function URL request's rawPath or rawQueryString does not parse")
	}
	r.RequestURI = target
	for k, v := range req.Headers {
		r.Header.Set(k, v)
	}
	if len(req.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(req.Cookies, "; "))
	}
	r.Host = r.Header.Get("Host")
	if r.Host == "" {
		r.Host = req.RequestContext.DomainName
	}
	r.RemoteAddr = req.RequestContext.HTTP.SourceIP
	r.ContentLength = int64(len(body))
	if len(body) == 0 {
		r.Body = http.NoBody
	}
	return r, nil
}

// pipeWriter is the http.ResponseWriter of a streamed answer: the header is
// taken when written (ready closes), the body goes straight into the pipe,
// so Flush has nothing to do. It has no deadlines: the invocation's is the
// stream's.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
	// Set once, before ready closes.
	status  int
	headers map[string]string
	cookies []string
}

func (w *pipeWriter) Header() http.Header { return w.header }

// WriteHeader takes the status and a copy of the header (a function URL's
// headers are one value each; Set-Cookie goes to the cookies). An
// informational status is not the answer's and is dropped.
func (w *pipeWriter) WriteHeader(code int) {
	if code < 200 {
		return
	}
	w.once.Do(func() {
		w.status = code
		w.headers = make(map[string]string, len(w.header))
		for k, v := range w.header {
			if k == "Set-Cookie" {
				w.cookies = append(w.cookies, v...)
				continue
			}
			w.headers[k] = strings.Join(v, ", ")
		}
		close(w.ready)
	})
}

// Write sends b down the pipe; it blocks until the runtime has read it.
// Before a header it writes a 200, with a sniffed Content-Type when none
// is set (as net/http does).
func (w *pipeWriter) Write(b []byte) (int, error) {
	select {
	case <-w.ready:
	default:
		if w.header.Get("Content-Type") == "" && len(b) > 0 {
			w.header.Set("Content-Type", http.DetectContentType(b))
		}
		w.WriteHeader(http.StatusOK)
	}
	return w.pw.Write(b)
}

// Flush is a no-op: every Write is in the pipe already. It makes the
// writer an http.Flusher, which a stream requires.
func (w *pipeWriter) Flush() {}
