package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Event streams (Server-Sent Events): the one definition of how a route
// streams — the headers, the wire form of an event and a comment, the
// keep-alive, the maximum duration and the server's deadlines — used by
// the turn event stream and the tools stream alike.

// Stream defaults.
const (
	DefaultKeepAlive = 15 * time.Second
	DefaultMaxStream = 10 * time.Minute
)

// StreamWriteWindow bounds one write of a stream (every stream, the MCP
// server's too): a client that stops
// reading is dropped after it, as http.Server's WriteTimeout would drop
// it, while a stream that keeps writing lives on.
const StreamWriteWindow = 30 * time.Second

// deadlineMargin is the time a stream keeps for its last words before the
// request context's deadline (a Lambda invocation's end): the reconnect
// comment must get out before the function is stopped.
const deadlineMargin = 2 * time.Second

// Comments a stream ends with. A client reconnects with Last-Event-ID
// (EventSource does it by itself) and loses and repeats nothing.
const (
	CommentKeepAlive = "keep-alive"
	CommentMaxStream = "stream limit reached; reconnect with Last-Event-ID to go on"
	commentFailed    = "the stream failed; reconnect with Last-Event-ID to go on (request %s)"
)

// StreamLimits bound an event stream; a zero field takes its default.
type StreamLimits struct {
	// KeepAlive: a comment is sent when nothing else was for this long,
	// so proxies and clients keep an idle stream open.
	KeepAlive time.Duration
	// MaxDuration ends a stream (with CommentMaxStream); it ends earlier
	// when the request context's deadline comes first.
	MaxDuration time.Duration
	// Gate caps the streams open at once (app shares one among the
	// process's stream routes); a route given none makes its own with
	// the default caps.
	Gate *StreamGate
	// Buffered: the answer is sent whole when the handler returns (API
	// Gateway's Lambda proxy, whose response writer cannot flush), and
	// the route means it — a short MaxDuration, each answer a window of
	// events the client asks again after (EventSource, Last-Event-ID).
	// OpenStream then takes a writer that cannot flush instead of
	// refusing it with ErrNoFlush.
	Buffered bool
}

func (l StreamLimits) withDefaults() StreamLimits {
	if l.KeepAlive <= 0 {
		l.KeepAlive = DefaultKeepAlive
	}
	if l.MaxDuration <= 0 {
		l.MaxDuration = DefaultMaxStream
	}
	return l
}

// WantsEventStream reports whether the request's Accept header asks for
// text/event-stream (with a q other than 0), as EventSource sends it.
func WantsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || mt != "text/event-stream" {
				continue
			}
			if q, err := strconv.ParseFloat(params["q"], 64); params["q"] == "" || err == nil && q > 0 {
				return true
			}
		}
	}
	return false
}

// EncodeJSON is a JSON answer's encoding (WriteJSON's: no HTML escaping)
// without the trailing newline, so that an event's data is byte for byte
// the body the route's JSON form answers.
func EncodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Stream is one event stream answer. It is not safe for concurrent use:
// one handler goroutine writes it.
type Stream struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	r         *http.Request
	keepAlive time.Duration
	end       time.Time
	buffered  bool // flushing is not supported, and not needed
	// idle fires when nothing was written for keepAlive.
	idle *time.Timer
}

// RefuseStream answers 406 to a request for an event stream where the
// answer cannot stream: behind API Gateway, which buffers every answer,
// the streams are served on the functions' URLs (docs/deploy.md).
func RefuseStream(w http.ResponseWriter, r *http.Request) {
	WriteError(w, r, http.StatusNotAcceptable, CodeNotAcceptable,
		"this endpoint cannot stream (its answers are buffered): ask without Accept: text/event-stream for JSON, or use the streaming URL (on AWS the TurnStreamUrl or ToolsStreamUrl stack output)")
}

// ErrNoFlush: the response writer cannot flush, so it cannot stream.
var ErrNoFlush = errors.New("httpx: the response writer cannot flush; an event stream needs http.Flusher")

