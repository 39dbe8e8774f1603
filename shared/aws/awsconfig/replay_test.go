package awsconfig

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestWriteIsSentOnce replays, without an emulator and without luck, the
// race plainBodyClient exists for. The connection holds the request writer
// between sending the body and net/http's check for bytes past
// Content-Length until the SDK has the response — the window a fast
// endpoint hits now and then. The SDK has closed the request body by then;
// the check on a body with WriteTo gets io.EOF, net/http closes the
// connection under the response the SDK is still reading, and the SDK
// sends the PutItem again.
//
// The bare case pins that hazard in the SDK version go.mod names: when it
// fails, smithy-go no longer hands net/http a closed WriteTo body, and
// plainBodyClient can go.
func TestWriteIsSentOnce(t *testing.T) {
	tests := []struct {
		name    string
		wrap    func(aws.HTTPClient) aws.HTTPClient
		replays bool
	}{
		{"bare SDK client replays the write", func(c aws.HTTPClient) aws.HTTPClient { return c }, true},
		{"awsconfig's client sends it once", func(c aws.HTTPClient) aws.HTTPClient { return plainBodyClient{c} }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sends atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sends.Add(1)
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "application/x-amz-json-1.0")
				// Longer than the client's read buffer: the SDK is still
				// reading it when a write error closes the connection.
				_, _ = io.WriteString(w, "{"+strings.Repeat(" ", 64<<10)+"}")
			}))
			defer srv.Close()

			w := newWindow()
			tr := &http.Transport{DialContext: w.dial}
			defer tr.CloseIdleConnections()
			client := dynamodb.New(dynamodb.Options{
				Region:       "us-east-1",
				Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
				BaseEndpoint: aws.String(srv.URL),
				HTTPClient:   tc.wrap(w.client(&http.Client{Transport: tr})),
			})

			_, err := client.PutItem(context.Background(), &dynamodb.PutItemInput{
				TableName:           aws.String("t"),
				Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
				ConditionExpression: aws.String("attribute_not_exists(pk)"),
			})
			got := sends.Load()
			if tc.replays {
				// At least twice: a retry can hit the same race unstaged,
				// and may even run out of attempts.
				if got < 2 {
					t.Fatalf("the server got the PutItem %d time(s) (err %v): the SDK no longer replays it; plainBodyClient may go", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("PutItem: %v", err)
			}
			if got != 1 {
				t.Fatalf("the server got the PutItem %d times, want 1", got)
			}
		})
	}
}

// window stages the race on the first request: the body is on the wire,
// the writer waits in the connection until the SDK starts reading the
// response, and that read waits until the writer has finished (and, if it
// failed, until net/http has closed the connection).
type window struct {
	open      chan struct{} // the SDK has the first response
	openOnce  sync.Once
	wrote     chan error // the first request's write result
	wroteOnce sync.Once
	closed    chan struct{} // a connection was closed
	closeOnce sync.Once
}

const windowWait = 10 * time.Second // only reached if the staging is wrong

func newWindow() *window {
	return &window{open: make(chan struct{}), wrote: make(chan error, 1), closed: make(chan struct{})}
}

func (w *window) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &heldConn{Conn: c, w: w}, nil
}

// client sends through base, reporting the first request's write result
// and staging the first response's read.
func (w *window) client(base aws.HTTPClient) aws.HTTPClient {
	return doFunc(func(r *http.Request) (*http.Response, error) {
		r = r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{
			WroteRequest: func(i httptrace.WroteRequestInfo) { w.wroteOnce.Do(func() { w.wrote <- i.Err }) },
		}))
		resp, err := base.Do(r)
		if err == nil {
			resp.Body = &heldBody{ReadCloser: resp.Body, w: w}
		}
		return resp, err
	})
}

// heldConn is a TCP connection whose body writes (net/http sends a body
// after flushed headers through ReadFrom) wait, once the body is out,
// until the window opens.
type heldConn struct {
	net.Conn
	w *window
}

func (c *heldConn) ReadFrom(r io.Reader) (int64, error) {
	n, err := io.Copy(c.Conn, r)
	select {
	case <-c.w.open:
	case <-time.After(windowWait):
	}
	return n, err
}

func (c *heldConn) Close() error {
	err := c.Conn.Close()
	c.w.closeOnce.Do(func() { close(c.w.closed) }) // after: the read must find it closed
	return err
}

type heldBody struct {
	io.ReadCloser
	w *window
}

func (b *heldBody) Read(p []byte) (int, error) {
	b.w.openOnce.Do(func() {
		close(b.w.open)
		select {
		case err := <-b.w.wrote:
			if err != nil {
				select {
				case <-b.w.closed:
				case <-time.After(windowWait):
				}
			}
		case <-time.After(windowWait):
		}
	})
	return b.ReadCloser.Read(p)
}
