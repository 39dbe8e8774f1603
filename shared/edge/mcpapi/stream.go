package mcpapi

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/agentauth/agentauth/shared/edge/httpx"
)

// What the MCP server's event streams add to the SDK's writing, the rules
// of shared/edge/httpx's streams (sse.go): the server's write deadline
// (http.Server.WriteTimeout, which would cut a stream) moves a window
// ahead of every write; an idle standalone GET stream gets a keep-alive
// comment, so proxies keep it open and a client that went away is seen;
// and every stream starts with a retry field, the reconnection delay.
const (
	// reconnectAfter is the stream's retry field.
	reconnectAfter = 3 * time.Second
)

var (
	retryField       = []byte("retry: " + strconv.FormatInt(reconnectAfter.Milliseconds(), 10) + "\n\n")
	keepAliveComment = []byte(": keep-alive\n\n")
	errStreamEnded   = errors.New("mcpapi: the stream has ended")
)

// streamWriter is the response writer the SDK writes an MCP answer
// through. Its writes are serialized with the keep-alive's; a failed
// write cancels the request, so the SDK lets go of a stream no client
// reads (the client reconnects, with Last-Event-ID). It must be ended
// (end) before the handler returns: nothing writes after that.
type streamWriter struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	keepAlive time.Duration // 0: none
	cancel    context.CancelFunc

	mu      sync.Mutex
	started bool
	ended   bool
	idle    *time.Timer
}

// newStreamWriter wraps w for r; serve the request the writer returns.
func newStreamWriter(w http.ResponseWriter, r *http.Request, keepAlive time.Duration) (*streamWriter, *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	return &streamWriter{w: w, rc: http.NewResponseController(w), keepAlive: keepAlive, cancel: cancel}, r.WithContext(ctx)
}

func (x *streamWriter) Header() http.Header { return x.w.Header() }

func (x *streamWriter) WriteHeader(code int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.ended {
		x.w.WriteHeader(code)
	}
}

func (x *streamWriter) Write(b []byte) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ended {
		return 0, errStreamEnded
	}
	// A writer without deadlines (a recorder, the Lambda stream) has none
	// to move: its ErrNotSupported is no failure.
	_ = x.rc.SetWriteDeadline(time.Now().Add(httpx.StreamWriteWindow))
	if !x.started {
		x.started = true
		if isEventStream(x.w.Header()) {
			if _, err := x.w.Write(retryField); err != nil {
				x.cancel()
				return 0, err
			}
			if x.keepAlive > 0 {
				x.idle = time.AfterFunc(x.keepAlive, x.ping)
			}
		}
	}
	n, err := x.w.Write(b)
	if err != nil {
		x.cancel()
	}
	if x.idle != nil {
		x.idle.Reset(x.keepAlive)
	}
	return n, err
}

// FlushError implements what http.ResponseController.Flush looks for.
func (x *streamWriter) FlushError() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ended {
		return errStreamEnded
	}
	err := x.rc.Flush()
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		x.cancel()
	}
	return err
}

// Unwrap lets http.ResponseController reach the server's writer.
func (x *streamWriter) Unwrap() http.ResponseWriter { return x.w }

// ping writes the keep-alive comment of a stream nothing was written to
// for keepAlive.
func (x *streamWriter) ping() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ended {
		return
	}
	_ = x.rc.SetWriteDeadline(time.Now().Add(httpx.StreamWriteWindow))
	if _, err := x.w.Write(keepAliveComment); err != nil {
		x.cancel() // the client is gone
		return
	}
	if err := x.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		x.cancel()
		return
	}
	x.idle.Reset(x.keepAlive)
}

// end stops every write; the handler may return after it.
func (x *streamWriter) end() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.ended = true
	if x.idle != nil {
		x.idle.Stop()
	}
	x.cancel()
}

func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

var _ io.Writer = (*streamWriter)(nil)