// OpenStream answers 200 with an event stream's headers (text/event-stream,
// no caching, no proxy buffering) and flushes them. The server's write
// deadline (http.Server.WriteTimeout, which would cut the stream) moves a
// window ahead of every write; its read timeout does not reach a handler
// that streams (net/http clears the read deadline once the request is
// read). It refuses, before writing anything, a writer that cannot flush;
// an error after that is the client's going away.
func OpenStream(w http.ResponseWriter, r *http.Request, lim StreamLimits) (*Stream, error) {
	buffered := !canFlush(w)
	if buffered && !lim.Buffered {
		return nil, ErrNoFlush
	}
	lim = lim.withDefaults()
	end := time.Now().Add(lim.MaxDuration)
	if d, ok := r.Context().Deadline(); ok && d.Add(-deadlineMargin).Before(end) {
		end = d.Add(-deadlineMargin)
	}
	s := &Stream{w: w, rc: http.NewResponseController(w), r: r, keepAlive: lim.KeepAlive, end: end, idle: time.NewTimer(lim.KeepAlive), buffered: buffered}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	_ = s.rc.SetWriteDeadline(time.Now().Add(StreamWriteWindow))
	w.WriteHeader(http.StatusOK)
	if err := s.flush(); err != nil {
		return nil, err
	}
	return s, nil
}

// canFlush reports whether w, or a writer it wraps (Unwrap), flushes: what
// http.ResponseController.Flush will find.
func canFlush(w http.ResponseWriter) bool {
	for range 16 { // wrappers nest a few deep; a cycle must not hang
		switch x := w.(type) {
		case http.Flusher, interface{ FlushError() error }:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return false
		}
	}
	return false
}

// Event writes one event — "id: …", "event: …", one "data: …" line per
// line of data — and flushes it. id and event must be one line each.
func (s *Stream) Event(id, event string, data []byte) error {
	if strings.ContainsAny(id, "\r\n\x00") || strings.ContainsAny(event, "\r\n") {
		return fmt.Errorf("httpx: an event's id and type must be one line each (event type %q)", event)
	}
	var b bytes.Buffer
	if id != "" {
		b.WriteString("id: " + id + "\n")
	}
	if event != "" {
		b.WriteString("event: " + event + "\n")
	}
	// SSE ends a line at CR, LF or CRLF: each becomes a data line of its
	// own, so no line break in data can start a field.
	text := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(string(data))
	for line := range strings.Lines(text) {
		b.WriteString("data: " + strings.TrimSuffix(line, "\n") + "\n")
	}
	if len(data) == 0 {
		b.WriteString("data:\n")
	}
	b.WriteString("\n")
	return s.write(b.Bytes())
}

// Comment writes a comment line (": text"), which clients ignore, and
// flushes it.
func (s *Stream) Comment(text string) error {
	return s.write([]byte(": " + strings.NewReplacer("\r", " ", "\n", " ").Replace(text) + "\n\n"))
}

// flush sends what was written; a buffered stream's writer sends it all
// when the handler returns.
func (s *Stream) flush() error {
	if s.buffered {
		return nil
	}
	return s.rc.Flush()
}

func (s *Stream) write(b []byte) error {
	// A writer without deadlines (a recorder, the Lambda stream) has none
	// to move: its ErrNotSupported is no failure.
	_ = s.rc.SetWriteDeadline(time.Now().Add(StreamWriteWindow))
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	if err := s.flush(); err != nil {
		return err
	}
	s.idle.Reset(s.keepAlive)
	return nil
}

// Poll is one look at what a stream follows: it writes what is new to s
// and reports whether the stream is complete. An error ends the stream
// (the poll logs it: Follow does not).
type Poll func(ctx context.Context, s *Stream) (done bool, err error)

// Follow runs poll now and then every interval, with keep-alive comments
// between, until poll is done (nil), the client goes away (the context's
// error, or the write's), or the stream reaches its end (CommentMaxStream,
// then nil). When poll fails the stream ends with a comment naming the
// request id, and Follow returns poll's error.
func (s *Stream) Follow(ctx context.Context, every time.Duration, poll Poll) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	end := time.NewTimer(time.Until(s.end))
	defer end.Stop()
	defer s.idle.Stop()
	for {
		// The end is checked before each poll, not only by the timer, so
		// a stream whose end has passed sends nothing more but the
		// reconnect comment.
		if !time.Now().Before(s.end) {
			return s.Comment(CommentMaxStream)
		}
		done, err := poll(ctx, s)
		if err != nil {
			if ctx.Err() == nil {
				_ = s.Comment(fmt.Sprintf(commentFailed, RequestID(s.r.Context())))
			}
			return err
		}
		if done {
			return nil
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-end.C:
				return s.Comment(CommentMaxStream)
			case <-s.idle.C:
				if err := s.Comment(CommentKeepAlive); err != nil {
					return err
				}
			case <-tick.C:
				break wait
			}
		}
	}
}
