package httpx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/agentauth/agentauth/shared/observe/logging"
)

var (
	requestIDPattern   = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	traceparentPattern = regexp.MustCompile(`^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$`)
	amznTracePattern   = regexp.MustCompile(`Root=([0-9A-Za-z-]{1,64})`)
)

type requestIDKey struct{}

// RequestID is the request id Observe gave the request ("" outside it).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// requestIDs returns the request id (the caller's X-Request-Id when sane)
// and the trace id (W3C traceparent, else X-Amzn-Trace-Id, else new).
func requestIDs(r *http.Request) (reqID, traceID string) {
	reqID = r.Header.Get("X-Request-Id")
	if !requestIDPattern.MatchString(reqID) {
		reqID = randomHex(8)
	}
	if m := traceparentPattern.FindStringSubmatch(r.Header.Get("Traceparent")); m != nil {
		traceID = m[1]
	} else if m := amznTracePattern.FindStringSubmatch(r.Header.Get("X-Amzn-Trace-Id")); m != nil {
		traceID = m[1]
	} else {
		traceID = randomHex(16)
	}
	return reqID, traceID
}

type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

// Unwrap lets http.ResponseController reach the connection behind
// Observe's writer: an event stream (sse.go) flushes every event and
// moves the server's deadlines through it.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// Observe gives every request a request id and trace id (in the context,
// so every log line of the request carries them and every error body its
// request id, and in X-Request-Id), recovers panics into a generic 500,
// and writes one access log line with the route pattern — never the
// query, which may hold a code or state.
func Observe(log *slog.Logger, next http.Handler) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		reqID, traceID := requestIDs(r)
		ctx := logging.WithAttrs(r.Context(), slog.String("requestId", reqID), slog.String(logging.TraceIDKey, traceID))
		ctx = context.WithValue(ctx, requestIDKey{}, reqID)
		r = r.WithContext(ctx)
		w.Header().Set("X-Request-Id", reqID)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				log.ErrorContext(ctx, "handler panic", "panic", slog.AnyValue(p).String())
				if sw.status == 0 {
					WriteError(sw, r, http.StatusInternalServerError, CodeInternal, "")
				}
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			log.InfoContext(ctx, "request",
				"method", r.Method,
				"route", strings.TrimPrefix(route, r.Method+" "),
				"status", sw.status,
				"bytes", sw.bytes,
				"durationMs", float64(time.Since(start).Microseconds())/1000,
			)
		}()
		next.ServeHTTP(sw, r)
	})
}
